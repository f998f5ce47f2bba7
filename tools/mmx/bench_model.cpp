// mmx bench model: prefill and decode tokens/s of a checkpoint (HF directory or GGUF file), medians
// of repeated runs, as fractions of this machine's measured ceilings (bench_peak.h), with where the
// time goes per decode token (attention, router, experts, lm_head, sampling, other) and the
// process's memory. --json ends the output with one JSON object (bench/llamacpp/compare.sh reads it).
//
// Method (llama-bench's, so the two can stand side by side): a random prompt of --prompt tokens is
// prefilled into a fresh cache (one forward); decode runs --gen greedy steps, one token each, after
// a context of --ctx tokens (default: the prompt). Run 0 of each warms caches and page tables and
// is not counted.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "bench_cost.h"
#include "bench_peak.h"
#include "cache_flags.h"
#include "common.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "formats/safetensors.h"
#include "ops/ops.h"

namespace mmx::cli {

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

// HF names (model.layers.N.block_sparse_moe.experts.E.w1.weight, ...) or GGUF names
// (blk.N.ffn_gate_exps.weight, token_embd.weight, output.weight) alike.
TokenCost token_cost(const std::string& path, const ModelConfig& c, DType kv_dtype,
                     std::optional<DType> lm_head_dtype) {
  const TensorStore st = TensorStore::open(path);
  TokenCost tc;
  double expert_bytes = 0, expert_elems = 0, other_elems = 0;
  for (const auto& name : st.names()) {
    const TensorInfo& ti = st.info(name);
    double elems = 1;
    for (int64_t s : ti.shape) elems *= double(s);
    const bool scale = contains(name, "_scale_inv");
    if (contains(name, ".experts.") || contains(name, "_exps")) {
      expert_bytes += double(ti.size_bytes);
      if (!scale) expert_elems += elems;
    } else if (name == "model.embed_tokens.weight" || name == "token_embd.weight") {
      tc.weight_bytes += double(ti.size_bytes) / double(c.vocab_size);  // one row
    } else if (name == "lm_head.weight" || name == "output.weight") {
      const double rows = double(ti.shape.front());
      tc.weight_bytes += lm_head_dtype ? rows * double(dtype_row_bytes(*lm_head_dtype, ti.shape.back()))
                                       : double(ti.size_bytes);
    } else if (!(lm_head_dtype && contains(name, "lm_head.weight_scale_inv"))) {
      tc.weight_bytes += double(ti.size_bytes);
      if (!scale) other_elems += elems;
    }
  }
  const double active = double(c.n_experts_active) / double(c.n_experts);
  tc.weight_bytes += expert_bytes * active;
  tc.flops_per_token = 2.0 * (other_elems + expert_elems * active);
  int kv_layers = 0;
  for (LayerKind k : c.layer_kinds) kv_layers += k != LayerKind::kLightning;
  tc.kv_bytes_per_ctx = double(kv_layers) * 2.0 * double(c.n_kv_heads * c.head_dim) * double(dtype_size(kv_dtype));
  return tc;
}

namespace {

// VmRSS / RssAnon of this process in MiB (0 where /proc is missing).
struct Rss {
  double total_mb = 0, anon_mb = 0;
};
Rss read_rss() {
  Rss r;
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ls(line);
    std::string key;
    double kb = 0;
    ls >> key >> kb;
    if (key == "VmRSS:") r.total_mb = kb / 1024;
    if (key == "RssAnon:") r.anon_mb = kb / 1024;
  }
  return r;
}

struct ModelOpts {
  std::string model;
  CacheFlags cache;
  int prompt = 64, gen = 16, reps = 5, threads = 0, ctx = 0;
  bool peak = true, json = false;
  LoadOptions load;
};

// Feeds ids[from, to) into kv in chunks of at most 512 tokens (untimed set-up).
void fill(Model& m, KvCache& kv, const std::vector<int32_t>& ids, int64_t from, int64_t to, Tensor logits) {
  std::vector<int32_t> pos;
  for (int64_t b = from; b < to; b += 512) {
    const int64_t e = std::min<int64_t>(to, b + 512);
    pos.resize(size_t(e - b));
    for (int64_t i = b; i < e; ++i) pos[size_t(i - b)] = int32_t(i);
    ForwardBatch fb;
    fb.tokens = Tensor(const_cast<int32_t*>(ids.data()) + b, DType::kI32, {e - b});
    fb.positions = Tensor(pos.data(), DType::kI32, {e - b});
    fb.pos0 = b;
    m.forward(fb, kv, logits);
    if (isatty(fileno(stderr))) {  // a bar on a terminal, nothing in logs and pipes
      const int fill_w = int(30 * (e - from) / std::max<int64_t>(1, to - from));
      std::fprintf(stderr, "\rcontext  [%.*s%*s] %lld/%lld tokens", fill_w, "##############################",
                   30 - fill_w, "", (long long)(e - from), (long long)(to - from));
      if (e == to) std::fputc('\n', stderr);
    }
  }
}

void bench_model(const ModelOpts& o) {
  ops::set_n_threads(o.threads);
  const int nt = ops::n_threads();
  const DType kv_dtype = o.cache.kv_dtype();
  const std::optional<DType> ik_dtype = o.cache.ik_dtype();
  auto model = load_model(o.model, progress_bar, o.load);
  const Rss rss_loaded = read_rss();
  const ModelConfig& c = model->config();
  const TokenCost tc = token_cost(o.model, c, kv_dtype, o.load.lm_head_dtype);
  const int64_t dctx = o.ctx > 0 ? o.ctx : o.prompt;  // tokens in the cache when decode starts
  const int64_t cap = std::max<int64_t>(o.prompt, dctx) + o.gen;

  std::mt19937 rng(1);
  std::vector<int32_t> ids(size_t(std::max<int64_t>(o.prompt, dctx)));
  for (auto& t : ids) t = int32_t(rng() % uint64_t(c.vocab_size));
  std::vector<int32_t> pos(size_t(o.prompt));
  for (int i = 0; i < o.prompt; ++i) pos[size_t(i)] = i;
  Buffer logits(DType::kF32, {1, c.vocab_size});
  PhaseTimes ph;
  model->set_phase_times(&ph);

  // Prefill: --prompt tokens into a fresh cache, one forward.
  std::vector<double> prefill;
  PhaseTimes prefill_ph;
  double prefill_s = 0;
  for (int r = 0; r < o.reps + 1; ++r) {
    KvCache kv = model->make_cache(cap, 1024, 4, kv_dtype, ik_dtype);
    ForwardBatch b;
    b.tokens = Tensor(ids.data(), DType::kI32, {o.prompt});
    b.positions = Tensor(pos.data(), DType::kI32, {o.prompt});
    ph.reset();
    const double t = now_s();
    model->forward(b, kv, logits.t());
    const double dt = now_s() - t;
    if (r > 0) {
      prefill.push_back(o.prompt / dt);
      for (int p = 0; p < int(Phase::kCount); ++p) prefill_ph.seconds[p] += ph.seconds[p];
      prefill_s += dt;
    }
  }

  // Decode: --gen greedy steps after dctx tokens; the context is filled once, each run rolls
  // back to it (refilling what a lightning checkpoint cannot restore).
  KvCache kv = model->make_cache(cap, 1024, 4, kv_dtype, ik_dtype);
  fill(*model, kv, ids, 0, dctx, logits.t());
  std::vector<double> decode;
  PhaseTimes decode_ph;
  double decode_s = 0, sampling_s = 0;
  for (int r = 0; r < o.reps + 1; ++r) {
    const int64_t at = kv.rollback(dctx);
    if (at < dctx) fill(*model, kv, ids, at, dctx, logits.t());
    int32_t tok = argmax(logits.f32(), c.vocab_size), p = int32_t(dctx);
    ForwardBatch b;
    b.tokens = Tensor(&tok, DType::kI32, {1});
    b.positions = Tensor(&p, DType::kI32, {1});
    ph.reset();
    double samp = 0;
    const double t = now_s();
    for (int i = 0; i < o.gen; ++i) {
      b.pos0 = p;
      model->forward(b, kv, logits.t());
      const double ts = now_s();
      tok = argmax(logits.f32(), c.vocab_size);
      samp += now_s() - ts;
      ++p;
    }
    const double dt = now_s() - t;
    if (r > 0) {
      decode.push_back(o.gen / dt);
      for (int q = 0; q < int(Phase::kCount); ++q) decode_ph.seconds[q] += ph.seconds[q];
      decode_s += dt;
      sampling_s += samp;
    }
  }
  model->set_phase_times(nullptr);
  const Rss rss = read_rss();

  const double pf = median(prefill), dc = median(decode);
  const double bytes_tok = tc.weight_bytes + tc.kv_bytes_per_ctx * double(dctx);
  const double bw = dc * bytes_tok / 1e9, fl = pf * tc.flops_per_token / 1e9;
  std::printf("model             %s (%d layers, d_model %lld, %d experts top-%d, vocab %lld)\n",
              o.model.c_str(), c.n_layers, (long long)c.d_model, c.n_experts, c.n_experts_active,
              (long long)c.vocab_size);
  std::printf("threads           %d\n", nt);
  std::printf("prefill           %.1f tok/s (median of %d, prompt %d)\n", pf, o.reps, o.prompt);
  std::printf("decode            %.2f tok/s (median of %d, %d tokens after a context of %lld)\n", dc, o.reps,
              o.gen, (long long)dctx);
  std::printf("decode bytes/tok  %.1f MB (active weights %.1f MB + K/V %.1f MB, %s pages)\n", bytes_tok / 1e6,
              tc.weight_bytes / 1e6, tc.kv_bytes_per_ctx * double(dctx) / 1e6, std::string(dtype_name(kv_dtype)).c_str());
  std::printf("prefill flop/tok  %.3f GFLOP (weight GEMMs)\n", tc.flops_per_token / 1e9);
  std::printf("decode bandwidth  %.2f GB/s\n", bw);
  std::printf("prefill compute   %.2f GFLOP/s\n", fl);
  std::printf("memory            RSS %.0f MiB after load (anonymous %.0f MiB: %s), %.0f MiB "
              "after the runs (anonymous %.0f)\n",
              rss_loaded.total_mb, rss_loaded.anon_mb,
              o.load.mmap_weights ? "weights stay in the mmap" : "the weights, read into huge pages",
              rss.total_mb, rss.anon_mb);

  // Per decode token, ms: the phases, sampling, and the rest of the forward.
  nlohmann::json dec_ms, pre_ms;
  const double per_dec = 1e3 / (double(o.reps) * o.gen), per_pre = 1e3 / double(o.reps);
  double dec_phases = 0, pre_phases = 0;
  std::printf("decode per token  ");
  for (int q = 0; q < int(Phase::kCount); ++q) {
    dec_ms[kPhaseNames[q]] = decode_ph.seconds[q] * per_dec;
    pre_ms[kPhaseNames[q]] = prefill_ph.seconds[q] * per_pre;
    dec_phases += decode_ph.seconds[q];
    pre_phases += prefill_ph.seconds[q];
    std::printf("%s %.2f ms, ", kPhaseNames[q], decode_ph.seconds[q] * per_dec);
  }
  dec_ms["sampling"] = sampling_s * per_dec;
  dec_ms["other"] = (decode_s - dec_phases - sampling_s) * per_dec;
  pre_ms["other"] = (prefill_s - pre_phases) * per_pre;
  std::printf("sampling (greedy) %.3f ms, other %.2f ms\n", sampling_s * per_dec,
              (decode_s - dec_phases - sampling_s) * per_dec);
  nlohmann::json j = {{"model", o.model},
                      {"threads", nt},
                      {"prompt", o.prompt},
                      {"gen", o.gen},
                      {"ctx", dctx},
                      {"reps", o.reps},
                      {"prefill_tok_s", pf},
                      {"decode_tok_s", dc},
                      {"prefill_runs_tok_s", prefill},
                      {"decode_runs_tok_s", decode},
                      {"decode_bytes_per_tok", bytes_tok},
                      {"decode_gb_s", bw},
                      {"prefill_gflop_s", fl},
                      {"rss_mb", rss.total_mb},
                      {"rss_anon_mb", rss.anon_mb},
                      {"decode_ms_per_tok", dec_ms},
                      {"prefill_ms", pre_ms}};
  if (o.peak) {
    const MemBandwidth mb = measure_bandwidth(512, 5, nt);
    const double fma = measure_fma_gflops(nt), i8 = measure_int8_gops(nt);
    std::printf("machine           read %.2f GB/s (%s, %d threads), copy %.2f GB/s, FMA %.1f GFLOP/s, int8 dot %.1f "
                "GOP/s (%d threads)\n",
                mb.read_gbs, mb.read_kernel.c_str(), mb.read_threads, mb.copy_gbs, fma, i8, nt);
    std::printf("fraction          decode %.0f%% of read bandwidth; prefill %.0f%% of FMA peak\n",
                100 * bw / mb.read_gbs, 100 * fl / fma);
    j["bw_ceiling_gb_s"] = mb.read_gbs;
    j["fma_gflop_s"] = fma;
    j["int8_gop_s"] = i8;
    j["decode_bw_fraction"] = bw / mb.read_gbs;
    j["prefill_fma_fraction"] = fl / fma;
  }
  if (o.json) std::printf("%s\n", j.dump().c_str());
}

}  // namespace

void add_bench_model(CLI::App* bench, Action& action) {
  auto o = std::make_shared<ModelOpts>();
  CLI::App* m = bench->add_subcommand("model", "Prefill and decode speed of a checkpoint or GGUF file");
  m->add_option("-m,--model", o->model, "Checkpoint directory or .gguf file")->required();
  m->add_option("-p,--prompt", o->prompt, "Prompt tokens for prefill")
      ->capture_default_str()->check(CLI::Range(1, 1 << 20));
  m->add_option("-n,--gen", o->gen, "Decode steps")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  m->add_option("-c,--ctx", o->ctx, "Tokens in the cache when decode starts (0: the prompt)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 22));
  m->add_option("-r,--reps", o->reps, "Repetitions (the median is reported)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  m->add_option("-t,--threads", o->threads, "Threads (0 = all cores)");
  add_load_options(m, &o->load);
  add_cache_flags(m, &o->cache);
  m->add_flag("--json", o->json, "End with one JSON line (medians, ceilings, per-op ms, RSS)");
  m->add_flag("!--no-peak", o->peak, "Skip measuring the machine ceilings");
  m->callback([o, &action] { action = [o] { bench_model(*o); }; });
}

}  // namespace mmx::cli
