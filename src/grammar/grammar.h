// A context-free grammar over bytes: what constrained decoding (structured output, forced tool
// calls, GBNF) is compiled into (docs/structured-output.md).
//
//   GBNF text ──parse_gbnf──┐
//   JSON Schema ──json_schema_to_gbnf──> GBNF text
//                            └─> Builder ──build()──> Grammar ──> Automaton (automaton.h)
//
// Terminals are byte classes (a set of the 256 byte values): a Unicode character class is
// compiled into alternatives of UTF-8 byte sequences when it is added, so the automaton runs on
// the bytes a token decodes to, never on characters (a token may end in the middle of one).
// Repetition, grouping and character classes become auxiliary rules; a Grammar is flat: one
// array of elements, each rule a list of alternatives, each alternative a run of elements ended
// by kEnd.
//
// build() refuses (mmx::Error naming the rule) what the automaton cannot run: an undefined rule,
// a rule with no finite derivation ("a ::= "x" a"), and left recursion (a rule reaching itself
// before consuming a byte), so expanding a stack always terminates; and grammars past kMaxRules /
// kMaxElements (a grammar comes from a request: every pass over it is linear in its size).
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mmx::grammar {

using ByteSet = std::bitset<256>;

inline constexpr size_t kMaxRules = 20000;        // rules, the auxiliary ones included
inline constexpr size_t kMaxElements = 200000;   // elements over all alternatives
inline constexpr int kMaxNesting = 64;            // parenthesized groups inside each other (GBNF)

struct Element {
  enum Kind : uint8_t { kBytes, kRef, kEnd };
  Kind kind = kEnd;
  uint32_t arg = 0;  // kBytes: index into Grammar::classes; kRef: rule id
};

struct Grammar {
  std::vector<Element> elems;                  // every alternative, each ended by kEnd
  std::vector<std::vector<uint32_t>> alts;     // rule id -> start positions of its alternatives
  std::vector<std::string> names;              // rule id -> name (for messages)
  std::vector<ByteSet> classes;                // byte classes, deduplicated
  std::vector<uint32_t> min_rest;              // position -> fewest bytes from it to its kEnd
  uint32_t root = 0;
  uint32_t min_len() const;                    // fewest bytes of a complete sentence
};

// A code point range [lo, hi] (inclusive).
struct CharRange {
  uint32_t lo, hi;
};

class Builder {
 public:
  // The rule named `name`, created (undefined) on first use.
  uint32_t rule(std::string_view name);
  // A fresh auxiliary rule named after `base` (base_1, base_2, ...).
  uint32_t fresh(std::string_view base);
  // An alternative of rule r (an empty run is the empty alternative).
  void add_alt(uint32_t r, std::vector<Element> run);
  void mark_defined(uint32_t r) { defined_[r] = true; }
  bool defined(uint32_t r) const { return defined_[r]; }

  Element bytes(const ByteSet& s);
  // The bytes of `text` in order.
  std::vector<Element> literal(std::string_view text);
  // One character of the (sorted or not, overlapping or not) ranges, as UTF-8; `negate` takes
  // the complement within U+0000..U+10FFFF (surrogates are never matched). Returns one element:
  // a byte class when every matched character is one byte, else a reference to an aux rule.
  Element char_class(std::vector<CharRange> ranges, bool negate);
  // x{min,max} (max < 0: unbounded) as an element: a reference to an aux rule.
  Element repeat(const std::vector<Element>& x, int min, int max, std::string_view base);
  // A parenthesized group of alternatives as one element.
  Element group(std::vector<std::vector<Element>> alts, std::string_view base);

  // Validates (see above) and flattens. `root` names the start rule.
  Grammar build(std::string_view root) const;

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<std::vector<std::vector<Element>>> alts_;
  std::vector<bool> defined_;
  std::vector<ByteSet> classes_;
  int n_fresh_ = 0;
  size_t n_elements_ = 0;
};

// The highest code point, and the UTF-8 encoding of one (cp <= 0x10FFFF, not a surrogate).
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
std::string utf8_encode(uint32_t cp);

}  // namespace mmx::grammar
