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
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/gguf_convert.h"
#include "model/model.h"
#include "template/chat_template.h"
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
  static const std::vector<int32_t> ids = tok::Tokenizer::from_path(kTiny).encode(
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

  const tok::Tokenizer ta = tok::Tokenizer::from_path(kTiny), tb = tok::Tokenizer::from_path(g);
  for (const char* s : {"def f(x):\n    return x ** 2  # square\n", "Hello, World! It's 2026.",
                        "日本語のテキストと中文", "Привет, МирДругой CamelCase", "emoji 🚀🎉 ok",
                        "]~!b[]~b]system\nhi[e~[\n<think>\nx\n</think>", "\t\r\n  spaces   end "}) {
    EXPECT_EQ(tb.encode(s), ta.encode(s)) << s;
    EXPECT_EQ(tb.decode(tb.encode(s)), ta.decode(ta.encode(s))) << s;
  }

  const nlohmann::json msgs = {{{"role", "system"}, {"content", "be brief"}},
                               {{"role", "user"}, {"content", "hi"}}};
  EXPECT_EQ(ChatTemplate::from_dir(g).render(msgs, nullptr, true),
            ChatTemplate::from_dir(kTiny).render(msgs, nullptr, true));
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
