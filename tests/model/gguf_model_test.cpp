// GGUF end to end on the embedded trained MiniMax-M2 (models/m2-tiny, BF16): `convert` writes a
// file; loading it gives the same config, the same tokenizer ids (a mixed-script corpus), the
// same chat-template rendering, and logits bit-identical to the safetensors checkpoint for
// BF16 (the same bytes through the same kernels). Other types are checked against the BF16
// logits within their format's error. Refusals name what they refuse.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "engine/generate.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "formats/convert/gguf_convert.h"
#include "model/model.h"
#include "template/chat_template.h"
#include "testing/checkpoint_files.h"
#include "tokenizer/tokenizer.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

const std::string kTiny = std::string(MMX_SOURCE_DIR) + "/models/m2-tiny";

std::string out_path(const std::string& name) {
  return (fs::temp_directory_path() / fmt::format("mmx_gguf_model_{}_{}", getpid(), name)).string();
}

// Converted once per type for the whole test binary.
const std::string& converted(GgufTarget t) {
  static std::map<GgufTarget, std::string> paths;
  auto it = paths.find(t);
  if (it != paths.end()) return it->second;
  const std::string p = out_path(std::string(gguf_target_name(t)) + ".gguf");
  convert_to_gguf(kTiny, p, t);
  return paths[t] = p;
}

class Cleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string tag = fmt::format("mmx_gguf_model_{}_", getpid());
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
      if (e.path().filename().string().rfind(tag, 0) == 0) fs::remove_all(e.path());
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new Cleanup);

const std::vector<int32_t>& prompt() {
  static const std::vector<int32_t> ids = testing::tokenizer_of(kTiny).encode(
      "def read_config(path):\n    with open(path) as f:\n        return json.load(f)\n");
  return ids;
}

