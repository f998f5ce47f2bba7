// The training loop end to end on a small generated text (a handful of steps each):
//   * a resumed run continues where the stopped one ended — its first step is step 4 on step 4's
//     rows — and equals the uninterrupted run bitwise at every step after the stop (master
//     weights, AdamW moments, the rows drawn) and at the end (checkpoint, train state, log), at a
//     fixed seed and thread count;
//   * the written checkpoint loads in the inference engine and its logits equal the training
//     graph's on the trained weights (f32 checkpoint);
//   * learning generalises: the loss on a held-out text — the same grammar drawn with another
//     seed, none of whose evaluated windows occurs in the training text — falls below 0.6 × the
//     unigram entropy;
//   * the routing bias moves (aux-loss-free balancing) and only by ±rate per step;
//   * --init starts a new run from a checkpoint's weights and tokenizer (fine-tuning), and refuses a
//     checkpoint of another shape;
//   * bad options are refused with a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <random>
#include <span>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/generate.h"
#include "model/config.h"
#include "model/model.h"
#include "formats/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "engine_parity.h"
#include "train/graph.h"
#include "train/params.h"
#include "train/retrieval_task.h"
#include "train/trainer.h"

namespace mmx::train {
namespace {

namespace fs = std::filesystem;

fs::path tmp(const std::string& name) {
  return fs::temp_directory_path() / ("mmx_trainer_test_" + std::to_string(getpid()) + "_" + name);
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A generated text of one grammar: lines "the A V the B N." with the animal A, the verb V and the
// digit N drawn at random (mt19937_64, exactly specified) and B a fixed function of (A, V). Part
// of it can be learned (B, the words' spelling, the frame), part cannot (ln 200 nats a line), so
// a text drawn with another seed is held-out text of the same kind: its windows of 32 tokens are
// not in the training text (asserted below), and only the grammar carries over.
fs::path grammar_text(const std::string& name, uint64_t seed, int lines) {
  const fs::path f = tmp(name);
  std::ofstream o(f);
  const char* animals[] = {"cat", "dog", "bird", "fish", "horse"};
  const char* verbs[] = {"sees", "likes", "follows", "finds"};
  std::mt19937_64 rng(seed);
  for (int i = 0; i < lines; ++i) {
    const uint64_t a = rng() % 5, v = rng() % 4, n = rng() % 10;
    o << "the " << animals[a] << " " << verbs[v] << " the " << animals[(a * 3 + v + 1) % 5] << " " << n << ".\n";
  }
  return f;
}
const fs::path& corpus() {
  static const fs::path p = grammar_text("corpus.txt", 1, 3000);
  return p;
}
const fs::path& heldout() {
  static const fs::path p = grammar_text("heldout.txt", 2, 400);
  return p;
}

TrainOptions small_run(const fs::path& out, int64_t steps) {
  TrainOptions o;
  o.shape.arch = "minimax_m2";
  o.shape.n_layers = 2, o.shape.d_model = 32, o.shape.n_heads = 4, o.shape.n_kv_heads = 2, o.shape.head_dim = 8;
  o.shape.rotary_dim = 4, o.shape.ffn_dim = 32, o.shape.n_experts = 4, o.shape.n_experts_active = 2;
  o.data = corpus().string();
  o.val = heldout().string();
  o.vocab = 300;
  o.steps = steps;
  o.seq_len = 32;
  o.batch = 4;
  o.micro_batch = 2;
  o.lr = 1e-2;
  o.warmup = 2;
  o.eval_every = 0;
  o.eval_windows = 8;
  o.save_dtype = "f32";
  o.out = out.string();
  o.threads = 2;
  o.quiet = true;
  return o;
}

// A step of a run as on_step saw it: the counters and fingerprints of the rows it trained on and
// of the state after it.
struct StepPrint {
  int64_t step, tokens;
  uint64_t rows, master, adam_m, adam_v;
  bool operator==(const StepPrint&) const = default;
};
std::ostream& operator<<(std::ostream& os, const StepPrint& p) {
  return os << "{step " << p.step << ", tokens " << p.tokens << ", rows " << p.rows << ", master " << p.master
            << ", m " << p.adam_m << ", v " << p.adam_v << "}";
}
template <class T>
uint64_t fnv1a(std::span<const T> x) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(x.data());
  for (size_t i = 0; i < x.size_bytes(); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}
// Runs o, returning one StepPrint per step this invocation ran.
std::vector<StepPrint> traced_run(TrainOptions o) {
  std::vector<StepPrint> trace;
  o.on_step = [&](const StepView& v) {
    trace.push_back({v.step, v.tokens, fnv1a(v.rows), fnv1a(v.master), fnv1a(v.adam_m), fnv1a(v.adam_v)});
  };
  train_run(o);
  return trace;
}

// A run stopped after 3 steps and resumed to 6 is the uninterrupted 6-step run: the resumed
// invocation runs steps 4..6 only (not 1..6 again: a resume that retrained from step 0 would
// reach the same end state), draws step 4's rows first, and after each of its steps holds
// exactly the uninterrupted run's state after that step; the end files are the same bytes.
TEST(Trainer, ResumeContinuesTheUninterruptedRunBitwise) {
  const fs::path a = tmp("straight"), b = tmp("resumed");
  const int64_t step_tokens = 4 * 32;  // batch × seq_len of small_run
  const std::vector<StepPrint> straight = traced_run(small_run(a, 6));
  ASSERT_EQ(straight.size(), 6u);
  const std::vector<StepPrint> first = traced_run(small_run(b, 3));
  ASSERT_EQ(first.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(first[k], straight[k]) << "step " << k + 1 << " before the stop";
  const auto saved = nlohmann::json::parse(read(b / "train_state.json"));
  EXPECT_EQ(saved.at("step"), 3);
  EXPECT_EQ(saved.at("tokens"), 3 * step_tokens);

  TrainOptions r = small_run("", 6);
  r.resume = b.string();
  const std::vector<StepPrint> resumed = traced_run(r);
  ASSERT_EQ(resumed.size(), 3u) << "the resumed invocation must run steps 4..6 only";
  EXPECT_EQ(resumed[0].step, 4);
  EXPECT_EQ(resumed[0].tokens, 4 * step_tokens);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(resumed[k], straight[3 + k]) << "step " << k + 4 << " after the resume";

  for (const char* f : {"train_state.json", "train_state-00000006.safetensors", "model.safetensors"}) {
    ASSERT_TRUE(fs::exists(a / f) && fs::exists(b / f)) << f;
    EXPECT_TRUE(read(a / f) == read(b / f)) << f << " differs between the straight and the resumed run";
  }
  // The log too, but for its timing columns (step_s, tokens_per_s) and val_loss (the stopped run
  // evaluated once more, at its last step 3).
  auto untimed = [](const std::string& csv) {
    std::istringstream in(csv);
    std::string line, out;
    while (std::getline(in, line)) {
      std::istringstream cols(line);
      std::string c;
      for (int k = 0; std::getline(cols, c, ','); ++k)
        if (k < 4 || k == 5) out += c + ",";
      out += "\n";
    }
    return out;
  };
  const std::string log = untimed(read(a / "train_log.csv"));
  EXPECT_EQ(log, untimed(read(b / "train_log.csv")));
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 7) << log;  // header + 6 steps
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST(Trainer, CheckpointLoadsInTheEngineAndLearns) {
  const fs::path d = tmp("learn");
  TrainOptions o = small_run(d, 40);
  const TrainResult res = train_run(o);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json", "train_log.csv", "train_state.json"})
    EXPECT_TRUE(fs::exists(d / f)) << f;
  // Unigram entropy of the data under this tokenizer: a model that learned anything beats it.
  const tok::Tokenizer tk = tok::Tokenizer::from_path(d.string());
  const std::vector<int32_t> ids = tk.encode(read(corpus()), false);
  std::map<int32_t, double> count;
  for (int32_t id : ids) count[id] += 1;
  double unigram = 0;
  for (auto& [id, c] : count) unigram -= c / double(ids.size()) * std::log(c / double(ids.size()));
  // The evaluated held-out windows (8 of seq_len + 1 ids from its start) are not in the training
  // text: the loss below is on text the run never trained on.
  const std::vector<int32_t> held = tk.encode(read(o.val), false);
  ASSERT_GE(held.size(), size_t(o.eval_windows * o.seq_len + 1));
  for (int64_t w = 0; w < o.eval_windows; ++w) {
    const auto w0 = held.begin() + w * o.seq_len, w1 = w0 + o.seq_len + 1;
    EXPECT_EQ(std::search(ids.begin(), ids.end(), w0, w1), ids.end()) << "held-out window " << w << " is in the training text";
  }
  std::printf("held-out loss %.4f, train loss %.4f, unigram entropy %.4f nats/token\n", res.val_loss, res.last_loss,
              unigram);
  EXPECT_GT(res.val_loss, 0);
  EXPECT_LT(res.val_loss, 0.6 * unigram) << "held-out " << res.val_loss << " vs unigram " << unigram;

  // The engine loads the checkpoint; its logits equal the training graph's on the same weights.
  expect_engine_logits_equal_graph(d.string(), std::vector<int32_t>(ids.begin(), ids.begin() + 32));

  // The routing bias moved, by a multiple of the rate per step at most `steps` times.
  const TensorStore st = TensorStore::open(d.string());
  const Tensor bias = st.tensor("model.layers.0.block_sparse_moe.e_score_correction_bias");
  double moved = 0;
  for (int e = 0; e < 4; ++e) {
    moved += std::fabs(bias.f32()[e]);
    EXPECT_LE(std::fabs(bias.f32()[e]), o.steps * o.bias_rate + 1e-6);
  }
  EXPECT_GT(moved, 0);
  fs::remove_all(d);
}

// --task retrieval: no text, no tokenizer; the loss is a mean over the scored targets only (1 in
// 16 here), whatever the micro-batch split: the global token normaliser counts the whole step.
TEST(Trainer, RetrievalTaskAndTheGlobalNormaliser) {
  auto run = [](const fs::path& out, int64_t micro) {
    TrainOptions o = small_run(out, 3);
    o.task = "retrieval", o.task_pairs = 4, o.data = "", o.val = "";
    o.micro_batch = micro;
    return train_run(o);
  };
  const fs::path a = tmp("task_whole"), b = tmp("task_split");
  const TrainResult ra = run(a, 4), rb = run(b, 1);
  EXPECT_TRUE(fs::exists(a / "model.safetensors"));
  EXPECT_FALSE(fs::exists(a / "tokenizer.json"));
  EXPECT_EQ(load_config(a.string()).vocab_size, kRetrievalVocab);
  // A first-step loss near ln(1024) (every id equally likely at init) shows the mean is over the
  // scored targets, not over all 32 positions of a row (that would be ~16x smaller).
  EXPECT_NEAR(ra.last_loss, rb.last_loss, 1e-4 * ra.last_loss);
  EXPECT_GT(ra.last_loss, 4.0);
  auto model = load_model(a.string());  // the engine loads it
  EXPECT_EQ(model->config().vocab_size, kRetrievalVocab);
  fs::remove_all(a);
  fs::remove_all(b);
}

// --init: a new run whose step 1 starts from the given checkpoint. With a learning rate of 1e-30,
// no weight decay and no routing-bias move, that step changes nothing an f32 can show, so the
// saved weights must be the source's; a run from the seeded initialisation is far from them.
TEST(Trainer, InitStartsFromTheCheckpointsWeights) {
  const fs::path src = tmp("init_src"), dst = tmp("init_dst"), fresh = tmp("init_fresh");
  train_run(small_run(src, 10));
  auto frozen = [](const fs::path& out) {
    TrainOptions o = small_run(out, 1);
    o.lr = 1e-30, o.weight_decay = 0, o.bias_rate = 0, o.warmup = 0;
    return o;
  };
  TrainOptions o = frozen(dst);
  o.init = src.string();
  train_run(o);
  train_run(frozen(fresh));
  EXPECT_EQ(read(src / "tokenizer.json"), read(dst / "tokenizer.json")) << "--init's tokenizer is the default";
  const TensorStore a = TensorStore::open(src.string()), b = TensorStore::open(dst.string()),
                    c = TensorStore::open(fresh.string());
  ASSERT_EQ(a.names(), b.names());
  double min_fresh = 1e30;
  for (const std::string& name : a.names()) {
    const Tensor ta = a.tensor(name), tb = b.tensor(name), tc = c.tensor(name);
    double d_init = 0, d_fresh = 0;
    for (int64_t k = 0; k < ta.numel(); ++k) {
      d_init = std::max(d_init, double(std::fabs(ta.f32()[k] - tb.f32()[k])));
      d_fresh = std::max(d_fresh, double(std::fabs(ta.f32()[k] - tc.f32()[k])));
    }
    EXPECT_LT(d_init, 1e-12) << name << " is not --init's";
    if (name.find("norm") == std::string::npos && name.find("bias") == std::string::npos)
      min_fresh = std::min(min_fresh, d_fresh);
  }
  EXPECT_GT(min_fresh, 1e-3) << "a run without --init should not land on the source's weights";

  TrainOptions bad = frozen(tmp("init_bad"));
  bad.init = src.string();
  bad.shape.ffn_dim = 16;  // a tensor shape differs
  EXPECT_THROW(train_run(bad), Error);
  bad = frozen(tmp("init_bad"));
  bad.init = src.string();
  bad.shape.rotary_dim = 8;  // no tensor shows it, the config does
  EXPECT_THROW(train_run(bad), Error);
  bad = frozen(tmp("init_bad"));
  bad.init = tmp("no-such-run").string();
  EXPECT_THROW(train_run(bad), Error);
  for (const fs::path& d : {src, dst, fresh, tmp("init_bad")}) fs::remove_all(d);
}

TEST(Trainer, BadOptionsAreRefused) {
  TrainOptions o = small_run(tmp("bad"), 2);
  o.micro_batch = 3;
  EXPECT_THROW(train_run(o), Error);
  o = small_run(tmp("bad"), 2);
  o.data = "/nonexistent/file.txt";
  EXPECT_THROW(train_run(o), Error);
  o = small_run(tmp("bad"), 2);
  o.shape.arch = "minimax_m4";  // no such family
  EXPECT_THROW(train_run(o), Error);
  o = small_run("", 2);
  o.resume = tmp("nothing-here").string();
  EXPECT_THROW(train_run(o), Error);
  fs::remove_all(tmp("bad"));
}

}  // namespace
}  // namespace mmx::train
