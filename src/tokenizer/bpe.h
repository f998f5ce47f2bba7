// The BPE model of HF tokenizer.json ("model": {"type": "BPE", ...}).
//
// Byte-level mode (a ByteLevel pre-tokenizer is present): the model works on the raw bytes of a
// piece; each byte starts as the id of its GPT-2 alphabet character, and the vocabulary is
// re-keyed by the bytes its tokens stand for. This is the same as HF mapping the text to the
// alphabet first, without building those strings. Char mode: each UTF-8 character of the piece is
// a unit looked up in the vocabulary; missing ones become <0xXX> (byte_fallback), unk (fused when
// fuse_unk) or are dropped (no unk token), as HF does.
//
// Merging: a min-heap of candidate pairs ordered by (rank, position) over a linked list of
// symbols — O(n log n) per piece, the same order as HF's `Word::merge_all`. ignore_merges: a
// piece that is itself a vocabulary token is emitted as that token.
//
// Supported: merges as "a b" strings or ["a", "b"] pairs, unk_token, fuse_unk, byte_fallback,
// ignore_merges. Refused: dropout, non-empty continuing_subword_prefix / end_of_word_suffix.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_cache.h"

namespace mmx::tok {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object; `byte_level` says whether the pre-tokenizer chain
  // ends in ByteLevel. Throws mmx::Error on malformed or unsupported content.
  static BpeModel from_json(const nlohmann::json& model, bool byte_level);

  // Appends the ids of one pre-token `piece` (bytes of normalized text) to `out`. `cache` may
  // be null; when given, results are looked up / stored there.
  void encode_piece(std::string_view piece, std::vector<int32_t>& out, BpeCache* cache) const;

  // Model vocabulary (not the added tokens). -1 / empty when unknown.
  int32_t token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  int32_t max_id() const { return int32_t(id_to_token_.size()) - 1; }
  size_t vocab_count() const { return vocab_.size(); }  // entries (HF's get_vocab_size)
  size_t max_token_bytes() const { return max_token_bytes_; }  // longest entry, UTF-8 bytes
  bool is_byte_level() const { return byte_level_; }

 private:
  struct Sym {
    int32_t id, prev, next, len;
  };
  void merge(std::vector<Sym>& syms) const;
  void units_bytes(std::string_view piece, std::vector<Sym>& syms) const;
  void units_chars(std::string_view piece, std::vector<Sym>& syms) const;
  int64_t merge_lookup(int32_t a, int32_t b) const;  // (rank << 32 | new_id) or -1

  struct Transparent {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  using StrMap = std::unordered_map<std::string, int32_t, Transparent, Transparent>;

  StrMap vocab_;        // original token strings -> id
  StrMap units_;        // byte mode: raw bytes -> id (alphabet-only tokens); char mode: == vocab_
  std::vector<std::string> id_to_token_;
  std::vector<uint64_t> merge_keys_;  // open addressing: key (a << 32 | b) + 1, 0 = empty
  std::vector<int64_t> merge_vals_;   // rank << 32 | new_id
  uint64_t merge_mask_ = 0;
  int32_t byte_ids_[256];
  int32_t byte_fallback_ids_[256];
  bool byte_level_ = false, ignore_merges_ = false, byte_fallback_ = false, fuse_unk_ = false;
  size_t max_token_bytes_ = 1;
  int32_t unk_id_ = -1;
};

}  // namespace mmx::tok
