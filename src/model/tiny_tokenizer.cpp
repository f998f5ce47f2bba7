#include "model/tiny_tokenizer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/m2_chat_template.h"
#include "tokenizer/m2_tokens.h"  // header-only constants: no link dependency on mmx_tokenizer

namespace mmx {

namespace {

using json = nlohmann::json;

const char* kCorpus =
    "MiniMax is a small engine for large models. The model reads tokens, runs attention over the "
    "context and a mixture of experts for every token, and writes the next token. Experts are "
    "chosen by a router with a sigmoid gate and a bias that only changes which experts are "
    "selected. The engine checks every number against an independent reference, because one wrong "
    "token id silently degrades a model. Hello world! Tests run on every change, and the results "
    "are the same on every machine. 0123456789 The quick brown fox jumps over the lazy dog.";

constexpr const auto& kSpecials = tok::kM2SpecialTokens;  // shared with the BPE trainer

// GPT-2 byte -> printable code point mapping, as UTF-8 strings.
std::vector<std::string> byte_alphabet() {
  std::vector<std::string> out(256);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : 256 + extra++;
    std::string s;
    if (cp < 0x80) s += char(cp);
    else {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
    out[b] = s;
  }
  return out;
}

}  // namespace

// Not tok::train_bpe (tokenizer/bpe_trainer.h): this trainer cuts words at spaces rather than
// with the M2 regex, breaks ties in byte-alphabet string order and pads an exhausted corpus with
// <unused_N> tokens; many tests pin the ids it gives, so it stays as it is.
TinyTokenizer build_tiny_tokenizer(int vocab_size) {
  const auto alpha = byte_alphabet();
  const int n_special = int(std::size(kSpecials));
  const int n_merges = vocab_size - 256 - n_special;

  // Words with their leading space, as sequences of symbols (byte-alphabet strings).
  std::vector<std::vector<std::string>> words;
  std::string text(kCorpus);
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i + 1;
    while (j < text.size() && text[j] != ' ') ++j;
    std::vector<std::string> w;
    for (size_t k = i; k < j; ++k) w.push_back(alpha[uint8_t(text[k])]);
    words.push_back(w);
    i = j;
  }

  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[alpha[b]] = b;
  json merges = json::array();
  int next_id = 256;
  for (int m = 0; m < n_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> counts;  // ordered: deterministic ties
    for (const auto& w : words)
      for (size_t k = 0; k + 1 < w.size(); ++k) ++counts[{w[k], w[k + 1]}];
    std::pair<std::string, std::string> best;
    int best_n = 0;
    for (const auto& [p, n] : counts)
      if (n > best_n) best = p, best_n = n;
    std::string merged;
    if (best_n >= 1) {
      merged = best.first + best.second;
      for (auto& w : words) {
        std::vector<std::string> nw;
        for (size_t k = 0; k < w.size(); ++k) {
          if (k + 1 < w.size() && w[k] == best.first && w[k + 1] == best.second) {
            nw.push_back(merged);
            ++k;
          } else {
            nw.push_back(w[k]);
          }
        }
        w = nw;
      }
      merges.push_back(best.first + " " + best.second);
    } else {
      // Corpus exhausted: pad with unreachable placeholder tokens so ids stay dense.
      merged = "<unused_" + std::to_string(m) + ">";
    }
    vocab[merged] = next_id++;
  }

  json added = json::array();
  TinyTokenizer t;
  for (int s = 0; s < n_special; ++s) {
    const int id = next_id++;
    vocab[kSpecials[s]] = id;
    added.push_back({{"id", id}, {"content", kSpecials[s]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    if (std::string(kSpecials[s]) == tok::kM2BosToken) t.bos_id = id;
    if (std::string(kSpecials[s]) == tok::kM2EosToken) t.eos_id = id;
  }

  const std::string regex = tok::kM2SplitRegex;
  const json tj = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
        {"ignore_merges", false}, {"vocab", vocab}, {"merges", merges}}},
  };
  t.tokenizer_json = tj.dump(1, ' ', /*ensure_ascii=*/false);
  const json tc = {{"add_bos_token", false},      {"add_eos_token", false},
                   {"bos_token", "]~!b["},        {"eos_token", "[e~["},
                   {"unk_token", "]!d~["},        {"pad_token", "]!p~["},
                   {"model_max_length", 4096},    {"tokenizer_class", "GPT2Tokenizer"},
                   {"clean_up_tokenization_spaces", false},
                   {"chat_template", kM2ChatTemplate}};
  t.tokenizer_config_json = tc.dump(2, ' ', false);
  return t;
}

}  // namespace mmx
