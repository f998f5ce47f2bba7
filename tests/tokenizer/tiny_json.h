// A small byte-level tokenizer.json built in code for the unit tests: the 256 alphabet
// characters (ids 0..255 in byte order), a few merges, the o200k/MiniMax Split regex + ByteLevel,
// and added tokens <s> (special, id 261), </s> (special, 262), <lst> (lstrip+rstrip, 263),
// "hello" (normalized, not special, 264), "Ġxy" (special, alphabet content, 265).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/unicode.h"

namespace mmx::tok::test_data {

inline std::string alpha(unsigned char b) {
  std::string s;
  utf8_append(s, byte_to_codepoint()[b]);
  return s;
}

inline nlohmann::json tiny_tokenizer_json() {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[alpha(uint8_t(b))] = b;
  const std::string G = alpha(' ');
  vocab[G + "t"] = 256;
  vocab["he"] = 257;
  vocab[G + "the"] = 258;
  vocab["th"] = 259;
  vocab[G + "th"] = 260;
  const json merges = {G + " t", "t h", "h e", G + "t he", G + "th e"};
  const std::string regex =
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
      "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  auto added = [](int id, const char* c, bool special, bool lstrip, bool rstrip, bool normalized) {
    return json{{"id", id}, {"content", c}, {"special", special}, {"lstrip", lstrip},
                {"rstrip", rstrip}, {"normalized", normalized}, {"single_word", false}};
  };
  return json{
      {"version", "1.0"},
      {"added_tokens",
       {added(261, "<s>", true, false, false, false), added(262, "</s>", true, false, false, false),
        added(263, "<lst>", false, true, true, false), added(264, "hello", false, false, false, true),
        added(265, "\xC4\xA0xy", true, false, false, false)}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                    {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {261}}, {"tokens", {"<s>"}}}},
                            {"</s>", {{"id", "</s>"}, {"ids", {262}}, {"tokens", {"</s>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", false}}},
  };
}

}  // namespace mmx::tok::test_data
