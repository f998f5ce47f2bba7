// The prefix-tree packer of tree.h: a trie over the samples' input ids, then one DFS.
#include "rl/tree.h"

#include <algorithm>
#include <map>

#include "base/error.h"

namespace mmx::rl {

namespace {

void check_samples(const std::vector<Sample>& samples) {
  if (samples.empty()) fail("rl: no samples to pack");
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].prompt.empty()) fail("rl: sample {} has an empty prompt (its first completion id needs a row)", i);
    if (samples[i].completion.empty()) fail("rl: sample {} has an empty completion (nothing to score)", i);
  }
}

// The input ids of sample s: prompt ++ completion without its last id (only ever a target).
std::vector<int32_t> inputs(const Sample& s) {
  std::vector<int32_t> v = s.prompt;
  v.insert(v.end(), s.completion.begin(), s.completion.end() - 1);
  return v;
}

struct Trie {
  struct Node {
    int32_t token = 0, depth = 0;
    std::vector<int32_t> children;       // node ids, in insertion order
    std::map<int32_t, int32_t> by_token;  // token -> child node id
  };
  std::vector<Node> nodes{Node{}};  // node 0: the root above every first token (not packed)

  // Inserts ids; returns the node id of each id along the path.
  std::vector<int32_t> insert(const std::vector<int32_t>& ids) {
    std::vector<int32_t> path;
    int32_t cur = 0;
    for (int32_t tok : ids) {
      auto it = nodes[size_t(cur)].by_token.find(tok);
      int32_t next;
      if (it != nodes[size_t(cur)].by_token.end()) {
        next = it->second;
      } else {
        next = int32_t(nodes.size());
        Node n;
        n.token = tok;
        n.depth = cur == 0 ? 0 : nodes[size_t(cur)].depth + 1;
        nodes.push_back(std::move(n));
        nodes[size_t(cur)].by_token.emplace(tok, next);
        nodes[size_t(cur)].children.push_back(next);
      }
      path.push_back(next);
      cur = next;
    }
    return path;
  }
};

}  // namespace

int64_t separate_tokens(const std::vector<Sample>& samples) {
  int64_t n = 0;
  for (const Sample& s : samples) n += int64_t(s.prompt.size() + s.completion.size()) - 1;
  return n;
}

int64_t tree_tokens(const std::vector<Sample>& samples) {
  check_samples(samples);
  Trie trie;
  for (const Sample& s : samples) trie.insert(inputs(s));
  return int64_t(trie.nodes.size()) - 1;
}

Packed pack_tree(const std::vector<Sample>& samples) {
  check_samples(samples);
  Trie trie;
  std::vector<std::vector<int32_t>> paths;
  for (const Sample& s : samples) paths.push_back(trie.insert(inputs(s)));
  // DFS preorder from the root's children; row_of[node] = packed row.
  const int64_t n = int64_t(trie.nodes.size()) - 1;
  Packed p;
  p.n_seqs = 1;
  p.seq_len = n;
  p.tokens.reserve(size_t(n));
  p.positions.reserve(size_t(n));
  p.parents.reserve(size_t(n));
  std::vector<int32_t> row_of(trie.nodes.size(), -1);
  std::vector<std::pair<int32_t, int32_t>> stack;  // (node, parent row)
  const auto& root = trie.nodes[0].children;
  for (auto it = root.rbegin(); it != root.rend(); ++it) stack.emplace_back(*it, -1);
  while (!stack.empty()) {
    const auto [node, parent_row] = stack.back();
    stack.pop_back();
    const Trie::Node& nd = trie.nodes[size_t(node)];
    const int32_t row = int32_t(p.tokens.size());
    row_of[size_t(node)] = row;
    p.tokens.push_back(nd.token);
    p.positions.push_back(nd.depth);
    p.parents.push_back(parent_row);
    for (auto it = nd.children.rbegin(); it != nd.children.rend(); ++it) stack.emplace_back(*it, row);
  }
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = samples[i];
    const size_t P = s.prompt.size();
    for (size_t k = 0; k < s.completion.size(); ++k)
      p.scored.push_back({row_of[size_t(paths[i][P + k - 1])], s.completion[k], int32_t(i), int32_t(k)});
  }
  return p;
}

Packed pack_separate(const std::vector<Sample>& samples) {
  check_samples(samples);
  Packed p;
  p.n_seqs = int64_t(samples.size());
  for (const Sample& s : samples) p.seq_len = std::max(p.seq_len, int64_t(s.prompt.size() + s.completion.size()) - 1);
  p.tokens.assign(size_t(p.n_seqs * p.seq_len), 0);
  p.positions.resize(p.tokens.size());
  for (int64_t s = 0; s < p.n_seqs; ++s) {
    const std::vector<int32_t> in = inputs(samples[size_t(s)]);
    for (int64_t t = 0; t < p.seq_len; ++t) {
      p.positions[size_t(s * p.seq_len + t)] = int32_t(t);
      if (t < int64_t(in.size())) p.tokens[size_t(s * p.seq_len + t)] = in[size_t(t)];
    }
    const Sample& sm = samples[size_t(s)];
    const int64_t P = int64_t(sm.prompt.size());
    for (size_t k = 0; k < sm.completion.size(); ++k)
      p.scored.push_back({s * p.seq_len + P + int64_t(k) - 1, sm.completion[k], int32_t(s), int32_t(k)});
  }
  return p;
}

}  // namespace mmx::rl
