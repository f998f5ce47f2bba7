// The training loop end to end on a small generated text (a handful of steps each):
//   * a resumed run equals the uninterrupted run bitwise (master weights, AdamW moments, the
//     checkpoint and the log), at a fixed seed and thread count;
//   * the written checkpoint loads in the inference engine and its logits equal the training
//     graph's on the trained weights (f32 checkpoint);
//   * learning is real: the held-out loss falls below the unigram entropy of the data;
//   * the routing bias moves (aux-loss-free balancing) and only by ±rate per step;
//   * --init starts a new run from a checkpoint's weights and tokenizer (fine-tuning), and refuses a
//     checkpoint of another shape;
//   * bad options are refused with a message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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

// A deterministic text with real structure (repeated phrases with counters).
const fs::path& corpus() {
  static const fs::path p = [] {
    const fs::path f = tmp("corpus.txt");
    std::ofstream o(f);
    const char* animals[] = {"cat", "dog", "bird", "fish", "horse"};
    const char* verbs[] = {"sees", "likes", "follows", "finds"};
    for (int i = 0; i < 3000; ++i)
      o << "the " << animals[i % 5] << " " << verbs[(i / 5) % 4] << " the " << animals[(i * 7 + 3) % 5] << " "
        << (i % 10) << ".\n";
    return f;
  }();
  return p;
}

TrainOptions small_run(const fs::path& out, int64_t steps) {
  TrainOptions o;
  o.shape.arch = "minimax_m2";
  o.shape.n_layers = 2, o.shape.d_model = 32, o.shape.n_heads = 4, o.shape.n_kv_heads = 2, o.shape.head_dim = 8;
  o.shape.rotary_dim = 4, o.shape.ffn_dim = 32, o.shape.n_experts = 4, o.shape.n_experts_active = 2;
  o.data = corpus().string();
  o.val = corpus().string();
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

TEST(Trainer, ResumeEqualsUninterruptedBitwise) {
  const fs::path a = tmp("straight"), b = tmp("resumed");
  train_run(small_run(a, 6));
  train_run(small_run(b, 3));
  TrainOptions r = small_run("", 6);
  r.resume = b.string();
  train_run(r);
  for (const char* f : {"train_state.safetensors", "model.safetensors"})
    EXPECT_EQ(read(a / f), read(b / f)) << f << " differs between the straight and the resumed run";
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
