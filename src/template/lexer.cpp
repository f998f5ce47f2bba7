// Jinja lexer (see lexer.h). The preprocessing passes are the reference's regular expressions
// written out by hand, each carrying a map from output byte to original byte for error positions.
#include "template/lexer.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "template/value.h"

namespace mmx::jinja {

const char* tok_name(Tok t) {
  static const char* names[] = {"Text",
                                "NumericLiteral",
                                "StringLiteral",
                                "Identifier",
                                "Equals",
                                "OpenParen",
                                "CloseParen",
                                "OpenStatement",
                                "CloseStatement",
                                "OpenExpression",
                                "CloseExpression",
                                "OpenSquareBracket",
                                "CloseSquareBracket",
                                "OpenCurlyBracket",
                                "CloseCurlyBracket",
                                "Comma",
                                "Dot",
                                "Colon",
                                "Pipe",
                                "AdditiveBinaryOperator",
                                "MultiplicativeBinaryOperator",
                                "ExponentiationBinaryOperator",
                                "ComparisonBinaryOperator",
                                "UnaryOperator",
                                "Comment"};
  return names[int(t)];
}

std::string describe_pos(const std::string& source, uint32_t pos) {
  int line = 1, col = 1;
  for (uint32_t k = 0; k < pos && k < source.size(); ++k) {
    if (source[k] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return fmt::format("line {}, column {}", line, col);
}

namespace {

// Byte length of a JS whitespace character at s[i], 0 if there is none.
size_t ws_len(const std::string& s, size_t i) {
  if (i >= s.size()) return 0;
  unsigned char c = (unsigned char)s[i];
  if (c < 0x80) return (c == ' ' || (c >= 0x09 && c <= 0x0D)) ? 1 : 0;
  size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (i + len > s.size()) return 0;
  auto cps = utf8_decode(s.substr(i, len));
  return cps.size() == 1 && js_is_space(cps[0]) ? len : 0;
}

// JS `^` in multiline mode: start of input or after \n, \r, U+2028, U+2029.
bool at_line_start(const std::string& s, size_t i) {
  if (i == 0) return true;
  char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  return i >= 3 && (unsigned char)s[i - 3] == 0xE2 && (unsigned char)s[i - 2] == 0x80 &&
         ((unsigned char)s[i - 1] == 0xA8 || (unsigned char)s[i - 1] == 0xA9);
}

struct Mapped {
  std::string s;
  std::vector<uint32_t> pos;  // pos[k] = original offset of s[k]; one extra entry for the end
  void push(char c, uint32_t p) {
    s += c;
    pos.push_back(p);
  }
};

Mapped preprocess(const std::string& source) {
  Mapped m;
  for (size_t k = 0; k < source.size(); ++k) m.push(source[k], uint32_t(k));
  if (!m.s.empty() && m.s.back() == '\n') {
    m.s.pop_back();
    m.pos.pop_back();
  }
  auto finish = [](Mapped& x, uint32_t end) { x.pos.push_back(end); };
  uint32_t end_pos = uint32_t(source.size());

  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
  Mapped a;
  for (size_t i = 0; i < m.s.size();) {
    if (at_line_start(m.s, i)) {
      size_t j = i;
      while (j < m.s.size() && (m.s[j] == ' ' || m.s[j] == '\t')) ++j;
      if (j + 1 < m.s.size() && m.s[j] == '{' && std::strchr("#%-", m.s[j + 1])) {
        a.push(m.s[j], m.pos[j]);
        a.push(m.s[j + 1], m.pos[j + 1]);
        i = j + 2;
        continue;
      }
    }
    a.push(m.s[i], m.pos[i]);
    ++i;
  }
  // trim_blocks: /([#%-]})\n/g -> "$1"
  Mapped b;
  for (size_t i = 0; i < a.s.size();) {
    if (i + 2 < a.s.size() && std::strchr("#%-", a.s[i]) && a.s[i] != '\0' && a.s[i + 1] == '}' && a.s[i + 2] == '\n') {
      b.push(a.s[i], a.pos[i]);
      b.push(a.s[i + 1], a.pos[i + 1]);
      i += 3;
      continue;
    }
    b.push(a.s[i], a.pos[i]);
    ++i;
  }
  // transformers' generation tags: /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs
  Mapped c;
  size_t copied = 0;  // b.s[0, copied) is already in c
  for (size_t i = 0; i + 1 < b.s.size(); ++i) {
    if (b.s[i] != '{' || b.s[i + 1] != '%') continue;
    size_t j = i + 2;
    bool lstrip = j < b.s.size() && b.s[j] == '-';
    if (lstrip) ++j;
    while (size_t w = ws_len(b.s, j)) j += w;
    if (b.s.compare(j, 3, "end") == 0 && b.s.compare(j + 3, 10, "generation") == 0) j += 3;
    if (b.s.compare(j, 10, "generation") != 0) continue;
    j += 10;
    while (size_t w = ws_len(b.s, j)) j += w;
    bool rstrip = j < b.s.size() && b.s[j] == '-';
    if (rstrip) ++j;
    if (b.s.compare(j, 2, "%}") != 0) continue;
    j += 2;
    // leading whitespace run, not reaching back into text already consumed by a previous match
    size_t ws_begin = i;
    while (ws_begin > copied) {
      size_t k = ws_begin - 1;
      while (k > copied && ((unsigned char)b.s[k] & 0xC0) == 0x80) --k;
      if (ws_len(b.s, k) != ws_begin - k) break;
      ws_begin = k;
    }
    size_t after_end = j;
    while (size_t w = ws_len(b.s, after_end)) after_end += w;
    for (size_t k = copied; k < (lstrip ? ws_begin : i); ++k) c.push(b.s[k], b.pos[k]);
    if (!rstrip)
      for (size_t k = j; k < after_end; ++k) c.push(b.s[k], b.pos[k]);
    copied = after_end;
    i = after_end - 1;
  }
  for (size_t k = copied; k < b.s.size(); ++k) c.push(b.s[k], b.pos[k]);
  finish(c, end_pos);
  return c;
}

struct Lexer {
  const std::string& source;
  Mapped m;
  std::vector<Token> tokens;
  size_t cur = 0;
  int curly_depth = 0;

  [[noreturn]] void error(const std::string& msg, size_t at) {
    uint32_t p = m.pos[std::min(at, m.pos.size() - 1)];
    fail("chat template syntax error at {}: {}", describe_pos(source, p), msg);
  }
  char at(size_t i) const { return i < m.s.size() ? m.s[i] : '\0'; }
  void push(Tok t, std::string v, size_t start) {
    tokens.push_back({t, std::move(v), m.pos[std::min(start, m.pos.size() - 1)]});
  }
  bool last_is(std::initializer_list<Tok> ts) const {
    if (tokens.empty()) return false;
    for (Tok t : ts)
      if (tokens.back().type == t) return true;
    return false;
  }

  // consumeWhile with the reference's escape handling and its end-of-input rule.
  template <typename Pred>
  std::string consume_while(Pred pred) {
    std::string out;
    while (cur < m.s.size() ? pred(cur) : pred_at_end(pred)) {
      if (at(cur) == '\\') {
        size_t start = cur;
        ++cur;
        if (cur >= m.s.size()) error("Unexpected end of input", start);
        char e = m.s[cur++];
        if (e == 'x' || e == 'u') {
          size_t len = e == 'x' ? 2 : 4;
          std::string hex = m.s.substr(cur, len);
          bool ok = hex.size() == len;
          for (char h : hex) ok = ok && std::isxdigit((unsigned char)h);
          if (!ok) error(fmt::format("Invalid hexadecimal escape sequence: \\{}{}", e, hex), start);
          uint32_t cp = uint32_t(std::stoul(hex, nullptr, 16));
          cur += len;
          // a \uD8xx\uDCxx pair forms one code point
          if (cp >= 0xD800 && cp <= 0xDBFF && at(cur) == '\\' && at(cur + 1) == 'u') {
            std::string lo = m.s.substr(cur + 2, 4);
            if (lo.size() == 4 &&
                std::all_of(lo.begin(), lo.end(), [](char h) { return std::isxdigit((unsigned char)h); })) {
              uint32_t l = uint32_t(std::stoul(lo, nullptr, 16));
              if (l >= 0xDC00 && l <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (l - 0xDC00);
                cur += 6;
              }
            }
          }
          utf8_append(out, cp);
          continue;
        }
        const char* from = "ntrbfv'\"\\";
        const char* to = "\n\t\r\b\f\v'\"\\";
        const char* p = std::strchr(from, e);
        if (!p || e == '\0') error(fmt::format("Unexpected escaped character: {}", e), start);
        out += to[p - from];
        continue;
      }
      out += m.s[cur++];
      if (cur >= m.s.size()) error("Unexpected end of input", cur - 1);
    }
    return out;
  }
  // In JS, src[len] is undefined: `c !== quote` holds, the class tests do not.
  template <typename Pred>
  bool pred_at_end(Pred&) {
    return false;
  }

  void strip_trailing_ws() {
    if (!tokens.empty() && tokens.back().type == Tok::kText) {
      tokens.back().value = js_trim(tokens.back().value, false, true);
      if (tokens.back().value.empty()) tokens.pop_back();
    }
  }
  void skip_leading_ws() {
    while (size_t w = ws_len(m.s, cur)) cur += w;
  }

  void run() {
    static const std::pair<const char*, Tok> table[] = {{"{%", Tok::kOpenStatement},  {"%}", Tok::kCloseStatement},
                                                        {"{{", Tok::kOpenExpression}, {"}}", Tok::kCloseExpression},
                                                        {"(", Tok::kOpenParen},       {")", Tok::kCloseParen},
                                                        {"{", Tok::kOpenCurly},       {"}", Tok::kCloseCurly},
                                                        {"[", Tok::kOpenBracket},     {"]", Tok::kCloseBracket},
                                                        {",", Tok::kComma},           {".", Tok::kDot},
                                                        {":", Tok::kColon},           {"|", Tok::kPipe},
                                                        {"<=", Tok::kComparison},     {">=", Tok::kComparison},
                                                        {"==", Tok::kComparison},     {"!=", Tok::kComparison},
                                                        {"<", Tok::kComparison},      {">", Tok::kComparison},
                                                        {"+", Tok::kAdditive},        {"-", Tok::kAdditive},
                                                        {"~", Tok::kAdditive},        {"**", Tok::kPower},
                                                        {"*", Tok::kMultiplicative},  {"//", Tok::kMultiplicative},
                                                        {"/", Tok::kMultiplicative},  {"%", Tok::kMultiplicative},
                                                        {"=", Tok::kEquals}};
    const std::string& s = m.s;
    while (cur < s.size()) {
      if (tokens.empty() || last_is({Tok::kCloseStatement, Tok::kCloseExpression, Tok::kComment})) {
        size_t start = cur;
        while (cur < s.size() && !(s[cur] == '{' && (at(cur + 1) == '%' || at(cur + 1) == '{' || at(cur + 1) == '#')))
          ++cur;
        if (cur > start) {
          push(Tok::kText, s.substr(start, cur - start), start);
          continue;
        }
      }
      if (s[cur] == '{' && at(cur + 1) == '#') {
        size_t start = cur;
        cur += 2;
        bool strip_before = at(cur) == '-';
        if (strip_before) ++cur;
        std::string comment;
        while (at(cur) != '#' || at(cur + 1) != '}') {
          if (cur + 2 >= s.size()) error("Missing end of comment tag", start);
          comment += s[cur++];
        }
        bool strip_after = !comment.empty() && comment.back() == '-';
        if (strip_after) comment.pop_back();
        if (strip_before) strip_trailing_ws();
        push(Tok::kComment, comment, start);
        cur += 2;
        if (strip_after) skip_leading_ws();
        continue;
      }
      if (s.compare(cur, 3, "{%-") == 0) {
        strip_trailing_ws();
        push(Tok::kOpenStatement, "{%", cur);
        cur += 3;
        continue;
      }
      if (s.compare(cur, 3, "{{-") == 0) {
        strip_trailing_ws();
        push(Tok::kOpenExpression, "{{", cur);
        curly_depth = 0;
        cur += 3;
        continue;
      }
      while (size_t w = ws_len(s, cur)) {  // consumeWhile(isWhitespace), which fails at end of input
        cur += w;
        if (cur >= s.size()) error("Unexpected end of input", cur - w);
      }
      if (s.compare(cur, 3, "-%}") == 0) {
        push(Tok::kCloseStatement, "%}", cur);
        cur += 3;
        skip_leading_ws();
        continue;
      }
      if (s.compare(cur, 3, "-}}") == 0) {
        push(Tok::kCloseExpression, "}}", cur);
        cur += 3;
        skip_leading_ws();
        continue;
      }
      if (cur >= s.size()) break;
      char c = s[cur];
      if (c == '-' || c == '+') {
        if (tokens.empty() || tokens.back().type == Tok::kText) error(fmt::format("Unexpected character: {}", c), cur);
        if (!last_is({Tok::kIdent, Tok::kNumber, Tok::kString, Tok::kCloseParen, Tok::kCloseBracket})) {
          size_t start = cur;
          ++cur;
          std::string num = consume_while([&](size_t i) { return std::isdigit((unsigned char)s[i]) != 0; });
          if (!num.empty() && at(cur) == '.' && std::isdigit((unsigned char)at(cur + 1))) {
            ++cur;
            num += '.';
            num += consume_while([&](size_t i) { return std::isdigit((unsigned char)s[i]) != 0; });
          }
          push(num.empty() ? Tok::kUnary : Tok::kNumber, std::string(1, c) + num, start);
          continue;
        }
      }
      bool matched = false;
      for (const auto& [seq, type] : table) {
        size_t len = std::strlen(seq);
        if (type == Tok::kCloseExpression && curly_depth > 0) continue;
        if (s.compare(cur, len, seq) != 0) continue;
        push(type, seq, cur);
        if (type == Tok::kOpenExpression)
          curly_depth = 0;
        else if (type == Tok::kOpenCurly)
          ++curly_depth;
        else if (type == Tok::kCloseCurly)
          --curly_depth;
        cur += len;
        matched = true;
        break;
      }
      if (matched) continue;
      if (c == '\'' || c == '"') {
        size_t start = cur;
        ++cur;
        std::string str = consume_while([&](size_t i) { return s[i] != c; });
        if (cur >= s.size()) error("Unexpected end of input", start);
        push(Tok::kString, str, start);
        ++cur;
        continue;
      }
      if (std::isdigit((unsigned char)c)) {
        size_t start = cur;
        std::string num = consume_while([&](size_t i) { return std::isdigit((unsigned char)s[i]) != 0; });
        if (!last_is({Tok::kDot}) && at(cur) == '.' && std::isdigit((unsigned char)at(cur + 1))) {
          ++cur;
          num += '.';
          num += consume_while([&](size_t i) { return std::isdigit((unsigned char)s[i]) != 0; });
        }
        push(Tok::kNumber, num, start);
        continue;
      }
      if (std::isalnum((unsigned char)c) || c == '_') {
        size_t start = cur;
        std::string word = consume_while([&](size_t i) { return std::isalnum((unsigned char)s[i]) || s[i] == '_'; });
        push(Tok::kIdent, word, start);
        continue;
      }
      error(fmt::format("Unexpected character: {}", c), cur);
    }
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) {
  Lexer lx{source, preprocess(source), {}, 0, 0};
  lx.run();
  return std::move(lx.tokens);
}

}  // namespace mmx::jinja
