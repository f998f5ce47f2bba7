#include "grammar/grammar.h"

#include <algorithm>
#include <queue>

#include "base/error.h"

namespace mmx::grammar {

namespace {

constexpr uint32_t kInf = UINT32_MAX / 4;

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// One run of per-position byte ranges: the UTF-8 encodings of a code point range of one length.
struct ByteSeq {
  int n = 0;
  uint8_t lo[4], hi[4];
};

// lo..hi of one UTF-8 length -> runs whose byte ranges multiply out to exactly that range: split
// until, at every continuation depth where the ends differ, lo's low bits are all 0 and hi's all 1.
void split_same_len(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split_same_len(lo, lo | m, out);
      split_same_len((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      split_same_len(lo, (hi & ~m) - 1, out);
      split_same_len(hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  ByteSeq s;
  s.n = n;
  for (int k = 0; k < n; ++k) s.lo[k] = uint8_t(a[size_t(k)]), s.hi[k] = uint8_t(b[size_t(k)]);
  out.push_back(s);
}

void split_range(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not characters
    if (lo < 0xD800) split_range(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split_range(0xE000, hi, out);
    return;
  }
  for (uint32_t b : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= b && hi > b) {
      split_range(lo, b, out);
      split_range(b + 1, hi, out);
      return;
    }
  split_same_len(lo, hi, out);
}

}  // namespace

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12)), s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18)), s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F)), s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

uint32_t Grammar::min_len() const {
  uint32_t best = kInf;
  for (uint32_t a : alts[root]) best = std::min(best, min_rest[a]);
  return best;
}

uint32_t Builder::rule(std::string_view name) {
  const auto it = by_name_.find(std::string(name));
  if (it != by_name_.end()) return it->second;
  const auto id = uint32_t(names_.size());
  if (id >= kMaxRules) fail("the grammar grows past {} rules (with those its repetitions and groups make)", kMaxRules);
  names_.emplace_back(name);
  by_name_.emplace(std::string(name), id);
  alts_.emplace_back();
  defined_.push_back(false);
  return id;
}

uint32_t Builder::fresh(std::string_view base) {
  for (;;) {
    const std::string name = fmt::format("{}_{}", base, ++n_fresh_);
    if (!by_name_.count(name)) {
      const uint32_t r = rule(name);
      defined_[r] = true;
      return r;
    }
  }
}

void Builder::add_alt(uint32_t r, std::vector<Element> run) {
  n_elements_ += run.size() + 1;
  if (n_elements_ > kMaxElements) fail("the grammar grows past {} elements after expansion (repetition counts multiply)", kMaxElements);
  defined_[r] = true;
  alts_[r].push_back(std::move(run));
}

Element Builder::bytes(const ByteSet& s) {
  for (size_t i = 0; i < classes_.size(); ++i)
    if (classes_[i] == s) return {Element::kBytes, uint32_t(i)};
  classes_.push_back(s);
  return {Element::kBytes, uint32_t(classes_.size() - 1)};
}

std::vector<Element> Builder::literal(std::string_view text) {
  std::vector<Element> run;
  for (unsigned char c : text) {
    ByteSet s;
    s.set(c);
    run.push_back(bytes(s));
  }
  return run;
}

