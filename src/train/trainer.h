// The training loop behind `mmx train`: data → micro-batches → graph forward/backward → clip →
// AdamW (+ the aux-loss-free routing-bias update) → log, evaluate, checkpoint, resume.
//
// A run directory holds an ordinary HF checkpoint (config.json, generation_config.json,
// model.safetensors, tokenizer.json, tokenizer_config.json) that every other command loads, plus
//   train_state.json          step, tokens seen, the options that fix the run, the log so far
//   train_state.safetensors   f32 master weights, AdamW moments (exact resume)
//   train_log.csv, loss.png   one row per step; the loss curve (gnuplot, when installed)
// Data order is a pure function of (seed, step, micro-batch, row), so a resumed run draws the same
// windows as an uninterrupted one; with the same thread count it is bitwise the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "tiny/tiny.h"

namespace mmx::train {

// What a run looks like right after optimizer step `step` (1-based) — for tests and tools that
// follow a run (TrainOptions::on_step). The spans point into the live state: read them in the call.
struct StepView {
  int64_t step = 0;                    // steps done, counted from the start of the whole run
  int64_t tokens = 0;                  // training tokens seen, the whole run
  double loss = 0;                     // this step's mean CE
  std::span<const int32_t> rows;       // [batch · seq_len] the token ids this step trained on
  std::span<const float> master, adam_m, adam_v;  // [n params] after the update
};

struct TrainOptions {
  TinyOptions shape;            // arch + shape flags (make-tiny's); vocab from the tokenizer
  std::string data, val;        // UTF-8 text files; val optional (unused with a task)
  std::string task;             // "" = train on `data`; "retrieval" = the synthetic retrieval task
                                // (retrieval_task.h): no text, no tokenizer, vocab kRetrievalVocab
  int64_t task_pairs = 16;      // retrieval: key-value pairs per sequence
  std::string tokenizer;        // tokenizer.json to use; "" = train one on `data`
  int vocab = 4096;             // size of the tokenizer trained when `tokenizer` is ""
  int64_t steps = 100;          // optimizer steps in total (a resumed run continues to this)
  int64_t seq_len = 128;
  int64_t batch = 8;            // sequences per optimizer step
  int64_t micro_batch = 0;      // sequences per forward/backward (0 = batch); must divide batch
  double lr = 3e-3;
  double min_lr_ratio = 0.1;    // cosine floor, as a fraction of lr
  int64_t warmup = 20;
  double weight_decay = 0.1;
  double clip = 1.0;            // global gradient-norm clip (0 = off)
  double bias_rate = 1e-3;      // aux-loss-free routing-bias update rate (DeepSeek-V3's γ)
  double index_loss_weight = 0; // M3: loss = CE + W · the MSA indexer's KL toward the main attention
  uint64_t seed = 1;
  int64_t eval_every = 50;      // held-out loss every N steps (and at the end); 0 = only at the end
  int64_t eval_windows = 32;    // held-out windows of seq_len tokens per evaluation
  int64_t save_every = 0;       // checkpoint every N steps (0 = only at the end)
  std::string save_dtype = "bf16";  // model.safetensors dtype: bf16 | f32 (master weights stay f32)
  std::string out;              // run directory
  std::string init;             // a new run starts from this checkpoint's weights (fine-tuning)
                                // instead of the seeded initialisation: same shape flags needed;
                                // its tokenizer is the default `tokenizer`; ignored by a resume
  std::string resume;           // continue the run saved in this directory ("" = a new run); its
                                // train_state.json fixes shape, data, batch, lr, seed; `steps`
                                // may extend it; `out` "" = the same directory
  int threads = 0;              // 0 = all cores
  std::string recompute = "auto";  // softmax attention probabilities: auto | always | never
                                   // (GraphOptions; memory only, the run is bitwise the same)
  bool quiet = false;           // no progress line (tests)
  std::function<void(const StepView&)> on_step;  // called after every step (null = none)
};

struct TrainResult {
  int64_t steps = 0;
  int64_t tokens = 0;        // training tokens seen
  double last_loss = 0;      // mean CE of the last step (nats/token)
  double val_loss = -1;      // last held-out mean CE (-1 when no val file)
  double wall_s = 0;         // this invocation
};

// Throws mmx::Error with an actionable message on bad options, files or a mismatched resume.
TrainResult train_run(const TrainOptions& o);

}  // namespace mmx::train
