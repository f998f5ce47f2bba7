// HF -> GGUF conversion (see gguf_convert.h): the type policy, then the streaming loop.
#include "formats/convert/gguf_convert.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "formats/checkpoint.h"
#include "formats/gguf_writer.h"
#include "formats/hf_view.h"
#include "model/config.h"
#include "formats/safetensors.h"
#include "model/schema.h"
#include "ops/ops.h"

namespace mmx {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr std::pair<const char*, GgufTarget> kTargets[] = {
    {"f16", GgufTarget::kF16},   {"bf16", GgufTarget::kBF16}, {"q8_0", GgufTarget::kQ8_0},
    {"q4_0", GgufTarget::kQ4_0}, {"q4_k", GgufTarget::kQ4_K}, {"q5_k", GgufTarget::kQ5_K},
    {"q6_k", GgufTarget::kQ6_K}, {"q4_k_m", GgufTarget::kQ4_K_M},
};

// llama.cpp's llama_ftype codes, written as general.file_type (informational).
uint32_t file_type_code(GgufTarget t) {
  switch (t) {
    case GgufTarget::kF16: return 1;
    case GgufTarget::kBF16: return 32;
    case GgufTarget::kQ8_0: return 7;
    case GgufTarget::kQ4_0: return 2;
    case GgufTarget::kQ4_K: return 14;  // Q4_K_S, the nearest named mix
    case GgufTarget::kQ5_K: return 16;  // Q5_K_S
    case GgufTarget::kQ6_K: return 18;
    case GgufTarget::kQ4_K_M: return 15;
  }
  return 0;
}

// llama.cpp's rule for the layers that get more bits in the _M mixes.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

json read_json(const fs::path& p, bool required) {
  if (!fs::exists(p)) {
    if (required) fail("cannot convert: '{}' does not exist", p.string());
    return json::object();
  }
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    fail("{}: {}", p.string(), e.what());
  }
}

// The source tensor `name` as a Linear (FP8 with its block scales), from the HF checkpoint.
ops::Linear source(const TensorStore& st, const ModelConfig& cfg, const std::string& name) {
  ops::Linear l;
  l.w = st.tensor(name);
  if (l.w.dtype == DType::kF8E4M3) {
    if (!cfg.fp8.enabled || cfg.fp8.mx)
      fail("cannot convert '{}': F8_E4M3 needs the config's 128x128 fp8 block scales", name);
    l.scale = st.tensor(name + "_scale_inv");
    l.block_out = cfg.fp8.block_out;
    l.block_in = cfg.fp8.block_in;
  }
  if (l.w.ndim == 1) l.w = l.w.reshape({1, l.w.dim(0)});
  return l;
}

}  // namespace

GgufTarget parse_gguf_target(const std::string& s) {
  for (const auto& [name, t] : kTargets)
    if (s == name) return t;
  fail("unknown GGUF type '{}' (choose f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k or q4_k_m)", s);
}

const char* gguf_target_name(GgufTarget t) {
  for (const auto& [name, v] : kTargets)
    if (v == t) return name;
  return "?";
}

DType gguf_tensor_type(GgufTarget t, TensorRole role, int layer, int n_layers, int64_t n_in, int ndim) {
  if (ndim == 1 || role == TensorRole::kRouter) return DType::kF32;
  DType d = DType::kF16;
  switch (t) {
    case GgufTarget::kF16: d = DType::kF16; break;
    case GgufTarget::kBF16: d = DType::kBF16; break;
    case GgufTarget::kQ8_0: d = DType::kQ8_0; break;
    case GgufTarget::kQ4_0: d = DType::kQ4_0; break;
    case GgufTarget::kQ4_K: d = DType::kQ4_K; break;
    case GgufTarget::kQ5_K: d = DType::kQ5_K; break;
    case GgufTarget::kQ6_K: d = DType::kQ6_K; break;
    case GgufTarget::kQ4_K_M: {
      const bool more = layer >= 0 && use_more_bits(layer, n_layers) &&
                        (role == TensorRole::kV || role == TensorRole::kExpertDown || role == TensorRole::kMlpDown);
      d = role == TensorRole::kLmHead || more ? DType::kQ6_K : DType::kQ4_K;
      break;
    }
  }
  if (n_in % dtype_block(d) == 0) return d;
  return n_in % dtype_block(DType::kQ8_0) == 0 ? DType::kQ8_0 : DType::kF16;
}

