// GGUF <-> Hugging Face views of a minimax-m2 model (see hf_view.h). The key names and token
// types are llama.cpp's (gguf-py constants, llama-arch.cpp); the mapping code is ours.
#include "formats/hf_view.h"

#include <set>

#include "base/error.h"
#include "formats/gguf_writer.h"

namespace mmx::gguf {

using json = nlohmann::json;

const char* const kMiniMaxM2SplitRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

namespace {

// llama.cpp token types (tokenizer.ggml.token_type).
constexpr int kTokNormal = 1, kTokControl = 3, kTokUserDefined = 4, kTokUnused = 5;
constexpr uint32_t kGatingSoftmax = 1, kGatingSigmoid = 2;

std::string arch_of(const File& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != kArchM2)
    fail("GGUF file '{}': architecture '{}' is not supported (mmx reads GGUF files of "
         "architecture '{}'; for other MiniMax models use the Hugging Face checkpoint)",
         f.path(), arch, kArchM2);
  return arch;
}

const TensorInfo* find_tensor(const File& f, const std::string& name) {
  for (const TensorInfo& t : f.tensors())
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

// ---- GGUF -> HF ----

json hf_config(const File& f, const ModelTensorNames& names) {
  const std::string p = arch_of(f) + ".";
  // Keys with an effect we do not model are refused, not dropped.
  if (f.get_string(p + "rope.scaling.type", "none") != "none")
    fail("GGUF file '{}': {}rope.scaling.type = '{}' is not supported (mmx runs plain RoPE)", f.path(), p,
         f.get_string(p + "rope.scaling.type"));
  if (f.has(p + "attention.sliding_window"))
    fail("GGUF file '{}': {}attention.sliding_window is set; MiniMax-M2 has no sliding window and mmx "
         "does not run one", f.path(), p);
  const TensorInfo* embd = find_tensor(f, names.embedding);
  if (!embd) fail("GGUF file '{}': missing tensor '{}'", f.path(), names.embedding);
  const int64_t d = f.get_int(p + "embedding_length"), heads = f.get_int(p + "attention.head_count");
  if (heads <= 0 || d <= 0) fail("GGUF file '{}': embedding_length {} / head_count {}", f.path(), d, heads);
  const int64_t head_dim = f.get_int(p + "attention.key_length", d / heads);
  if (f.get_int(p + "attention.value_length", head_dim) != head_dim)
    fail("GGUF file '{}': attention.value_length {} differs from key_length {}", f.path(),
         f.get_int(p + "attention.value_length"), head_dim);
  const int64_t layers = f.get_int(p + "block_count");
  // Every layer has tensors of its own, so a file cannot hold more layers than tensors (the bound
  // also keeps a hostile count from sizing the per-layer lists below: the fuzzer's 4 GiB case).
  if (layers < 1 || uint64_t(layers) > f.tensors().size())
    fail("GGUF file '{}': {}block_count = {} but the file holds {} tensors", f.path(), p, layers, f.tensors().size());
  const int64_t gating = f.get_int(p + "expert_gating_func", kGatingSigmoid);
  if (gating != kGatingSigmoid && gating != kGatingSoftmax)
    fail("GGUF file '{}': {}expert_gating_func = {} (1 softmax, 2 sigmoid)", f.path(), p, gating);
  json c = {
      {"architectures", {"MiniMaxM2ForCausalLM"}},
      {"model_type", "minimax_m2"},
      {"num_hidden_layers", layers},
      {"attn_type_list", json(std::vector<int>(size_t(std::max<int64_t>(layers, 0)), 1))},
      {"hidden_size", d},
      {"intermediate_size", f.get_int(p + "expert_feed_forward_length", f.get_int(p + "feed_forward_length", 0))},
      {"num_attention_heads", heads},
      {"num_key_value_heads", f.get_int(p + "attention.head_count_kv", heads)},
      {"head_dim", head_dim},
      {"rotary_dim", f.get_int(p + "rope.dimension_count", head_dim)},
      {"rope_theta", f.get_float(p + "rope.freq_base", 10000.0)},
      {"rms_norm_eps", f.get_float(p + "attention.layer_norm_rms_epsilon")},
      {"num_local_experts", f.get_int(p + "expert_count")},
      {"num_experts_per_tok", f.get_int(p + "expert_used_count")},
      {"scoring_func", gating == kGatingSigmoid ? "sigmoid" : "softmax"},
      {"max_position_embeddings", f.get_int(p + "context_length")},
      {"vocab_size", embd->shape[0]},
      {"use_qk_norm", true},  // llama.cpp's minimax-m2 graph always applies it, per layer
      {"qk_norm_type", "per_layer"},
      {"use_routing_bias", true},  // the routing bias is a required tensor there
      {"tie_word_embeddings", find_tensor(f, names.output) == nullptr},
  };
  if (f.has("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = f.get_int("tokenizer.ggml.bos_token_id");
  if (f.has("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = f.get_int("tokenizer.ggml.eos_token_id");
  return c;
}

json hf_tokenizer(const File& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail("GGUF file '{}': tokenizer.ggml.model '{}' is not supported (mmx reads byte-level BPE, 'gpt2')",
         f.path(), model);
  const std::string pre = f.get_string("tokenizer.ggml.pre", "default");
  if (pre != "minimax-m2")
    fail("GGUF file '{}': tokenizer.ggml.pre '{}' is not supported (mmx knows the 'minimax-m2' split "
         "regex only)", f.path(), pre);
  const json& tokens = f.get_array("tokenizer.ggml.tokens", ValueType::kString);
  const json none = json::array();
  const json& types = f.has("tokenizer.ggml.token_type")
                          ? f.get_array("tokenizer.ggml.token_type", ValueType::kI32) : none;
  if (!types.empty() && types.size() != tokens.size())
    fail("GGUF file '{}': {} token types for {} tokens", f.path(), types.size(), tokens.size());
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int type = types.empty() ? kTokNormal : types[i].get<int>();
    if (type == kTokUnused) continue;
    const std::string& tok = tokens[i].get_ref<const std::string&>();
    if (vocab.contains(tok)) fail("GGUF file '{}': token '{}' appears twice (ids {} and {})", f.path(), tok, vocab[tok].get<int64_t>(), i);
    vocab[tok] = i;
    if (type == kTokControl || type == kTokUserDefined)
      added.push_back({{"id", i}, {"content", tok}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", type == kTokUserDefined},
                       {"special", type == kTokControl}});
  }
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  return {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kMiniMaxM2SplitRegex}}}, {"behavior", "Isolated"}, {"invert", false}},
          byte_level}}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", false}, {"vocab", vocab},
        {"merges", f.has("tokenizer.ggml.merges") ? f.get_array("tokenizer.ggml.merges", ValueType::kString) : none}}},
  };
}