TEST(GgufModel, ConfigTokenizerAndTemplateMatchTheCheckpoint) {
  const std::string g = converted(GgufTarget::kBF16);
  ASSERT_TRUE(gguf::is_gguf(g));
  const ModelConfig a = load_config(kTiny), b = load_config(g);
  EXPECT_EQ(b.architecture, a.architecture);
  EXPECT_EQ(b.n_layers, a.n_layers);
  EXPECT_EQ(b.d_model, a.d_model);
  EXPECT_EQ(b.n_heads, a.n_heads);
  EXPECT_EQ(b.n_kv_heads, a.n_kv_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.rotary_dim, a.rotary_dim);
  EXPECT_EQ(b.rope_theta, a.rope_theta);
  EXPECT_FLOAT_EQ(float(b.norm_eps), float(a.norm_eps));
  EXPECT_EQ(b.n_experts, a.n_experts);
  EXPECT_EQ(b.n_experts_active, a.n_experts_active);
  EXPECT_EQ(b.ffn_dim, a.ffn_dim);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.use_routing_bias, a.use_routing_bias);

  const tok::Tokenizer ta = testing::tokenizer_of(kTiny), tb = testing::tokenizer_of(g);
  for (const char* s : {"def f(x):\n    return x ** 2  # square\n", "Hello, World! It's 2026.",
                        "日本語のテキストと中文", "Привет, МирДругой CamelCase", "emoji 🚀🎉 ok",
                        "]~!b[]~b]system\nhi[e~[\n<think>\nx\n</think>", "\t\r\n  spaces   end "}) {
    EXPECT_EQ(tb.encode(s), ta.encode(s)) << s;
    EXPECT_EQ(tb.decode(tb.encode(s)), ta.decode(ta.encode(s))) << s;
  }

  const nlohmann::json msgs = {{{"role", "system"}, {"content", "be brief"}},
                               {{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(testing::chat_template_of(g).render(msgs, nullptr, true),
            testing::chat_template_of(kTiny).render(msgs, nullptr, true));
}

TEST(GgufModel, Bf16LogitsAreBitIdentical) {
  auto a = load_model(kTiny);
  auto b = load_model(converted(GgufTarget::kBF16));
  const Buffer la = prefill_logits(*a, prompt(), 7), lb = prefill_logits(*b, prompt(), 7);
  ASSERT_EQ(la.t().numel(), lb.t().numel());
  for (int64_t i = 0; i < la.t().numel(); ++i) ASSERT_EQ(la.f32()[i], lb.f32()[i]) << i;
}

// F16 holds every BF16 weight exactly except those below 2^-14 in magnitude (f16 subnormals keep
// fewer bits) and above 65504: the logits may move only by what those weights contribute.
TEST(GgufModel, F16LogitsWithinItsRounding) {
  auto a = load_model(kTiny);
  auto b = load_model(converted(GgufTarget::kF16));
  const Buffer la = prefill_logits(*a, prompt(), 64), lb = prefill_logits(*b, prompt(), 64);
  double max_diff = 0, max_abs = 0;
  for (int64_t i = 0; i < la.t().numel(); ++i) {
    max_diff = std::max(max_diff, double(std::fabs(la.f32()[i] - lb.f32()[i])));
    max_abs = std::max(max_abs, double(std::fabs(la.f32()[i])));
  }
  std::printf("f16 vs bf16 checkpoint: max |dlogit| %.3g of max |logit| %.3g\n", max_diff, max_abs);
  EXPECT_LT(max_diff, 1e-3 * max_abs);
}

// Mean KL(softmax(a) || softmax(b)) over the rows of two [n, V] logit buffers, in double.
double mean_kl(const Buffer& a, const Buffer& b) {
  const int64_t n = a.t().dim(0), V = a.t().dim(1);
  double total = 0;
  for (int64_t r = 0; r < n; ++r) {
    const float* p = a.f32() + r * V;
    const float* q = b.f32() + r * V;
    double mp = p[0], mq = q[0], sp = 0, sq = 0;
    for (int64_t v = 0; v < V; ++v) mp = std::max(mp, double(p[v])), mq = std::max(mq, double(q[v]));
    for (int64_t v = 0; v < V; ++v) sp += std::exp(double(p[v]) - mp), sq += std::exp(double(q[v]) - mq);
    const double lp = mp + std::log(sp), lq = mq + std::log(sq);
    for (int64_t v = 0; v < V; ++v) {
      const double x = double(p[v]) - lp;
      total += std::exp(x) * (x - (double(q[v]) - lq));
    }
  }
  return total / double(n);
}

// The quantized files against the BF16 checkpoint they came from, on the prompt through the decode
// kernel (n < 32 rows: cpu/qgemv.cpp, int8 activations). The bounds are ~3x the mean KL measured
// when this test was written, on this prompt (Q8_0 3.0e-4, Q6_K 2.9e-3, Q5_K 2.9e-3, Q4_K 8.8e-3,
// Q4_K_M 7.4e-3, Q4_0 5.8e-2), so they catch a broken block layout or scale (KL of order 1 and more) while leaving
// room for rounding-level changes of the kernels. On the tiny model (hidden 128) every tensor
// whose rows are not whole 256-blocks falls back to Q8_0, as llama.cpp's quantizer does; the
// K types are exercised in full by tests/ops and by the slice in docs/numerics.md.
TEST(GgufModel, QuantizedLogitsWithinTheirFormatsError) {
  auto a = load_model(kTiny);
  const Buffer la = prefill_logits(*a, prompt(), 0);
  const std::pair<GgufTarget, double> bounds[] = {{GgufTarget::kQ8_0, 1e-3}, {GgufTarget::kQ6_K, 9e-3},
                                                  {GgufTarget::kQ5_K, 9e-3}, {GgufTarget::kQ4_K, 2.7e-2},
                                                  {GgufTarget::kQ4_K_M, 2.2e-2}, {GgufTarget::kQ4_0, 0.17}};
  double q8 = 0;
  for (const auto& [t, bound] : bounds) {
    auto b = load_model(converted(t));
    const double kl = mean_kl(la, prefill_logits(*b, prompt(), 0));
    std::printf("%-6s mean KL vs bf16 over %zu positions: %.3g (bound %.3g)\n", gguf_target_name(t),
                prompt().size(), kl, bound);
    EXPECT_LT(kl, bound) << gguf_target_name(t);
    EXPECT_GT(kl, 0.0) << gguf_target_name(t) << ": quantized logits identical to bf16 (no quantization?)";
    if (t == GgufTarget::kQ8_0) q8 = kl;
    else EXPECT_GT(kl, q8) << gguf_target_name(t) << " should lose more than Q8_0";
  }
}

// --lm-head-type: the checkpoint with only its lm_head re-encoded at load sits between the BF16
// model and the all-Q8_0 file (whose output matrix the same quantizer wrote): KL > 0 (it took
// effect) and below the whole file's. A type whose block does not divide the rows is refused.
TEST(GgufModel, LmHeadReencodedAtLoad) {
  auto a = load_model(kTiny);
  const Buffer la = prefill_logits(*a, prompt(), 0);
  LoadOptions o;
  o.lm_head_dtype = DType::kQ8_0;
  auto h = load_model(kTiny, nullptr, o);
  const double kl_head = mean_kl(la, prefill_logits(*h, prompt(), 0));
  const double kl_file = mean_kl(la, prefill_logits(*load_model(converted(GgufTarget::kQ8_0)), prompt(), 0));
  std::printf("lm_head q8_0: mean KL vs bf16 %.3g (the whole Q8_0 file: %.3g)\n", kl_head, kl_file);
  EXPECT_GT(kl_head, 0.0);
  EXPECT_LT(kl_head, kl_file);
  o.lm_head_dtype = DType::kQ4_K;  // blocks of 256, rows of 128
  try {
    load_model(kTiny, nullptr, o);
    ADD_FAILURE() << "a Q4_K lm_head of 128-wide rows was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of its block"), std::string::npos) << e.what();
  }
}

