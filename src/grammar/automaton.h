// Automaton: a Grammar run as a pushdown recognizer over bytes, determinized lazily.
//
// A stack is a chain of nodes (pos, parent): "continue at element pos, then return to parent";
// node 0 is the empty stack (the sentence is complete). Nodes are hash-consed, so equal stacks are
// one id. A state is the sorted set of stacks whose top is a byte class (or node 0) after every
// rule reference was expanded; states are hash-consed too, and each caches its 256 successors as
// they are asked for — so after a short warm-up, stepping is one array read. A reference that is
// the last element of its alternative pushes no return node (tail calls do not grow the stack).
//
// dist(state) is the fewest bytes that complete a sentence from it: the budget rule of
// TokenMasker (a constrained reply must fit its max_tokens) is built on it.
//
// Not thread-safe (the states grow as they are explored): TokenMasker serializes access.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace mmx::grammar {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;
  // States kept at most (1 KiB each): past it, next() throws mmx::Error. A grammar whose stacks
  // record what was written ("x ::= "a" x "a" | "b" x "b" | """) could otherwise grow one state
  // per distinct prefix of the vocabulary's tokens.
  static constexpr size_t kMaxStates = 65536;
  // Stack nodes kept, and stacks alive in one state, at most (an ambiguous grammar multiplies
  // them: "t ::= "(" e ")" | [^)]{1,3}" reads every "(" two ways). Past either: mmx::Error.
  static constexpr size_t kMaxNodes = 1 << 20;
  static constexpr size_t kMaxTops = 4096;
  explicit Automaton(Grammar g);

  int32_t start() const { return start_; }
  int32_t next(int32_t state, uint8_t byte);
  int32_t walk(int32_t state, std::string_view bytes);  // kDead as soon as a byte is refused
  bool accepting(int32_t state) const { return states_[size_t(state)].accepting; }
  // No byte can follow (the only stack left is the empty one).
  bool finished(int32_t state) const { return states_[size_t(state)].finished; }
  uint32_t dist(int32_t state) const { return states_[size_t(state)].dist; }
  size_t n_states() const { return states_.size(); }
  size_t n_nodes() const { return nodes_.size(); }
  const Grammar& grammar() const { return g_; }

 private:
  struct Node {
    uint32_t pos;    // element index (a kBytes or kRef, never kEnd)
    int32_t parent;  // node id; 0 = empty stack
    uint32_t dist;   // fewest bytes to finish this stack
  };
  struct State {
    std::vector<int32_t> nodes;  // sorted tops
    bool accepting = false, finished = false;
    uint32_t dist = 0;
    std::array<int32_t, 256> next;  // kUnknown until asked
  };
  static constexpr int32_t kUnknown = -2;

  int32_t node(uint32_t pos, int32_t parent);
  // The stack tops `n` expands to, appended to `out` (memoized per node).
  void expand(int32_t n, std::vector<int32_t>& out);
  // Continue after the element at `pos` of stack `parent`'s child (pops a finished alternative).
  int32_t after(uint32_t pos, int32_t parent);
  int32_t state(std::vector<int32_t> tops);

  Grammar g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<std::vector<int32_t>> expanded_;  // node -> its tops (empty = not yet computed)
  std::vector<State> states_;
  std::unordered_map<std::string, int32_t> state_ids_;  // key: the tops' bytes
  int32_t start_ = 0;
};

}  // namespace mmx::grammar