json hf_tokenizer_config(const File& f) {
  const json& tokens = f.get_array("tokenizer.ggml.tokens", ValueType::kString);
  json c = {{"add_bos_token", f.get_bool("tokenizer.ggml.add_bos_token", false)},
            {"add_eos_token", f.get_bool("tokenizer.ggml.add_eos_token", false)},
            {"clean_up_tokenization_spaces", false}};
  for (const char* k : {"bos", "eos", "pad", "unk"}) {
    const std::string key = fmt::format("tokenizer.ggml.{}_token_id", k);
    if (!f.has(key)) continue;
    const int64_t id = f.get_int(key);
    if (id < 0 || size_t(id) >= tokens.size())
      fail("GGUF file '{}': {} = {} is not a token id (vocabulary of {})", f.path(), key, id, tokens.size());
    c[fmt::format("{}_token", k)] = tokens[size_t(id)];
  }
  if (f.has("tokenizer.chat_template")) c["chat_template"] = f.get_string("tokenizer.chat_template");
  return c;
}

// ---- HF -> GGUF ----

void set_model_metadata(Writer& w, const json& c, const std::string& name, uint32_t file_type) {
  auto need = [&](const char* k) -> const json& {
    if (!c.contains(k)) fail("config.json has no \"{}\"; cannot describe the model in GGUF", k);
    return c[k];
  };
  const std::string archname = c.value("architectures", json::array({""}))[0].get<std::string>();
  if (archname != "MiniMaxM2ForCausalLM")
    fail("only MiniMax-M2 checkpoints (MiniMaxM2ForCausalLM) can be written as GGUF, llama.cpp's "
         "'{}' architecture; this one is '{}'", kArchM2, archname);
  if (!c.value("use_routing_bias", true) || !c.value("use_qk_norm", true) ||
      c.value("qk_norm_type", "per_layer") != "per_layer" || c.value("scoring_func", "sigmoid") != "sigmoid")
    fail("config.json: llama.cpp's minimax-m2 graph needs use_routing_bias, use_qk_norm with "
         "qk_norm_type per_layer and a sigmoid router; this checkpoint differs, so its GGUF would "
         "not compute the same model");
  const std::string p = std::string(kArchM2) + ".";
  const int64_t d = need("hidden_size").get<int64_t>(), heads = need("num_attention_heads").get<int64_t>();
  const int64_t head_dim = c.value("head_dim", d / heads);
  w.set_string("general.architecture", kArchM2);
  w.set_string("general.name", name);
  w.set_u32("general.file_type", file_type);
  w.set_u32("general.quantization_version", 2);
  w.set_u32(p + "block_count", need("num_hidden_layers").get<uint32_t>());
  w.set_u32(p + "context_length", need("max_position_embeddings").get<uint32_t>());
  w.set_u32(p + "embedding_length", uint32_t(d));
  w.set_u32(p + "feed_forward_length", need("intermediate_size").get<uint32_t>());
  w.set_u32(p + "expert_feed_forward_length", need("intermediate_size").get<uint32_t>());
  w.set_u32(p + "attention.head_count", uint32_t(heads));
  w.set_u32(p + "attention.head_count_kv", c.value("num_key_value_heads", uint32_t(heads)));
  w.set_u32(p + "attention.key_length", uint32_t(head_dim));
  w.set_u32(p + "attention.value_length", uint32_t(head_dim));
  w.set_u32(p + "rope.dimension_count", c.value("rotary_dim", uint32_t(head_dim)));
  w.set_f32(p + "rope.freq_base", c.value("rope_theta", 10000.0f));
  w.set_f32(p + "attention.layer_norm_rms_epsilon", need("rms_norm_eps").get<float>());
  w.set_u32(p + "expert_count", need("num_local_experts").get<uint32_t>());
  w.set_u32(p + "expert_used_count", need("num_experts_per_tok").get<uint32_t>());
  w.set_u32(p + "expert_gating_func", kGatingSigmoid);
}