// Prefill of a long prompt (>= 32 rows: the int8 GEMM, cpu/qgemm.cpp) vs decoding it token by
// token (the int8 GEMV): every matmul output has the same bits on both paths, so only the other
// ops' prefill/decode differences remain (measured mean KL 6.2e-6 for Q8_0, 7e-14 for Q4_K_M).
// The bound 5e-5 is well under what the f32 GEMM on dequantized weights gave at prefill (1.4e-4
// for Q8_0, 1.8e-4 for Q4_K_M), so a prefill that stops using the int8 path fails here.
TEST(GgufModel, QuantizedDecodeMatchesPrefill) {
  std::vector<int32_t> ids;
  while (ids.size() < 80) ids.insert(ids.end(), prompt().begin(), prompt().end());
  ids.resize(80);
  for (GgufTarget t : {GgufTarget::kQ8_0, GgufTarget::kQ4_K_M}) {
    auto b = load_model(converted(t));
    const double kl = mean_kl(prefill_logits(*b, ids, 0), prefill_logits(*b, ids, 1));
    std::printf("%-6s prefill vs decode, mean KL over %zu positions: %.3g\n", gguf_target_name(t), ids.size(), kl);
    EXPECT_LT(kl, 5e-5) << gguf_target_name(t);
  }
}

TEST(GgufModel, RefusalsNameWhatTheyRefuse) {
  // A GGUF file is not a convert source; a missing directory names itself.
  EXPECT_THROW(convert_to_gguf(converted(GgufTarget::kBF16), out_path("x.gguf"), GgufTarget::kF16), Error);
  try {
    convert_to_gguf("/nonexistent/ckpt", out_path("y.gguf"), GgufTarget::kF16);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/ckpt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_gguf_target("q3_k"), Error);
  EXPECT_FALSE(fs::exists(out_path("y.gguf") + ".partial"));
}

}  // namespace
}  // namespace mmx
