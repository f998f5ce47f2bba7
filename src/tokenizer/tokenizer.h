// mmx::Tokenizer — HF tokenizer.json (byte-level BPE family) with exact id parity to the Hugging
// Face `tokenizers` library on the supported subset (docs/tokenizer.md lists it; everything else
// is refused at load with mmx::Error, never silently approximated).
//
// Pipeline of encode(): invalid UTF-8 -> U+FFFD (policy below); split on raw-text added tokens;
// normalize the rest; split on normalized added tokens; pre-tokenize; BPE each piece (cached);
// post-process when add_special_tokens.
//
// Invalid UTF-8 policy: the input is decoded lossily first (each maximal invalid subpart -> one
// U+FFFD, the WHATWG / Rust from_utf8_lossy rule), i.e. we tokenize exactly the string HF gets
// when the bytes are read as UTF-8 by Python, Rust or Node. decode(encode(x)) != x for such input.
//
// Thread-safety: a loaded Tokenizer is immutable except for its BPE cache, which encode() uses
// only when it can take it without waiting; concurrent encode()/decode() calls are safe.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/postprocessor.h"
#include "tokenizer/pretokenizer.h"

namespace mmx::tok {

class Tokenizer {
 public:
  // Loads tokenizer.json. Throws mmx::Error (naming the file) when it is missing, malformed or
  // uses an unsupported component.
  static Tokenizer from_file(const std::string& path);
  // A directory holding tokenizer.json, or the file itself. A checkpoint of any format (a GGUF
  // file carries its vocabulary) goes through formats/checkpoint.h instead: from_json(its
  // tokenizer()).
  static Tokenizer from_path(const std::string& path);
  static Tokenizer from_json(const nlohmann::json& j);
  // The same; errors are prefixed with `where` (the file the JSON came from).
  static Tokenizer from_json(const nlohmann::json& j, const std::string& where);
  static Tokenizer from_json_text(std::string_view text);

  // text -> ids. Special-token strings in the text are always recognized; add_special_tokens
  // adds the post-processor's tokens (e.g. BOS) around the result.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // text -> ids with no added token matched: every byte is text (normalizer, pre-tokenizer, BPE).
  // For user-supplied content inside a prompt whose own markers stay special.
  std::vector<int32_t> encode_as_text(std::string_view text) const;
  // The byte spans [begin, end) of `text` that encode() would turn into added tokens (raw-text
  // tokens, lstrip/rstrip widening included), in order.
  std::vector<std::pair<size_t, size_t>> added_token_spans(std::string_view text) const;
  // ids -> text; unknown ids are skipped (as HF does); skip_special_tokens drops special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t token_to_id(std::string_view token) const;  // added tokens first; -1 when unknown
  std::string id_to_token(int32_t id) const;          // "" when unknown
  bool has_id(int32_t id) const;
  // 1 + the largest id of the vocabulary and added tokens (ids may have holes).
  int32_t vocab_size() const;
  // A lower bound on encode(text).size() for any text of `bytes` bytes: no id covers more than
  // the longest vocabulary entry or added token (byte-level entries are spelled with 1-2 UTF-8
  // bytes per covered byte, so their spelling bounds it), with room for a normalizer that
  // composes (NFC shrinks text by less than 4x); 0 when an added token strips the whitespace
  // around it (one id can then cover any number of bytes). Lets a server refuse an over-context
  // prompt without encoding it.
  int64_t min_tokens(size_t bytes) const;
  bool is_special(int32_t id) const;

  // ---- for the incremental detokenizer ----
  bool decoder_is_byte_level() const { return decoder_.is_byte_level(); }
  // The string HF's decoder sees for `id` (added content or vocab token); false if unknown.
  bool token_string(int32_t id, std::string& out) const;

  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;

 private:
  Tokenizer() = default;
  void encode_plain(std::string_view text, std::vector<int32_t>& out, BpeCache* cache) const;

  Normalizer normalizer_;
  PreTokenizer pretokenizer_;
  BpeModel model_;
  AddedVocab added_;
  PostProcessor post_;
  Decoder decoder_;
  std::unique_ptr<BpeCache> cache_;
};

}  // namespace mmx::tok