ConvertStats convert_to_gguf(const std::string& hf_dir, const std::string& out_path, GgufTarget target,
                             const std::function<void(uint64_t, uint64_t)>& progress) {
  const Checkpoint ck = open_checkpoint(hf_dir);
  if (ck.is_gguf()) fail("'{}' is already a GGUF file; convert takes a Hugging Face checkpoint directory", hf_dir);
  const ModelConfig cfg = load_config(ck);
  const json config = read_json(fs::path(hf_dir) / "config.json", true);
  const json tokenizer = read_json(fs::path(hf_dir) / "tokenizer.json", true);
  json tc = read_json(fs::path(hf_dir) / "tokenizer_config.json", false);
  if (fs::exists(fs::path(hf_dir) / "chat_template.jinja")) {
    std::ifstream f(fs::path(hf_dir) / "chat_template.jinja");
    std::stringstream ss;
    ss << f.rdbuf();
    tc["chat_template"] = ss.str();
  }
  const TensorStore st = ck.tensors();

  gguf::Writer w(out_path);
  gguf::set_model_metadata(w, config, fs::path(hf_dir).filename().string(), file_type_code(target));
  gguf::set_tokenizer_metadata(w, tokenizer, tc, cfg.vocab_size);

  struct Item {
    GgufTensorPlan plan;
    std::vector<int64_t> shape;  // GGUF shape, outermost first
    DType type;
  };
  std::vector<Item> items;
  ConvertStats stats;
  ModelConfig untied = cfg;  // the plan always has an output tensor
  untied.tie_word_embeddings = false;
  for (GgufTensorPlan& p : gguf_tensor_plan(untied)) {
    if (p.role == TensorRole::kLmHead && cfg.tie_word_embeddings) p.hf = {tensor_name(cfg, TensorRole::kEmbed)};
    for (const std::string& h : p.hf)
      if (!st.has(h)) fail("cannot convert: the checkpoint has no tensor '{}'", h);
    std::vector<int64_t> shape = st.info(p.hf[0]).shape;
    if (p.hf.size() > 1 || p.stacked) shape.insert(shape.begin(), int64_t(p.hf.size()));
    const DType type = gguf_tensor_type(target, p.role, p.layer, cfg.n_layers, shape.back(), int(shape.size()));
    w.add_tensor(p.gguf, type, shape);
    items.push_back({std::move(p), std::move(shape), type});
  }
  w.begin();

  const uint64_t total = w.data_bytes();
  uint64_t done = 0;
  std::vector<uint8_t> qbuf;
  for (const Item& it : items) {
    for (const std::string& h : it.plan.hf) {
      const ops::Linear src = source(st, cfg, h);
      const int64_t rows = src.n_out(), n_in = src.n_in();
      const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(n_in, 1));
      Buffer f32(DType::kF32, {std::min(chunk, rows), n_in});
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = std::min(chunk, rows - r0);
        Tensor x = f32.t().rows_range(0, n);
        ops::linear_dequant_rows(src, r0, x);
        for (int64_t i = 0; i < x.numel(); ++i)
          if (!std::isfinite(x.f32()[i]))
            fail("cannot convert: tensor '{}' holds a non-finite value at row {}", h, r0 + i / n_in);
        const size_t bytes = size_t(n) * dtype_row_bytes(it.type, n_in);
        if (it.type == DType::kF32) {
          w.write(x.data, bytes);
        } else {
          qbuf.resize(bytes);
          Tensor q(qbuf.data(), it.type, {n, n_in});
          ops::quantize(x, q);  // f16/bf16 RNE, or the block quantizers (ops/cpu/quantize.cpp)
          w.write(qbuf.data(), bytes);
        }
        done += bytes;
        if (progress) progress(done, total);
      }
      stats.params += rows * n_in;
    }
    ++stats.tensors;
  }
  w.finish();
  stats.bytes_written = total;
  return stats;
}

}  // namespace mmx
