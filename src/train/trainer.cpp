#include "train/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"
#include "model/config.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"
#include "model/schema.h"
#include "tiny/m2_chat_template.h"
#include "ops/ops.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/tokenizer.h"
#include "train/adamw.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/graph.h"
#include "train/kernels.h"
#include "train/params.h"
#include "train/retrieval_task.h"

namespace mmx::train {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

void write_file(const fs::path& p, const std::string& s) { mmx::write_file(p.string(), s); }

// The options a run is fixed by (train_state.json "run"); a resume reads them back.
json run_json(const TrainOptions& o) {
  const TinyOptions& s = o.shape;
  return {{"arch", s.arch},         {"n_layers", s.n_layers},   {"d_model", s.d_model},
          {"n_heads", s.n_heads},   {"n_kv_heads", s.n_kv_heads}, {"head_dim", s.head_dim},
          {"rotary_dim", s.rotary_dim}, {"ffn_dim", s.ffn_dim}, {"n_experts", s.n_experts},
          {"n_experts_active", s.n_experts_active}, {"vocab_size", s.vocab_size},
          {"max_position", s.max_position}, {"full_attn_interval", s.full_attn_interval},
          {"n_dense_layers", s.n_dense_layers}, {"dense_ffn_dim", s.dense_ffn_dim},
          {"shared_ffn_dim", s.shared_ffn_dim}, {"index_dim", s.index_dim}, {"msa_block", s.msa_block},
          {"msa_topk", s.msa_topk}, {"data", o.data}, {"val", o.val}, {"seq_len", o.seq_len},
          {"batch", o.batch}, {"micro_batch", o.micro_batch}, {"lr", o.lr}, {"min_lr_ratio", o.min_lr_ratio},
          {"warmup", o.warmup}, {"weight_decay", o.weight_decay}, {"clip", o.clip}, {"bias_rate", o.bias_rate},
          {"seed", o.seed}, {"eval_windows", o.eval_windows}, {"save_dtype", o.save_dtype},
          {"index_loss_weight", o.index_loss_weight}, {"task", o.task}, {"task_pairs", o.task_pairs}, {"init", o.init}};
}

void apply_run_json(const json& j, TrainOptions& o) {
  TinyOptions& s = o.shape;
  s.arch = j.at("arch");
  s.n_layers = j.at("n_layers");
  s.d_model = j.at("d_model");
  s.n_heads = j.at("n_heads");
  s.n_kv_heads = j.at("n_kv_heads");
  s.head_dim = j.at("head_dim");
  s.rotary_dim = j.at("rotary_dim");
  s.ffn_dim = j.at("ffn_dim");
  s.n_experts = j.at("n_experts");
  s.n_experts_active = j.at("n_experts_active");
  s.vocab_size = j.at("vocab_size");
  s.max_position = j.at("max_position");
  s.full_attn_interval = j.value("full_attn_interval", s.full_attn_interval);
  s.n_dense_layers = j.value("n_dense_layers", s.n_dense_layers);
  s.dense_ffn_dim = j.value("dense_ffn_dim", s.dense_ffn_dim);
  s.shared_ffn_dim = j.value("shared_ffn_dim", s.shared_ffn_dim);
  s.index_dim = j.value("index_dim", s.index_dim);
  s.msa_block = j.value("msa_block", s.msa_block);
  s.msa_topk = j.value("msa_topk", s.msa_topk);
  o.data = j.at("data");
  o.val = j.at("val");
  o.seq_len = j.at("seq_len");
  o.batch = j.at("batch");
  o.micro_batch = j.at("micro_batch");
  o.lr = j.at("lr");
  o.min_lr_ratio = j.at("min_lr_ratio");
  o.warmup = j.at("warmup");
  o.weight_decay = j.at("weight_decay");
  o.clip = j.at("clip");
  o.bias_rate = j.at("bias_rate");
  o.seed = j.at("seed");
  o.eval_windows = j.at("eval_windows");
  o.save_dtype = j.at("save_dtype");
  o.index_loss_weight = j.value("index_loss_weight", 0.0);
  o.task = j.value("task", "");
  o.task_pairs = j.value("task_pairs", int64_t(16));
  o.init = j.value("init", "");
}

// The tokenizer of a new run: copied from --tokenizer (with its tokenizer_config.json when it has
// one beside it) or trained on the data. Writes both files into `out`.
void make_tokenizer(const TrainOptions& o, const std::string& text, const fs::path& out) {
  if (!o.tokenizer.empty()) {
    const fs::path src = fs::is_directory(o.tokenizer) ? fs::path(o.tokenizer) / "tokenizer.json" : fs::path(o.tokenizer);
    write_file(out / "tokenizer.json", read_file(src.string(), "tokenizer"));
    const fs::path cfg = src.parent_path() / "tokenizer_config.json";
    if (fs::exists(cfg)) write_file(out / "tokenizer_config.json", read_file(cfg.string(), "tokenizer config"));
    return;
  }
  tok::BpeTrainOptions bo;
  bo.vocab_size = o.vocab;
  bo.chat_template = kM2ChatTemplate;
  bo.model_max_length = o.shape.max_position;
  if (!o.quiet) std::fprintf(stderr, "training a %d-token BPE tokenizer on %s ...\n", o.vocab, o.data.c_str());
  const tok::TrainedTokenizer t = tok::train_bpe(text, bo);
  write_file(out / "tokenizer.json", t.tokenizer_json);
  write_file(out / "tokenizer_config.json", t.tokenizer_config_json);
}

// bos/eos: the tokenizer's ]~!b[ and [e~[ ids.
void write_config(const TrainOptions& o, int64_t bos, int64_t eos, const fs::path& out) {
  TinyOptions s = o.shape;
  s.dtype = o.save_dtype;
  write_file(out / "config.json", tiny_config_json(s, bos, eos));
  const json gen = {{"bos_token_id", bos}, {"eos_token_id", eos}, {"temperature", 1.0}, {"top_p", 0.95},
                    {"top_k", 40}};
  write_file(out / "generation_config.json", gen.dump(2) + "\n");
}

// Loss curve (train and held-out) as PNG through gnuplot, when it is installed.
void plot_loss(const fs::path& out, bool quiet) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    if (!quiet) std::fprintf(stderr, "note: gnuplot not found; loss.png not drawn (apt install gnuplot-nox)\n");
    return;
  }
  const std::string script = fmt::format(
      "set terminal png size 900,540\nset output '{0}/loss.png'\nset datafile separator ','\n"
      "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\n"
      "plot '{0}/train_log.csv' every ::1 using 1:3 with lines lw 2 title 'train', \\\n"
      "     '' every ::1 using 1:($5 > 0 ? $5 : 1/0) with linespoints pt 7 title 'held-out'\n",
      out.string());
  write_file(out / "loss.gnuplot", script);
  const std::string cmd = "gnuplot '" + (out / "loss.gnuplot").string() + "' 2>/dev/null";
  if (std::system(cmd.c_str()) != 0 && !quiet) std::fprintf(stderr, "note: gnuplot failed; loss.png not drawn\n");
}

