// The MiniMax-M2 tokenizer's fixed parts (spec §6.1): the pre-tokenizer Split regex and the
// special tokens, shared by the BPE trainer (bpe_trainer.h) and the tiny model's tokenizer
// (tiny/tiny_tokenizer.cpp), so both write the same pre-tokenizer and specials.
//
// Header-only constants: including it adds no link dependency.
#pragma once

#include <array>

namespace mmx::tok {

// The M2 tokenizer.json "Split" pattern (Isolated, not inverted), as llama.cpp records it from
// the original tokenizer.json: the o200k pattern with full Unicode-category case classes.
inline constexpr const char* kM2SplitRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The special tokens our M2-format tokenizers carry, in id order (they take the last ids):
// pad, BOS, role start, EOS, and the reasoning / tool-call markers of the M2 chat template.
inline constexpr std::array<const char*, 8> kM2SpecialTokens = {
    "]!p~[", "]~!b[", "]~b]", "[e~[", "<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"};
inline constexpr const char* kM2PadToken = "]!p~[";
inline constexpr const char* kM2BosToken = "]~!b[";
inline constexpr const char* kM2EosToken = "[e~[";

}  // namespace mmx::tok
