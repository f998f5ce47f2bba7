#include "grammar/automaton.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace mmx::grammar {

Automaton::Automaton(Grammar g) : g_(std::move(g)) {
  nodes_.push_back({0, -1, 0});  // the empty stack
  expanded_.emplace_back(std::vector<int32_t>{0});
  std::vector<int32_t> tops;
  for (uint32_t a : g_.alts[g_.root]) {
    if (g_.elems[a].kind == Element::kEnd) tops.push_back(0);
    else expand(node(a, 0), tops);
  }
  start_ = state(std::move(tops));
  if (start_ == kDead) fail("the grammar matches nothing");
}

int32_t Automaton::node(uint32_t pos, int32_t parent) {
  const uint64_t key = uint64_t(pos) << 32 | uint32_t(parent);
  const auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  if (nodes_.size() >= kMaxNodes)
    fail("the grammar's automaton grew past {} stack nodes (an ambiguous grammar whose stacks multiply); simplify the grammar",
         kMaxNodes);
  const auto id = int32_t(nodes_.size());
  const uint64_t d = uint64_t(g_.min_rest[pos]) + nodes_[size_t(parent)].dist;
  nodes_.push_back({pos, parent, uint32_t(std::min<uint64_t>(d, UINT32_MAX / 2))});
  expanded_.emplace_back();
  node_ids_.emplace(key, id);
  return id;
}

int32_t Automaton::after(uint32_t pos, int32_t parent) {
  return g_.elems[pos + 1].kind == Element::kEnd ? parent : node(pos + 1, parent);
}

void Automaton::expand(int32_t n, std::vector<int32_t>& out) {
  if (!expanded_[size_t(n)].empty()) {
    out.insert(out.end(), expanded_[size_t(n)].begin(), expanded_[size_t(n)].end());
    return;
  }
  std::vector<int32_t> tops;
  const Node nd = nodes_[size_t(n)];
  const Element e = g_.elems[nd.pos];
  if (e.kind == Element::kBytes) {
    tops.push_back(n);
  } else {  // kRef: every alternative of the rule, returning to what follows the reference
    const int32_t cont = after(nd.pos, nd.parent);
    for (uint32_t a : g_.alts[e.arg]) {
      if (g_.elems[a].kind == Element::kEnd) expand(cont, tops);
      else expand(node(a, cont), tops);
    }
    std::sort(tops.begin(), tops.end());
    tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
    if (tops.size() > kMaxTops)
      fail("the grammar is too ambiguous: {} stacks are alive at once (at most {}); simplify the grammar", tops.size(), kMaxTops);
  }
  expanded_[size_t(n)] = tops;
  out.insert(out.end(), tops.begin(), tops.end());
}

int32_t Automaton::state(std::vector<int32_t> tops) {
  if (tops.empty()) return kDead;
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  std::string key(tops.size() * sizeof(int32_t), '\0');
  std::memcpy(key.data(), tops.data(), key.size());
  const auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  if (tops.size() > kMaxTops)
    fail("the grammar is too ambiguous: {} stacks are alive at once (at most {}); simplify the grammar", tops.size(), kMaxTops);
  if (states_.size() >= kMaxStates)
    fail("the grammar's automaton grew past {} states (a grammar whose stacks remember what was written); "
         "simplify the grammar", kMaxStates);
  State s;
  s.next.fill(kUnknown);
  s.dist = UINT32_MAX;
  for (int32_t t : tops) s.dist = std::min(s.dist, nodes_[size_t(t)].dist);
  s.accepting = tops[0] == 0;
  s.finished = s.accepting && tops.size() == 1;
  s.nodes = std::move(tops);
  const auto id = int32_t(states_.size());
  states_.push_back(std::move(s));
  state_ids_.emplace(std::move(key), id);
  return id;
}

int32_t Automaton::next(int32_t st, uint8_t byte) {
  const int32_t known = states_[size_t(st)].next[byte];
  if (known != kUnknown) return known;
  std::vector<int32_t> tops;
  const std::vector<int32_t> cur = states_[size_t(st)].nodes;  // a copy: states_ may grow
  for (int32_t t : cur) {
    if (t == 0) continue;
    const Node nd = nodes_[size_t(t)];
    if (!g_.classes[g_.elems[nd.pos].arg].test(byte)) continue;
    const int32_t cont = after(nd.pos, nd.parent);
    expand(cont, tops);
  }
  const int32_t r = state(std::move(tops));
  states_[size_t(st)].next[byte] = r;
  return r;
}

int32_t Automaton::walk(int32_t st, std::string_view bytes) {
  for (unsigned char c : bytes) {
    st = next(st, c);
    if (st == kDead) return kDead;
  }
  return st;
}

}  // namespace mmx::grammar
