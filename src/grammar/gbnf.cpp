// GBNF (llama.cpp's grammar notation) -> Grammar. The subset (docs/structured-output.md):
//   rule      ::= NAME "::=" alts          (a rule ends where the next "NAME ::=" begins)
//   alts      ::= seq ("|" seq)*
//   item      ::= primary ("*" | "+" | "?" | "{m}" | "{m,}" | "{m,n}")*
//   primary   ::= "\"literal\"" | "[class]" | "[^class]" | NAME | "(" alts ")" | "."
//   escapes   \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH;  comments "#" to end of line
// NAME is [A-Za-z0-9_.-]+; "." is any one character. Errors name the line.
#include "grammar/gbnf.h"

#include "base/error.h"
#include "grammar/grammar.h"

namespace mmx::grammar {

namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
}

class Parser {
 public:
  Parser(std::string_view t, Builder& b) : t_(t), b_(b) {}

  void rules() {
    skip();
    if (i_ >= t_.size()) err("the grammar is empty");
    while (i_ < t_.size()) {
      const std::string name = read_name();
      skip();
      if (t_.substr(i_, 3) != "::=") err(fmt::format("expected '::=' after rule name '{}'", name));
      i_ += 3;
      const uint32_t r = b_.rule(name);
      if (b_.defined(r)) err(fmt::format("rule '{}' is defined twice", name));
      b_.mark_defined(r);
      for (auto& a : alts(name)) b_.add_alt(r, std::move(a));
      skip();
    }
  }

 private:
  [[noreturn]] void err(const std::string& msg) const {
    int line = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    fail("grammar line {}: {}", line, msg);
  }

  void skip() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ++i_;
      else if (c == '#') { while (i_ < t_.size() && t_[i_] != '\n') ++i_; }
      else break;
    }
  }

  std::string read_name() {
    const size_t s = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    if (i_ == s) err(fmt::format("expected a rule name, found '{}'", t_.substr(s, 12)));
    return std::string(t_.substr(s, i_ - s));
  }

  // At a NAME followed by "::=": the next rule begins.
  bool at_rule_start() const {
    size_t k = i_;
    while (k < t_.size() && name_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  std::vector<std::vector<Element>> alts(const std::string& base) {
    std::vector<std::vector<Element>> out;
    out.push_back(seq(base));
    while (i_ < t_.size() && t_[i_] == '|') {
      ++i_;
      out.push_back(seq(base));
    }
    return out;
  }

  std::vector<Element> seq(const std::string& base) {
    std::vector<Element> run;
    for (;;) {
      skip();
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')' || at_rule_start()) return run;
      std::vector<Element> x = primary(base);
      while (i_ < t_.size()) {
        const char c = t_[i_];
        int mn, mx;
        if (c == '*') mn = 0, mx = -1, ++i_;
        else if (c == '+') mn = 1, mx = -1, ++i_;
        else if (c == '?') mn = 0, mx = 1, ++i_;
        else if (c == '{') braces(mn, mx);
        else break;
        x = {b_.repeat(x, mn, mx, base)};
      }
      run.insert(run.end(), x.begin(), x.end());
    }
  }

  void braces(int& mn, int& mx) {
    ++i_;
    skip();
    mn = number();
    skip();
    mx = mn;
    if (i_ < t_.size() && t_[i_] == ',') {
      ++i_;
      skip();
      mx = i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' ? number() : -1;
      skip();
    }
    if (i_ >= t_.size() || t_[i_] != '}') err("expected '}' closing a repetition count");
    ++i_;
    if (mx >= 0 && mx < mn) err(fmt::format("repetition {{{},{}}} has max < min", mn, mx));
  }

  int number() {
    const size_t s = i_;
    long v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && v <= 100000) v = v * 10 + (t_[i_++] - '0');
    if (i_ == s) err("expected a number in a repetition count");
    if (v > 10000) err("repetition counts above 10000 are not supported");
    return int(v);
  }

  std::vector<Element> primary(const std::string& base) {
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (i_ < t_.size() && t_[i_] != '"') {
        if (t_[i_] == '\n') err("a string literal runs past the end of the line");
        bytes += escaped_bytes();
      }
      if (i_ >= t_.size()) err("unterminated string literal");
      ++i_;
      return b_.literal(bytes);
    }
    if (c == '[') {
      ++i_;
      const bool neg = i_ < t_.size() && t_[i_] == '^';
      if (neg) ++i_;
      std::vector<CharRange> ranges;
      while (i_ < t_.size() && t_[i_] != ']') {
        const uint32_t lo = code_point();
        uint32_t hi = lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          hi = code_point();
        }
        if (hi < lo) err("a character range runs backwards");
        ranges.push_back({lo, hi});
      }
      if (i_ >= t_.size()) err("unterminated character class");
      ++i_;
      if (ranges.empty() && !neg) err("an empty character class matches nothing");
      try {
        return {b_.char_class(std::move(ranges), neg)};
      } catch (const Error& e) {
        err(e.what());
      }
    }
    if (c == '.') {
      ++i_;
      return {b_.char_class({}, true)};
    }
    if (c == '(') {
      ++i_;
      if (++depth_ > kMaxNesting) err(fmt::format("groups nest deeper than {} levels", kMaxNesting));
      auto a = alts(base);
      --depth_;
      skip();
      if (i_ >= t_.size() || t_[i_] != ')') err("expected ')'");
      ++i_;
      return {b_.group(std::move(a), base)};
    }
    if (name_char(c)) return {Element{Element::kRef, b_.rule(read_name())}};
    err(fmt::format("unexpected '{}'", c));
  }

  // One escape or one UTF-8 character of a literal, as bytes.
  std::string escaped_bytes() { return utf8_encode(code_point()); }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k, ++i_) {
      if (i_ >= t_.size()) err("a \\x/\\u escape is cut short");
      const char h = t_[i_];
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) err(fmt::format("'{}' is not a hex digit", h));
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // One character (escape or UTF-8) as a code point.
  uint32_t code_point() {
    if (i_ >= t_.size()) err("unexpected end of grammar");
    const auto c = uint8_t(t_[i_]);
    if (c == '\\') {
      if (++i_ >= t_.size()) err("a backslash ends the grammar");
      const char e = t_[i_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return hex(2);
        case 'u': return checked(hex(4));
        case 'U': return checked(hex(8));
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/': return uint8_t(e);
        default: err(fmt::format("unknown escape '\\{}'", e));
      }
    }
    if (c < 0x80) return ++i_, c;
    const int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (n == 0 || i_ + size_t(n) > t_.size()) err("invalid UTF-8 in the grammar");
    uint32_t cp = c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto d = uint8_t(t_[i_ + size_t(k)]);
      if ((d & 0xC0) != 0x80) err("invalid UTF-8 in the grammar");
      cp = cp << 6 | (d & 0x3F);
    }
    i_ += size_t(n);
    return checked(cp);
  }

  uint32_t checked(uint32_t cp) {
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) err(fmt::format("U+{:X} is not a character", cp));
    return cp;
  }

  std::string_view t_;
  Builder& b_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) {
  Builder b;
  Parser(text, b).rules();
  return b.build(root);
}

}  // namespace mmx::grammar
