// mmx inspect: config summary, tensor inventory and parameter counts.
// Works on a config-only directory too (then only the config-implied counts are printed).
#include <cstdio>
#include <filesystem>
#include <map>

#include "common.h"
#include "model/config.h"
#include "formats/safetensors.h"
#include "model/weights.h"

namespace mmx::cli {

namespace {
std::string billions(int64_t n) {
  if (n >= 100000000) return fmt::format("{:.3f} B", double(n) / 1e9);
  return fmt::format("{:.3f} M", double(n) / 1e6);
}
std::string human_bytes(uint64_t b) { return fmt::format("{:.2f} GiB", double(b) / (1ull << 30)); }
}  // namespace

void add_inspect(CLI::App& app, Action& action) {
  auto dir = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand("inspect", "Print the config summary, tensor inventory and parameter counts");
  c->add_option("-m,--model", *dir, "Checkpoint directory (config.json; weights optional)")->required();
  c->add_flag("-v,--verbose", *verbose, "List every tensor");
  c->callback([dir, verbose, &action] {
    action = [dir, verbose] {
      const ModelConfig cfg = load_config(*dir);
      for (const auto& w : cfg.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
      std::printf("%s\n", config_summary(cfg).c_str());

      const ParamCounts p = count_params(cfg);
      std::printf("parameters (from config.json)\n");
      std::printf("  embedding         %s\n", billions(p.embedding).c_str());
      std::printf("  lm_head           %s%s\n", billions(p.lm_head).c_str(), cfg.tie_word_embeddings ? " (tied)" : "");
      std::printf("  attention         %s\n", billions(p.attention).c_str());
      std::printf("  routed experts    %s\n", billions(p.experts).c_str());
      if (p.dense_mlp) std::printf("  dense/shared MLP  %s\n", billions(p.dense_mlp).c_str());
      std::printf("  router + norms    %s\n", billions(p.router + p.norms).c_str());
      std::printf("  total             %s\n", billions(p.total()).c_str());
      std::printf("  active per token  %s without embedding/lm_head; %s with lm_head; %s with both\n",
                  billions(p.active_no_embed()).c_str(), billions(p.active_no_embed() + p.lm_head).c_str(),
                  billions(p.active_no_embed() + p.lm_head + p.embedding).c_str());

      namespace fs = std::filesystem;
      const bool has_weights = fs::exists(fs::path(*dir) / "model.safetensors") ||
                               fs::exists(fs::path(*dir) / "model.safetensors.index.json");
      if (!has_weights) {
        std::printf("\ntensors: none (config-only directory)\n");
        return;
      }
      const TensorStore store = TensorStore::open(*dir);
      std::map<std::string, std::pair<int64_t, uint64_t>> by_dtype;  // dtype -> (count, bytes)
      int64_t n_params = 0;
      for (const auto& name : store.names()) {
        const TensorInfo& ti = store.info(name);
        int64_t numel = 1;
        for (int64_t s : ti.shape) numel *= s;
        auto& e = by_dtype[ti.dtype_str];
        ++e.first;
        e.second += ti.size_bytes;
        if (name.find("_scale_inv") == std::string::npos) n_params += numel;
        if (*verbose)
          std::printf("  %-70s %-8s [%s]\n", name.c_str(), ti.dtype_str.c_str(),
                      fmt::format("{}", fmt::join(ti.shape, ", ")).c_str());
      }
      std::printf("\ntensors: %zu, %s on disk, %s parameters (excluding fp8 scales)\n", store.names().size(),
                  human_bytes(store.total_bytes()).c_str(), billions(n_params).c_str());
      for (const auto& [dt, e] : by_dtype)
        std::printf("  %-8s %6lld tensors  %s\n", dt.c_str(), (long long)e.first, human_bytes(e.second).c_str());
    };
  });
}

}  // namespace mmx::cli
