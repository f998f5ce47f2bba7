// mmx family-tokens -m DIR [--arch ARCH] [--dry-run]
//
// Gives a checkpoint that was trained with another family's tokenizer its own family's special
// tokens and chat template, in place. models/text01-tiny and models/m3-tiny were trained with the
// M2 tiny tokenizer (one tokenizer for a like-for-like comparison of the three generations,
// docs/models.md); their templates write tokens that tokenizer lacks (M1 <beginning_of_sentence>,
// M3 ]<]minimax[>[ and <mm:think>). What it does (the Hugging Face add_special_tokens +
// resize_token_embeddings pair):
//   * each special token of the family (tiny/tiny_tokenizer.h: family_tokens) that the
//     tokenizer lacks is appended, ids V, V+1, ... (tokenizer.json added_tokens and vocab);
//   * every [V, H] tensor named *embed_tokens.weight or *lm_head.weight grows by those rows. An
//     input row copies the token of the same role the model was trained with (bos ← ]~!b[,
//     eos ← [e~[, <mm:think> ← <think>, </mm:think> ← </think>, others ← <think>); an output row
//     copies <think>'s, a token the training text never held, so the new ids take next to no
//     probability and the model's distribution over the old vocabulary barely moves;
//   * config.json vocab_size; bos / eos ids there and in generation_config.json — the family's
//     eos first, then the old one, which the model did learn to write (a copied output row of a
//     new eos would halve the old one's probability instead);
//   * tokenizer_config.json: the family's chat template, bos / eos / unk tokens.
// Refuses a checkpoint that already has every token (nothing to do), or lacks <think>.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file_io.h"
#include "common.h"
#include "tiny/tiny_tokenizer.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

