// mmx grad: the training loss of one batch and every parameter's gradient, for the gradient checks
// against the PyTorch reference (reference/torch_grad.py writes the same file layout).
//   batch: .npy int [B, T+1]: inputs = [:, :-1], targets = [:, 1:] (-1 = not scored; as an input
//          it is read as id 0)
//   mask:  .npy bool/uint8 [B, T, T] visibility (optional; default causal), or
//   parents: .npy int [B, T] prefix-tree parent links, parents[i] in [-1, i) (train/visibility.h)
//   out:   safetensors, F64: "loss" [1] = Σ CE / scored targets (+ W · the M3 indexer KL with
//          --index-loss-weight W), and d loss / d θ under each trainable tensor's checkpoint name
//          (the routing bias has no gradient and is left out)
#include <cstdio>

#include "base/error.h"
#include "common.h"
#include "model/config.h"
#include "formats/safetensors.h"
#include "ops/ops.h"
#include "train/graph.h"
#include "train/kernels.h"
#include "train/npy.h"
#include "train/params.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::string model, batch, mask, parents, out, dtype = "f64";
  int threads = 0;
  double index_loss_weight = 0;  // M3: loss = ce + W · kl (reference/torch_grad.py --index-loss-weight)
};

template <class R>
void run_grad(const Opts& o) {
  const ModelConfig cfg = load_config(o.model);
  train::ParamSet<R> P(train::param_layout(cfg));
  train::load_params(o.model, P);
  const train::NpyArray b = train::read_npy(o.batch);
  if (b.shape.size() != 2 || b.shape[1] < 2) fail("{}: the batch must be [B, T+1] with T >= 1", o.batch);
  const int64_t B = b.shape[0], T = b.shape[1] - 1;
  if (o.index_loss_weight != 0 && cfg.family != Family::kMiniMaxM3)
    fail("--index-loss-weight applies to MiniMax-M3 (MSA) checkpoints only");
  std::vector<int32_t> tokens(size_t(B * T)), targets(size_t(B * T));
  std::vector<uint8_t> real(size_t(B * T));  // rows holding a real input (the KL's rows, as torch)
  for (int64_t s = 0; s < B; ++s)
    for (int64_t t = 0; t < T; ++t) {
      // -1 (padding) as an input id is embedded as id 0, as reference/torch_grad.py does; it is
      // never a scored target's own token, so only unscored tails should hold it.
      const int64_t in = b.values[size_t(s * (T + 1) + t)];
      tokens[size_t(s * T + t)] = int32_t(in == -1 ? 0 : in);
      real[size_t(s * T + t)] = in != -1;
      targets[size_t(s * T + t)] = int32_t(b.values[size_t(s * (T + 1) + t + 1)]);
    }
  std::vector<uint8_t> vis;
  if (!o.mask.empty()) {
    const train::NpyArray m = train::read_npy(o.mask);
    if (m.shape != std::vector<int64_t>{B, T, T}) fail("{}: the mask must be [B, T, T] = [{}, {}, {}]", o.mask, B, T, T);
    for (int64_t v : m.values) vis.push_back(v != 0);
  }
  std::vector<int32_t> parents;
  if (!o.parents.empty()) {
    const train::NpyArray m = train::read_npy(o.parents);
    if (m.shape != std::vector<int64_t>{B, T}) fail("{}: the parents must be [B, T] = [{}, {}]", o.parents, B, T);
    for (int64_t v : m.values) parents.push_back(int32_t(v));
  }
  int64_t scored = 0;
  for (int32_t t : targets) scored += t >= 0;
  if (scored == 0) fail("{}: no target is scored", o.batch);
  auto graph = train::make_graph<R>(cfg, P, B, T);
  train::TrainBatch tb{B, T, tokens.data(), targets.data(), nullptr, vis.empty() ? nullptr : vis.data()};
  tb.parents = parents.empty() ? nullptr : parents.data();
  tb.index_loss_weight = o.index_loss_weight;
  tb.index_rows = real.data();
  const double ce = graph->forward_backward(tb, 1.0 / double(scored)) / double(scored);
  const double kl = graph->index_kl();
  const double loss = ce + o.index_loss_weight * kl;
  train::save_grads(o.out, loss, P);
  std::printf("loss=%.17g ce=%.17g kl=%.17g scored=%lld\n", loss, ce, kl, (long long)scored);
}
}  // namespace

void add_grad(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("grad", "Loss and parameter gradients of one batch (gradient checks)");
  c->add_option("-m,--model", o->model, "Checkpoint directory")->required();
  c->add_option("--batch", o->batch, ".npy int array [B, T+1] of token ids")->required();
  c->add_option("--mask", o->mask, ".npy bool array [B, T, T]: token i sees token j");
  c->add_option("--parents", o->parents, ".npy int array [B, T]: prefix-tree parent of each token (-1: a root)")
      ->excludes(c->get_option("--mask"));
  c->add_option("--dtype", o->dtype, "Arithmetic: f64 (the double path) or f32 (the training path)")
      ->check(CLI::IsMember({"f64", "f32"}));
  c->add_option("-o,--out", o->out, "Output safetensors (F64)")->required();
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  c->add_option("--index-loss-weight", o->index_loss_weight,
                "MiniMax-M3: loss = ce + W * the MSA indexer KL (0 = CE only)")
      ->check(CLI::NonNegativeNumber);
  c->callback([o, &action] {
    action = [o] {
      train::set_n_threads(o->threads);
      if (o->dtype == "f64") run_grad<double>(*o);
      else run_grad<float>(*o);
    };
  });
}

}  // namespace mmx::cli