Element Builder::char_class(std::vector<CharRange> ranges, bool negate) {
  for (const CharRange& r : ranges)
    if (r.lo > r.hi || r.hi > kMaxCodePoint) fail("character range {:#x}-{:#x} is empty or past U+10FFFF", r.lo, r.hi);
  std::sort(ranges.begin(), ranges.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const CharRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, r.hi);
    else merged.push_back(r);
  }
  if (negate) {
    std::vector<CharRange> comp;
    uint32_t next = 0;
    for (const CharRange& r : merged) {
      if (r.lo > next) comp.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) comp.push_back({next, kMaxCodePoint});
    merged = std::move(comp);
  }
  std::vector<ByteSeq> seqs;
  for (const CharRange& r : merged) split_range(r.lo, r.hi, seqs);
  if (seqs.empty()) fail("a character class matches no character");
  ByteSet ascii;
  std::vector<std::vector<Element>> alts;
  for (const ByteSeq& s : seqs) {
    if (s.n == 1) {
      for (int b = s.lo[0]; b <= s.hi[0]; ++b) ascii.set(size_t(b));
      continue;
    }
    std::vector<Element> run;
    for (int k = 0; k < s.n; ++k) {
      ByteSet bs;
      for (int b = s.lo[k]; b <= s.hi[k]; ++b) bs.set(size_t(b));
      run.push_back(bytes(bs));
    }
    alts.push_back(std::move(run));
  }
  if (alts.empty()) return bytes(ascii);
  if (ascii.any()) alts.insert(alts.begin(), {bytes(ascii)});
  return group(std::move(alts), "char");
}

Element Builder::repeat(const std::vector<Element>& x, int min, int max, std::string_view base) {
  if (min < 0 || (max >= 0 && max < min)) fail("repetition {{{},{}}} is empty", min, max);
  if (min > 10000 || max > 10000) fail("repetition counts above 10000 are not supported");
  if (uint64_t(std::max(min, 1)) * (x.size() + 1) > kMaxElements)
    fail("the grammar grows past {} elements after expansion (repetition counts multiply)", kMaxElements);
  std::vector<Element> tail;  // what follows the `min` mandatory copies
  if (max < 0) {
    const uint32_t star = fresh(base);
    std::vector<Element> loop = x;
    loop.push_back({Element::kRef, star});
    add_alt(star, std::move(loop));
    add_alt(star, {});
    tail.push_back({Element::kRef, star});
  } else {
    uint32_t prev = UINT32_MAX;  // O_k ::= x O_{k-1} | ε
    for (int k = 1; k <= max - min; ++k) {
      const uint32_t o = fresh(base);
      std::vector<Element> run = x;
      if (prev != UINT32_MAX) run.push_back({Element::kRef, prev});
      add_alt(o, std::move(run));
      add_alt(o, {});
      prev = o;
    }
    if (prev != UINT32_MAX) tail.push_back({Element::kRef, prev});
  }
  std::vector<Element> run;
  for (int i = 0; i < min; ++i) run.insert(run.end(), x.begin(), x.end());
  run.insert(run.end(), tail.begin(), tail.end());
  if (run.size() == 1 && run[0].kind == Element::kRef) return run[0];
  const uint32_t r = fresh(base);
  add_alt(r, std::move(run));
  return {Element::kRef, r};
}

Element Builder::group(std::vector<std::vector<Element>> alts, std::string_view base) {
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  const uint32_t r = fresh(base);
  for (auto& a : alts) add_alt(r, std::move(a));
  return {Element::kRef, r};
}