namespace mmx::cli {

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

ojson read_json(const fs::path& p) {
  try {
    return ojson::parse(read_file(p.string()));
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON: {}", p.string(), e.what());
  }
}
void write_json(const fs::path& p, const ojson& j) { write_file(p.string(), j.dump(2) + "\n"); }

// The arch of a checkpoint's config.json, in make-tiny's spelling.
std::string arch_of(const ojson& cfg) {
  const std::string t = cfg.value("model_type", "");
  if (t.rfind("minimax_m3", 0) == 0) return "minimax_m3";
  if (t == "minimax_text_01" || t == "minimax_text01") return "minimax_text01";
  if (t == "minimax_m1") return "minimax_m1";
  if (t == "minimax_m2") return "minimax_m2";
  fail("config.json model_type '{}' is not a MiniMax family; give --arch", t);
}

// The token whose input row a new special token copies (see the header).
std::string twin_of(const std::string& tok, const FamilyTokens& fam) {
  if (fam.bos && tok == fam.bos) return "]~!b[";
  if ((fam.eos && tok == fam.eos) || (fam.unk && tok == fam.unk)) return "[e~[";
  if (tok == "</mm:think>") return "</think>";
  return "<think>";
}

void run(const std::string& dir, std::string arch, bool dry_run) {
  const fs::path d(dir);
  ojson cfg = read_json(d / "config.json"), tj = read_json(d / "tokenizer.json"), tc = read_json(d / "tokenizer_config.json");
  if (arch.empty()) arch = arch_of(cfg);
  const FamilyTokens fam = family_tokens(arch);

  // The vocabulary as it is: content -> id over the model vocab and the added tokens.
  std::map<std::string, int64_t> id_of;
  int64_t n_vocab = 0;
  for (const auto& [k, v] : tj.at("model").at("vocab").items()) id_of[k] = v.get<int64_t>(), n_vocab = std::max(n_vocab, v.get<int64_t>() + 1);
  for (const auto& a : tj.at("added_tokens")) id_of[a.at("content").get<std::string>()] = a.at("id").get<int64_t>(),
                                              n_vocab = std::max(n_vocab, a.at("id").get<int64_t>() + 1);
  std::vector<std::string> add;
  for (const std::string& t : fam.extra_specials)
    if (!id_of.count(t)) add.push_back(t);
  for (const char* t : {fam.bos, fam.eos, fam.unk})
    if (t && !id_of.count(t) && std::find(add.begin(), add.end(), t) == add.end())
      fail("the family's special token {} is neither in the tokenizer nor among its extra tokens", t);  // (cannot happen)
  if (add.empty()) fail("{} already has every {} special token: nothing to do", dir, arch);
  for (const char* need : {"<think>", "]~!b[", "[e~[", "</think>"})
    if (!id_of.count(need)) fail("{}: the tokenizer has no {} to copy rows from (an M2 tokenizer is expected)", dir, need);

  // Tensors: every [V, H] embedding / output matrix grows.
  TensorStore st = TensorStore::open((d / "model.safetensors").string());
  SafetensorsWriter w;
  for (const auto& [k, v] : st.metadata()) w.set_metadata(k, v);
  int grown = 0;
  const int64_t V = n_vocab, n_new = int64_t(add.size());
  for (const std::string& name : st.names()) {
    const TensorInfo& info = st.info(name);
    const auto bytes = st.mapped_file(info.file_index).subspan(info.offset, info.size_bytes);
    const bool in = name.ends_with("embed_tokens.weight"), out = name.ends_with("lm_head.weight");
    if (!(in || out)) {
      w.add(name, info.dtype, info.shape, bytes.data(), bytes.size());
      continue;
    }
    if (info.shape.size() != 2 || info.shape[0] != V)
      fail("{}: {} is {} rows, the tokenizer has {} ids", dir, name, info.shape.empty() ? 0 : info.shape[0], V);
    const size_t row = bytes.size() / size_t(V);
    std::vector<uint8_t> grown_bytes(bytes.begin(), bytes.end());
    for (const std::string& t : add) {
      const int64_t src = id_of.at(out ? "<think>" : twin_of(t, fam));
      grown_bytes.insert(grown_bytes.end(), bytes.begin() + ptrdiff_t(src * row), bytes.begin() + ptrdiff_t((src + 1) * row));
    }
    w.add(name, info.dtype, {V + n_new, info.shape[1]}, grown_bytes.data(), grown_bytes.size());
    ++grown;
  }
  if (grown == 0) fail("{}: no embed_tokens / lm_head tensor found", dir);

  // Tokenizer files.
  for (int64_t i = 0; i < n_new; ++i) {
    const std::string& t = add[size_t(i)];
    tj["added_tokens"].push_back({{"id", V + i}, {"content", t}, {"single_word", false}, {"lstrip", false},
                                  {"rstrip", false}, {"normalized", false}, {"special", true}});
    tj["model"]["vocab"][t] = V + i;
    tc["added_tokens_decoder"][std::to_string(V + i)] = {{"content", t}, {"lstrip", false}, {"normalized", false},
                                                         {"rstrip", false}, {"single_word", false}, {"special", true}};
    id_of[t] = V + i;
  }
  tc["chat_template"] = fam.chat_template;
  tc["bos_token"] = fam.bos;
  tc["eos_token"] = fam.eos;
  if (fam.unk) tc["unk_token"] = fam.unk;
  // Config: the vocabulary size where it is kept, and bos / eos.
  ojson& text_cfg = cfg.contains("text_config") ? cfg["text_config"] : cfg;
  text_cfg["vocab_size"] = V + n_new;
  const int64_t bos = id_of.at(fam.bos), eos = id_of.at(fam.eos), old_eos = id_of.at("[e~[");
  const ojson eos_ids = eos == old_eos ? ojson(eos) : ojson::array({eos, old_eos});
  for (ojson* c : {&cfg, &text_cfg}) {
    if (c->contains("bos_token_id")) (*c)["bos_token_id"] = bos;
    if (c->contains("eos_token_id")) (*c)["eos_token_id"] = eos_ids;
  }
  ojson gen = fs::exists(d / "generation_config.json") ? read_json(d / "generation_config.json") : ojson::object();
  gen["bos_token_id"] = bos;
  gen["eos_token_id"] = eos_ids;

  std::printf("%s (%s): %lld special tokens added as ids %lld..%lld, %d tensors grown to %lld rows; %s template\n", dir.c_str(),
              arch.c_str(), (long long)n_new, (long long)V, (long long)(V + n_new - 1), grown, (long long)(V + n_new), arch.c_str());
  if (dry_run) return;
  w.write((d / "model.safetensors").string());
  write_json(d / "tokenizer.json", tj);
  write_json(d / "tokenizer_config.json", tc);
  write_json(d / "config.json", cfg);
  write_json(d / "generation_config.json", gen);
}

}  // namespace

void add_family_tokens(CLI::App& app, Action& action) {
  struct Opts {
    std::string model, arch;
    bool dry_run = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "family-tokens",
      "Give a checkpoint trained with the M2 tokenizer its own family's special tokens and chat template (in place)");
  c->add_option("-m,--model", o->model, "Checkpoint directory (HF layout: config.json, tokenizer.json, model.safetensors)")->required();
  c->add_option("--arch", o->arch, "minimax_m3, minimax_text01, minimax_m1 (default: from config.json)");
  c->add_flag("--dry-run", o->dry_run, "Say what would change, write nothing");
  c->callback([o, &action] { action = [o] { run(o->model, o->arch, o->dry_run); }; });
}

}  // namespace mmx::cli
