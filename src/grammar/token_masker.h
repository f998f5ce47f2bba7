// Token masks: which vocabulary ids an automaton state lets through.
//
//   VocabTrie: the bytes every id decodes to, as a trie laid out in preorder (one array; each node
//     knows where its subtree ends), built once per tokenizer.
//   TokenMasker: one grammar's automaton + the trie. allowed(state, left) walks the trie once,
//     stepping the automaton one byte per trie node and skipping the subtree of any byte the state
//     refuses; ids whose bytes all pass are allowed. Masks are cached per state (a reply spends most
//     of its tokens in few states: inside one string, one number), with the largest dist() any
//     allowed id leads to, so the cache also answers budgeted asks while that fits.
//
// The budget rule: with `left` tokens (this one included), an id is allowed only if the state it
// leads to can still finish in left - 1 further tokens — dist() bytes, at worst one token each
// (a byte-level vocabulary has a token for every byte). So a constrained reply always completes
// within max_tokens, and a model that rambles is steered to close what it opened.
//
// Thread-safe: one mutex per masker (the engine thread is the only caller in practice).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace mmx::tok {
class Tokenizer;
}

namespace mmx::grammar {

class VocabTrie {
 public:
  // Throws mmx::Error when the tokenizer's decoder is not byte-level.
  explicit VocabTrie(const tok::Tokenizer& tok);
  struct Node {
    uint8_t byte;
    uint16_t depth;      // 1 = a first byte
    uint32_t end;        // index past this node's subtree
    uint32_t tok_begin;  // ids ending here: ids_[tok_begin, tok_end)
    uint32_t tok_end;
  };
  int32_t n_vocab() const { return n_vocab_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& ids() const { return ids_; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  const std::vector<int32_t>& special_ids() const { return special_; }
  size_t max_depth() const { return max_depth_; }

 private:
  int32_t n_vocab_ = 0;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::vector<std::string> bytes_;  // per id ("" when the id is unknown or decodes to nothing)
  std::vector<int32_t> special_;
  size_t max_depth_ = 0;
};

using Bits = std::vector<uint64_t>;  // one bit per id

class TokenMasker {
 public:
  // allow_special: whether special added tokens (chat markers, <think>, ...) may be written when
  // their bytes fit the grammar.
  TokenMasker(std::shared_ptr<const VocabTrie> vocab, Grammar g, bool allow_special);

  int32_t start() const { return start_; }
  // The state after id's bytes (Automaton::kDead when the grammar refuses them).
  int32_t advance(int32_t state, int32_t id);
  // The ids allowed after `state` with `left` tokens to go (this one included), stop ids aside.
  void allowed(int32_t state, int64_t left, Bits& out);
  bool accepting(int32_t state);
  bool finished(int32_t state);
  uint32_t dist(int32_t state);
  const VocabTrie& vocab() const { return *vocab_; }
  struct Stats {
    int64_t asks = 0, cache_hits = 0, walks = 0, trie_nodes_visited = 0;
  };
  Stats stats();

 private:
  void walk(int32_t state, int64_t left, Bits& out, uint32_t& max_dist);
  struct Cached {
    Bits bits;
    uint32_t max_dist;  // the largest dist() an allowed id leads to
  };
  std::shared_ptr<const VocabTrie> vocab_;
  Automaton a_;
  bool allow_special_;
  int32_t start_;
  std::unordered_map<int32_t, Cached> cache_;
  std::vector<int32_t> path_;  // the state at each trie depth during a walk
  Stats stats_;
  std::mutex mu_;
};

}  // namespace mmx::grammar