Grammar Builder::build(std::string_view root_name) const {
  const auto root_it = by_name_.find(std::string(root_name));
  if (root_it == by_name_.end() || !defined_[root_it->second]) fail("the grammar has no rule '{}'", root_name);
  const size_t n = names_.size();
  // Reachable rules, and every one of them defined.
  std::vector<bool> reach(n, false);
  std::vector<uint32_t> todo{root_it->second};
  reach[root_it->second] = true;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    if (!defined_[r]) fail("rule '{}' is used but never defined", names_[r]);
    for (const auto& alt : alts_[r])
      for (const Element& e : alt)
        if (e.kind == Element::kRef && !reach[e.arg]) reach[e.arg] = true, todo.push_back(e.arg);
  }
  // Limits: a grammar comes from a request, and every pass below is linear in its size.
  size_t n_elems = 0;
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : alts_[r]) n_elems += alt.size() + 1;
  if (n > kMaxRules) fail("the grammar has {} rules (with those its repetitions and groups make); at most {} are supported", n, kMaxRules);
  if (n_elems > kMaxElements) fail("the grammar has {} elements after expansion; at most {} are supported", n_elems, kMaxElements);
  // Fewest bytes per rule (Knuth's generalization of Dijkstra: an alternative's length is known
  // once every rule it references is; the smallest known candidate of a rule is final).
  std::vector<uint32_t> len(n, kInf);
  std::vector<bool> final(n, false);
  struct Alt {
    uint32_t rule;
    uint64_t sum = 0;
    uint32_t missing = 0;  // references to rules not yet final
  };
  std::vector<Alt> alts;
  std::vector<std::vector<uint32_t>> users(n);  // rule -> alternatives referencing it (once per occurrence)
  using Cand = std::pair<uint64_t, uint32_t>;  // (length, rule)
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> pq;
  for (size_t r = 0; r < n; ++r) {
    if (!reach[r]) continue;
    for (const auto& alt : alts_[r]) {
      Alt a{uint32_t(r)};
      for (const Element& e : alt) {
        if (e.kind == Element::kBytes) ++a.sum;
        else ++a.missing, users[e.arg].push_back(uint32_t(alts.size()));
      }
      if (a.missing == 0) pq.push({a.sum, a.rule});
      alts.push_back(a);
    }
  }
  while (!pq.empty()) {
    const auto [l, r] = pq.top();
    pq.pop();
    if (final[r]) continue;
    final[r] = true;
    len[r] = uint32_t(std::min<uint64_t>(l, kInf - 1));
    for (uint32_t ai : users[r]) {
      Alt& a = alts[ai];
      a.sum += len[r];
      if (--a.missing == 0 && !final[a.rule]) pq.push({a.sum, a.rule});
    }
  }
  for (size_t r = 0; r < n; ++r)
    if (reach[r] && !final[r]) fail("rule '{}' can never finish: every alternative recurses without end", names_[r]);
  // Left recursion: rule -> rules it can reach before consuming a byte; a cycle is refused
  // (depth-first, with an explicit stack: a request's grammar may chain thousands of rules).
  std::vector<int> mark(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::vector<uint32_t>> first(n);  // the references an alternative reaches before a byte
  for (size_t r = 0; r < n; ++r) {
    if (!reach[r]) continue;
    for (const auto& alt : alts_[r])
      for (const Element& e : alt) {
        if (e.kind == Element::kBytes) break;
        first[r].push_back(e.arg);
        if (len[e.arg] > 0) break;
      }
  }
  for (size_t root = 0; root < n; ++root) {
    if (!reach[root] || mark[root]) continue;
    std::vector<std::pair<uint32_t, size_t>> stack{{uint32_t(root), 0}};  // (rule, next edge)
    mark[root] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == first[r].size()) {
        mark[r] = 2;
        stack.pop_back();
        continue;
      }
      const uint32_t to = first[r][i++];
      if (mark[to] == 1) fail("rule '{}' is left-recursive (it can reach itself before reading a byte)", names_[to]);
      if (mark[to] == 0) {
        mark[to] = 1;
        stack.push_back({to, 0});
      }
    }
  }
  // Flatten.
  Grammar g;
  g.names = names_;
  g.classes = classes_;
  g.root = root_it->second;
  g.alts.resize(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : alts_[r]) {
      g.alts[r].push_back(uint32_t(g.elems.size()));
      g.elems.insert(g.elems.end(), alt.begin(), alt.end());
      g.elems.push_back({Element::kEnd, 0});
    }
  g.min_rest.assign(g.elems.size(), 0);
  uint32_t acc = 0;
  for (size_t i = g.elems.size(); i-- > 0;) {
    const Element& e = g.elems[i];
    if (e.kind == Element::kEnd) acc = 0;
    else acc = std::min<uint64_t>(kInf, uint64_t(acc) + (e.kind == Element::kBytes ? 1 : len[e.arg]));
    g.min_rest[i] = acc;
  }
  return g;
}

}  // namespace mmx::grammar