void set_tokenizer_metadata(Writer& w, const json& tok, const json& tc, int64_t vocab_rows) {
  const json& model = tok.at("model");
  const json* split = nullptr;
  if (tok.contains("pre_tokenizer") && tok["pre_tokenizer"].is_object() &&
      tok["pre_tokenizer"].value("type", "") == "Sequence")
    for (const json& p : tok["pre_tokenizer"]["pretokenizers"])
      if (p.value("type", "") == "Split") split = &p;
  const bool m2 = model.value("type", "") == "BPE" && split && split->contains("pattern") &&
                  (*split)["pattern"].value("Regex", "") == kMiniMaxM2SplitRegex;
  if (!m2)
    fail("the tokenizer is not the MiniMax-M2 byte-level BPE (BPE + the spec §6.1 split regex); only "
         "that one has a GGUF pre-tokenizer name ('minimax-m2') llama.cpp and mmx both know");
  std::vector<std::string> tokens(static_cast<size_t>(vocab_rows));
  std::vector<int32_t> types(static_cast<size_t>(vocab_rows), kTokUnused);
  auto place = [&](int64_t id, const std::string& s, int type) {
    if (id < 0 || id >= vocab_rows)
      fail("tokenizer token '{}' has id {}, outside the {} embedding rows", s, id, vocab_rows);
    tokens[size_t(id)] = s;
    types[size_t(id)] = type;
  };
  for (const auto& [s, id] : model.at("vocab").items()) place(id.get<int64_t>(), s, kTokNormal);
  for (const json& a : tok.value("added_tokens", json::array()))
    place(a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
          a.value("special", false) ? kTokControl : kTokUserDefined);
  for (int64_t i = 0; i < vocab_rows; ++i)
    if (types[size_t(i)] == kTokUnused) tokens[size_t(i)] = fmt::format("[PAD{}]", i);
  json merges = json::array();
  for (const json& m : model.value("merges", json::array()))
    merges.push_back(m.is_string() ? m.get<std::string>() : m.at(0).get<std::string>() + " " + m.at(1).get<std::string>());
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "minimax-m2");
  w.set_array("tokenizer.ggml.tokens", ValueType::kString, tokens);
  w.set_array("tokenizer.ggml.token_type", ValueType::kI32, types);
  w.set_array("tokenizer.ggml.merges", ValueType::kString, std::move(merges));
  for (const char* k : {"bos", "eos", "pad", "unk"}) {
    const std::string field = fmt::format("{}_token", k);
    if (!tc.contains(field) || !tc[field].is_string()) continue;
    const std::string s = tc[field].get<std::string>();
    auto it = std::find(tokens.begin(), tokens.end(), s);
    if (it == tokens.end()) fail("tokenizer_config.json {} '{}' is not in the vocabulary", field, s);
    w.set_u32(fmt::format("tokenizer.ggml.{}_token_id", k), uint32_t(it - tokens.begin()));
  }
  w.set_bool("tokenizer.ggml.add_bos_token", tc.value("add_bos_token", false));
  w.set_bool("tokenizer.ggml.add_eos_token", tc.value("add_eos_token", false));
  if (tc.contains("chat_template") && tc["chat_template"].is_string())
    w.set_string("tokenizer.chat_template", tc["chat_template"].get<std::string>());
}

}  // namespace mmx::gguf