std::string eta(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const int64_t t = int64_t(s);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t / 60 % 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

}  // namespace

TrainResult train_run(const TrainOptions& opt_in) {
  TrainOptions o = opt_in;
  const auto t0 = std::chrono::steady_clock::now();
  int64_t start_step = 0, tokens_seen = 0;
  CheckpointInfo ckpt;
  if (!o.resume.empty()) {
    const fs::path rd(o.resume);
    ckpt = open_checkpoint(rd, o.quiet);
    const int64_t want_steps = o.steps;
    apply_run_json(ckpt.run, o);
    o.steps = want_steps;
    start_step = ckpt.step;
    tokens_seen = ckpt.tokens;
    if (o.out.empty()) o.out = o.resume;
    if (start_step >= o.steps) fail("--resume: the run is already at step {} (ask for more --steps)", start_step);
  }
  if (o.out.empty()) fail("mmx train: -o DIR is required");
  if (o.micro_batch == 0) o.micro_batch = o.batch;
  if (o.batch < 1 || o.seq_len < 2 || o.micro_batch < 1 || o.batch % o.micro_batch != 0)
    fail("mmx train: need --batch >= 1, --seq-len >= 2, and --micro-batch dividing --batch");
  if (o.steps < 1) fail("mmx train: --steps must be >= 1");
  if (o.save_dtype != "bf16" && o.save_dtype != "f32") fail("mmx train: --save-dtype must be bf16 or f32");
  set_n_threads(o.threads);

  const fs::path out(o.out);
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) fail("cannot create {}: {}", o.out, ec.message());
  const bool synthetic = o.task == "retrieval";
  if (!synthetic && !o.task.empty()) fail("mmx train: unknown --task '{}' (retrieval, or none to train on --data)", o.task);
  if (!o.init.empty() && o.resume.empty()) {
    if (synthetic) fail("mmx train: --init fine-tunes a text model; it does not combine with --task");
    if (!fs::exists(fs::path(o.init) / "model.safetensors"))
      fail("--init {}: no model.safetensors there (give a checkpoint directory)", o.init);
    if (o.tokenizer.empty()) o.tokenizer = o.init;  // the embedding rows are that tokenizer's ids
  }
  if (o.resume.empty() || o.out != o.resume) {
    if (!o.resume.empty()) {
      for (const char* f : {"tokenizer.json", "tokenizer_config.json", "train_log.csv"})
        if (fs::exists(fs::path(o.resume) / f)) fs::copy_file(fs::path(o.resume) / f, out / f, fs::copy_options::overwrite_existing);
    } else if (!synthetic) {
      make_tokenizer(o, read_file(o.data, "training data"), out);
    }
  }
  if (o.seq_len > o.shape.max_position) o.shape.max_position = int(o.seq_len);
  // The windows a step trains on (rows row0.. of step) and the held-out ones (windows w0..).
  std::function<void(int64_t, int64_t, int64_t, std::vector<int32_t>&, std::vector<int32_t>&)> draw;
  std::function<void(int64_t, int64_t, std::vector<int32_t>&, std::vector<int32_t>&)> draw_val;
  int64_t n_val_windows = 0;
  TokenData data, val;
  if (synthetic) {
    if (4 * o.task_pairs > o.seq_len)
      fail("mmx train --task retrieval: {} pairs need --seq-len >= {}", o.task_pairs, 4 * o.task_pairs);
    o.shape.vocab_size = kRetrievalVocab;
    write_config(o, 0, 1, out);
    draw = [&o](int64_t step, int64_t row0, int64_t n, std::vector<int32_t>& tk, std::vector<int32_t>& tg) {
      retrieval_rows(o.seed, step, row0, n, o.seq_len, o.task_pairs, false, tk, tg);
    };
    draw_val = [&o](int64_t w0, int64_t n, std::vector<int32_t>& tk, std::vector<int32_t>& tg) {
      retrieval_rows(o.seed, 0, w0, n, o.seq_len, o.task_pairs, true, tk, tg);
    };
    n_val_windows = o.eval_windows;
  } else {
    const tok::Tokenizer tk = tok::Tokenizer::from_path((out / "tokenizer.json").string());
    o.shape.vocab_size = tk.vocab_size();
    const int64_t eos = tk.token_to_id("[e~[");
    if (eos < 0) fail("the tokenizer has no end-of-text token [e~[ (a MiniMax-M2 tokenizer is needed)");
    write_config(o, tk.token_to_id("]~!b["), eos, out);
    data = tokenize_corpus(tk, read_file(o.data, "training data"), o.quiet ? nullptr : "training data");
    if (data.size() < o.seq_len + 1)
      fail("{}: only {} tokens, fewer than --seq-len + 1 = {}", o.data, data.size(), o.seq_len + 1);
    if (!o.val.empty()) val = tokenize_corpus(tk, read_file(o.val, "held-out data"), o.quiet ? nullptr : "held-out data");
    draw = [&o, &data](int64_t step, int64_t row0, int64_t n, std::vector<int32_t>& tk, std::vector<int32_t>& tg) {
      data.sample_windows(o.seed, step, row0, n, o.seq_len, tk, tg);
    };
    draw_val = [&o, &val](int64_t w0, int64_t n, std::vector<int32_t>& tk, std::vector<int32_t>& tg) {
      val.windows_in_order(w0, n, o.seq_len, tk, tg);
    };
    if (val.size() >= o.seq_len + 1) n_val_windows = std::min<int64_t>(o.eval_windows, (val.size() - 1) / o.seq_len);
  }
  const ModelConfig cfg = load_config(o.out);

  ParamSet<float> P(param_layout(cfg));
  AdamWConfig ac;
  ac.weight_decay = o.weight_decay;
  AdamW opt(ac, P.total());
  const DType save_dtype = o.save_dtype == "f32" ? DType::kF32 : DType::kBF16;
  if (start_step > 0) {
    load_checkpoint_state(ckpt, P, opt);
    if (out == fs::path(o.resume)) repair_model_export(ckpt, out, P, save_dtype);
  } else if (!o.init.empty()) {
    // The fields a tensor shape does not show, and the ones it does (a clearer message).
    const ModelConfig ic = load_config(o.init);
    const auto key = [](const ModelConfig& c) {
      return fmt::format("{} layers={} hidden={} heads={} kv-heads={} head-dim={} rotary-dim={} experts={} top-k={} "
                         "ffn={} vocab={}",
                         c.architecture, c.n_layers, c.d_model, c.n_heads, c.n_kv_heads, c.head_dim, c.rotary_dim,
                         c.n_experts, c.n_experts_active, c.ffn_dim, c.vocab_size);
    };
    if (key(ic) != key(cfg))
      fail("--init {} is {}; this run is {} (pass --init's shape flags)", o.init, key(ic), key(cfg));
    load_params(o.init, P);
  } else {
    init_params(cfg, o.seed, P);
  }
  if (o.recompute != "auto" && o.recompute != "always" && o.recompute != "never")
    fail("mmx train: --recompute must be auto, always or never");
  const GraphOptions go{o.recompute == "auto" ? -1 : o.recompute == "always" ? 1 : 0};
  auto graph = make_graph<float>(cfg, P, o.micro_batch, o.seq_len, go);
  // Layer il's routing bias (a non-trainable parameter, model/schema.h), or null.
  std::vector<float*> routing_bias(size_t(cfg.n_layers), nullptr);
  if (cfg.use_routing_bias)
    for (int il = 0; il < cfg.n_layers; ++il) {
      const std::string name = tensor_name(cfg, TensorRole::kRouterBias, il);
      for (const ParamInfo& i : P.infos)
        if (!i.trainable && i.name == name) routing_bias[size_t(il)] = P.value.data() + i.offset;
    }

  // The log: appended a row a step; a resume cuts it back to the checkpoint's step.
  if (start_step == 0 && fs::exists(out / "train_state.json")) {
    // A new run in an old run's directory: its commit record no longer describes this directory.
    if (!o.quiet) std::fprintf(stderr, "note: %s held another run's checkpoint; this new run replaces it\n", o.out.c_str());
    fs::remove(out / "train_state.json");
  }
  TrainLog log = start_step > 0 ? TrainLog::resume(out / "train_log.csv", start_step, o.quiet)
                                : TrainLog::start(out / "train_log.csv");

  const auto n_scored = [](const std::vector<int32_t>& targets) {
    return int64_t(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; }));
  };
  auto evaluate = [&]() -> double {
    if (n_val_windows == 0) return -1;
    std::vector<int32_t> tokens, targets;
    double sum = 0;
    int64_t scored = 0;
    for (int64_t w0 = 0; w0 < n_val_windows; w0 += o.micro_batch) {
      const int64_t nb = std::min(o.micro_batch, n_val_windows - w0);
      draw_val(w0, nb, tokens, targets);
      TrainBatch b{nb, o.seq_len, tokens.data(), targets.data(), nullptr, nullptr};
      sum += graph->forward_loss(b);
      scored += n_scored(targets);
    }
    graph->take_expert_loads();  // evaluation does not move the routing bias
    return sum / double(scored);
  };

  TrainResult res;
  const int64_t n_micro = o.batch / o.micro_batch, step_tokens = o.batch * o.seq_len;
  double val_loss = -1;
  const auto loop_t0 = std::chrono::steady_clock::now();
  for (int64_t step = start_step; step < o.steps; ++step) {
    const auto s0 = std::chrono::steady_clock::now();
    P.zero_grad();
    double loss_sum = 0, kl_sum = 0;
    // The whole step's rows first: the loss is a mean over the step's scored targets (the global
    // token normaliser), so any split into micro-batches gives the same gradient.
    std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(n_micro)), targets(static_cast<size_t>(n_micro));
    int64_t step_scored = 0;
    for (int64_t mb = 0; mb < n_micro; ++mb) {
      draw(step, mb * o.micro_batch, o.micro_batch, tokens[size_t(mb)], targets[size_t(mb)]);
      step_scored += n_scored(targets[size_t(mb)]);
    }
    if (step_scored == 0) fail("mmx train: step {} has no scored target", step + 1);
    for (int64_t mb = 0; mb < n_micro; ++mb) {
      TrainBatch b{o.micro_batch, o.seq_len, tokens[size_t(mb)].data(), targets[size_t(mb)].data(), nullptr, nullptr};
      // The KL is a mean over a micro-batch's rows: 1/n_micro of the weight keeps splits invariant.
      b.index_loss_weight = o.index_loss_weight / double(n_micro);
      loss_sum += graph->forward_backward(b, 1.0 / double(step_scored));
      kl_sum += graph->index_kl() / double(n_micro);
    }
    const double gnorm = clip_grad_norm(P, o.clip);
    const double lr = lr_schedule(step, o.steps, o.warmup, o.lr, o.min_lr_ratio);
    opt.step(P, lr);
    // Aux-loss-free balancing (DeepSeek-V3 §2.1.2, as MiniMax-M2's routing bias):
    // not a gradient step — each layer's bias moves by ±rate toward equal expert loads.
    const auto loads = graph->take_expert_loads();
    for (int il = 0; il < cfg.n_layers; ++il)
      if (float* bias = routing_bias[size_t(il)]) {
        double mean = 0;
        for (int64_t l : loads[size_t(il)]) mean += double(l) / double(cfg.n_experts);
        for (int e = 0; e < cfg.n_experts; ++e) {
          const double diff = mean - double(loads[size_t(il)][size_t(e)]);
          bias[e] += float(o.bias_rate * (diff > 0 ? 1.0 : diff < 0 ? -1.0 : 0.0));
        }
      }
    tokens_seen += step_tokens;
    const double loss = loss_sum / double(step_scored);
    const bool last = step + 1 == o.steps;
    val_loss = -1;
    if (last || (o.eval_every > 0 && (step + 1) % o.eval_every == 0)) val_loss = evaluate();
    const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_t0).count();
    const double tps = double(tokens_seen - start_step * step_tokens) / std::max(elapsed, 1e-9);
    log.append(fmt::format("{},{:.6g},{:.6f},{:.6g},{:.6f},{},{:.6f},{:.3f},{:.1f}", step + 1, lr, loss, gnorm,
                                   val_loss, tokens_seen, kl_sum, step_s, tps));
    if (!o.quiet) {
      const double left = double(o.steps - step - 1) * elapsed / double(step + 1 - start_step);
      std::fprintf(stderr, "\rstep %lld/%lld  loss %.4f  lr %.2e  |g| %.3f  %.0f tok/s  ETA %s   ",
                   (long long)(step + 1), (long long)o.steps, loss, lr, gnorm, tps, eta(left).c_str());
      if (val_loss >= 0) std::fprintf(stderr, "\n  held-out loss %.4f (ppl %.2f)\n", val_loss, std::exp(val_loss));
    }
    if (o.on_step) {
      std::vector<int32_t> rows;
      for (const auto& t : tokens) rows.insert(rows.end(), t.begin(), t.end());
      o.on_step(StepView{step + 1, tokens_seen, loss, rows, P.value, opt.m, opt.v});
    }
    res.last_loss = loss;
    if (val_loss >= 0) res.val_loss = val_loss;
    if (last || (o.save_every > 0 && (step + 1) % o.save_every == 0)) {
      commit_checkpoint(out, P, opt, step + 1, tokens_seen, run_json(o), save_dtype, log);
    }
  }
  if (!o.quiet) std::fprintf(stderr, "\n");
  plot_loss(out, o.quiet);
  res.steps = o.steps;
  res.tokens = tokens_seen;
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mmx::train
