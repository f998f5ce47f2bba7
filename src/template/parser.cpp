// Jinja parser (see parser.h): recursive descent, one function per precedence level, lowest first.
#include "template/parser.h"

#include <cstdint>
#include <set>

#include "base/error.h"

namespace mmx::jinja {
namespace {

struct Parser {
  const std::vector<Token>& toks;
  const std::string& source;
  size_t cur = 0;

  [[noreturn]] void error(const std::string& msg) {
    uint32_t p = cur < toks.size() ? toks[cur].pos : toks.empty() ? 0 : toks.back().pos;
    fail("chat template syntax error at {}: {}", describe_pos(source, p), msg);
  }
  const Token& peek() {
    if (cur >= toks.size()) error("unexpected end of template");
    return toks[cur];
  }
  const Token& next() {
    const Token& t = peek();
    ++cur;
    return t;
  }
  const Token& expect(Tok type, const char* what) {
    const Token& t = peek();
    if (t.type != type) error(fmt::format("{}. {} !== {}.", what, tok_name(t.type), tok_name(type)));
    ++cur;
    return t;
  }
  bool is(Tok t, size_t off = 0) const { return cur + off < toks.size() && toks[cur + off].type == t; }
  bool is_ident(const char* name, size_t off = 0) const {
    return is(Tok::kIdent, off) && toks[cur + off].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(Tok::kOpenStatement) || !is(Tok::kIdent, 1)) return false;
    for (const char* n : names)
      if (toks[cur + 1].value == n) return true;
    return false;
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) error(fmt::format("Expected {}", name));
    ++cur;
  }
  NodePtr node(NodeKind k, uint32_t pos) { return std::make_unique<Node>(k, pos); }

  NodePtr parse_any() {
    const Token& t = peek();
    switch (t.type) {
      case Tok::kComment: {
        ++cur;
        return node(NodeKind::kComment, t.pos);
      }
      case Tok::kText: {
        ++cur;
        auto n = node(NodeKind::kString, t.pos);
        n->str = t.value;
        return n;
      }
      case Tok::kOpenStatement:
        return parse_statement();
      case Tok::kOpenExpression: {
        ++cur;
        auto e = parse_expression();
        expect(Tok::kCloseExpression, "Expected closing expression token");
        return e;
      }
      default:
        error(fmt::format("Unexpected token type: {}", tok_name(t.type)));
    }
  }

  void body_until(std::vector<NodePtr>& body, std::initializer_list<const char*> names) {
    while (!is_statement(names)) body.push_back(parse_any());
  }
  void expect_end(const char* name) {
    expect(Tok::kOpenStatement, "Expected {% token");
    expect_ident(name);
    expect(Tok::kCloseStatement, "Expected %} token");
  }

  NodePtr parse_statement() {
    expect(Tok::kOpenStatement, "Expected opening statement token");
    const Token& t = peek();
    if (t.type != Tok::kIdent) error(fmt::format("Unknown statement, got {}", tok_name(t.type)));
    const std::string name = t.value;
    uint32_t pos = t.pos;
    ++cur;
    if (name == "set") return parse_set(pos);
    if (name == "if") {
      auto n = parse_if(pos);
      expect_end("endif");
      return n;
    }
    if (name == "macro") {
      auto n = node(NodeKind::kMacro, pos);
      auto id = parse_primary();
      if (id->kind != NodeKind::kIdent) error("Expected identifier following macro statement");
      n->str = id->str;
      parse_args(n->list, true);
      expect(Tok::kCloseStatement, "Expected closing statement token");
      body_until(n->body, {"endmacro"});
      expect_end("endmacro");
      return n;
    }
    if (name == "for") {
      auto n = parse_for(pos);
      expect_end("endfor");
      return n;
    }
    if (name == "call") {
      auto n = node(NodeKind::kCallBlock, pos);
      if (is(Tok::kOpenParen)) {
        n->flag = true;
        parse_args(n->list, true);
      }
      auto callee = parse_primary();
      if (callee->kind != NodeKind::kIdent) error("Expected identifier following call statement");
      auto call = node(NodeKind::kCall, callee->pos);
      call->a = std::move(callee);
      parse_args(call->list, false);
      n->a = std::move(call);
      expect(Tok::kCloseStatement, "Expected closing statement token");
      body_until(n->body, {"endcall"});
      expect_end("endcall");
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::kCloseStatement, "Expected closing statement token");
      return node(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, pos);
    }
    if (name == "filter") {
      auto n = node(NodeKind::kFilterBlock, pos);
      auto f = parse_primary();
      if (f->kind == NodeKind::kIdent && is(Tok::kOpenParen)) f = parse_call(std::move(f));
      n->a = std::move(f);
      expect(Tok::kCloseStatement, "Expected closing statement token");
      body_until(n->body, {"endfilter"});
      expect_end("endfilter");
      return n;
    }
    cur -= 1;
    error(fmt::format("Unknown statement type: {}", name));
  }

  NodePtr parse_set(uint32_t pos) {
    auto n = node(NodeKind::kSet, pos);
    n->a = parse_sequence(false);
    if (is(Tok::kEquals)) {
      ++cur;
      n->b = parse_sequence(false);
    } else {
      expect(Tok::kCloseStatement, "Expected %} token");
      body_until(n->body, {"endset"});
      expect(Tok::kOpenStatement, "Expected {% token");
      expect_ident("endset");
    }
    expect(Tok::kCloseStatement, "Expected closing statement token");
    return n;
  }

  NodePtr parse_if(uint32_t pos) {
    auto n = node(NodeKind::kIf, pos);
    n->a = parse_expression();
    expect(Tok::kCloseStatement, "Expected closing statement token");
    body_until(n->body, {"elif", "else", "endif"});
    if (is_statement({"elif"})) {
      uint32_t p = toks[cur + 1].pos;
      cur += 2;
      n->alt.push_back(parse_if(p));
    } else if (is_statement({"else"})) {
      cur += 2;
      expect(Tok::kCloseStatement, "Expected closing statement token");
      body_until(n->alt, {"endif"});
    }
    return n;
  }

  NodePtr parse_for(uint32_t pos) {
    auto n = node(NodeKind::kFor, pos);
    n->a = parse_sequence(true);
    if (n->a->kind != NodeKind::kIdent && n->a->kind != NodeKind::kTuple)
      error("Expected identifier/tuple for the loop variable");
    if (!is_ident("in")) error("Expected `in` keyword following loop variable");
    ++cur;
    n->b = parse_expression();
    expect(Tok::kCloseStatement, "Expected closing statement token");
    body_until(n->body, {"endfor", "else"});
    if (is_statement({"else"})) {
      cur += 2;
      expect(Tok::kCloseStatement, "Expected closing statement token");
      body_until(n->alt, {"endfor"});
    }
    return n;
  }

  NodePtr parse_sequence(bool primary) {
    uint32_t pos = peek().pos;
    std::vector<NodePtr> items;
    items.push_back(primary ? parse_primary() : parse_expression());
    bool tuple = is(Tok::kComma);
    while (tuple) {
      ++cur;
      items.push_back(primary ? parse_primary() : parse_expression());
      if (!is(Tok::kComma)) break;
    }
    if (!tuple) return std::move(items[0]);
    auto n = node(NodeKind::kTuple, pos);
    n->list = std::move(items);
    return n;
  }

  uintptr_t stack_base = 0;
  NodePtr parse_expression() {
    char here;  // bounded recursion: at most 1 MiB of stack for nested expressions
    auto at = reinterpret_cast<uintptr_t>(&here);
    if (!stack_base) stack_base = at;
    if (stack_base > at && stack_base - at > (1u << 20)) error("expression nested too deeply");
    return parse_if_expr();
  }

  NodePtr parse_if_expr() {
    auto a = parse_or();
    if (is_ident("if")) {
      uint32_t pos = peek().pos;
      ++cur;
      auto test = parse_or();
      if (is_ident("else")) {
        ++cur;
        auto n = node(NodeKind::kTernary, pos);
        n->a = std::move(a);
        n->b = std::move(test);
        n->c = parse_if_expr();
        return n;
      }
      auto n = node(NodeKind::kSelect, pos);
      n->a = std::move(a);
      n->b = std::move(test);
      return n;
    }
    return a;
  }

  NodePtr binary(const std::string& op, uint32_t pos, NodePtr l, NodePtr r) {
    auto n = node(NodeKind::kBinary, pos);
    n->str = op;
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  NodePtr parse_or() {
    auto left = parse_and();
    while (is_ident("or")) {
      uint32_t pos = next().pos;
      left = binary("or", pos, std::move(left), parse_and());
    }
    return left;
  }
  NodePtr parse_and() {
    auto left = parse_not();
    while (is_ident("and")) {
      uint32_t pos = next().pos;
      left = binary("and", pos, std::move(left), parse_not());
    }
    return left;
  }
  NodePtr parse_not() {
    if (is_ident("not")) {
      uint32_t pos = next().pos;
      auto n = node(NodeKind::kUnary, pos);
      n->str = "not";
      n->a = parse_not();
      return n;
    }
    return parse_comparison();
  }
  NodePtr parse_comparison() {
    auto left = parse_additive();
    while (true) {
      std::string op;
      uint32_t pos = cur < toks.size() ? toks[cur].pos : 0;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        cur += 2;
      } else if (is_ident("in")) {
        op = "in";
        ++cur;
      } else if (is(Tok::kComparison)) {
        op = next().value;
      } else {
        break;
      }
      left = binary(op, pos, std::move(left), parse_additive());
    }
    return left;
  }
  NodePtr parse_additive() {
    auto left = parse_multiplicative();
    while (is(Tok::kAdditive)) {
      const Token& t = next();
      left = binary(t.value, t.pos, std::move(left), parse_multiplicative());
    }
    return left;
  }
  NodePtr parse_multiplicative() {
    auto left = parse_power();
    while (is(Tok::kMultiplicative)) {
      const Token& t = next();
      left = binary(t.value, t.pos, std::move(left), parse_power());
    }
    return left;
  }
  NodePtr parse_power() {
    auto left = parse_test();
    while (is(Tok::kPower)) {
      const Token& t = next();
      left = binary("**", t.pos, std::move(left), parse_test());
    }
    return left;
  }
  NodePtr parse_test() {
    auto operand = parse_filter();
    while (is_ident("is")) {
      uint32_t pos = next().pos;
      bool negate = is_ident("not");
      if (negate) ++cur;
      auto t = parse_primary();
      if (t->kind != NodeKind::kIdent) error("Expected identifier for the test");
      auto n = node(NodeKind::kTest, pos);
      n->flag = negate;
      n->str = t->str;
      n->a = std::move(operand);
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr parse_filter() {
    auto operand = parse_unary_sign();
    while (is(Tok::kPipe)) {
      uint32_t pos = next().pos;
      auto f = parse_primary();
      if (f->kind != NodeKind::kIdent) error("Expected identifier for the filter");
      if (is(Tok::kOpenParen)) f = parse_call(std::move(f));
      auto n = node(NodeKind::kFilter, pos);
      n->a = std::move(operand);
      n->b = std::move(f);
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr parse_unary_sign() {
    if ((is(Tok::kUnary) || is(Tok::kAdditive)) && (peek().value == "-" || peek().value == "+")) {
      const Token& t = next();
      auto n = node(NodeKind::kUnary, t.pos);
      n->str = t.value;
      n->a = parse_unary_sign();
      return n;
    }
    auto member = parse_member(parse_primary());
    if (is(Tok::kOpenParen)) return parse_call(std::move(member));
    return member;
  }
  NodePtr parse_call(NodePtr callee) {
    auto n = node(NodeKind::kCall, callee->pos);
    n->a = std::move(callee);
    parse_args(n->list, false);
    NodePtr e = parse_member(std::move(n));
    if (is(Tok::kOpenParen)) e = parse_call(std::move(e));
    return e;
  }

  void parse_args(std::vector<NodePtr>& args, bool params) {
    expect(Tok::kOpenParen, "Expected opening parenthesis for arguments list");
    std::set<std::string> names;
    bool saw_kw = false, saw_spread = false;
    while (!is(Tok::kCloseParen)) {
      bool kw_spread = is(Tok::kPower);
      bool pos_spread = is(Tok::kMultiplicative) && peek().value == "*";
      if (params && (kw_spread || pos_spread)) error("Argument unpacking is not allowed in parameter declarations");
      if (kw_spread) {
        uint32_t pos = next().pos;
        auto n = node(NodeKind::kKwSpread, pos);
        n->a = parse_expression();
        args.push_back(std::move(n));
        if (is(Tok::kComma)) ++cur;
        if (!is(Tok::kCloseParen)) error("Expected closing parenthesis: `**` must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (pos_spread) {
        if (saw_spread) error("Only one `*` argument unpacking is allowed");
        saw_spread = true;
        uint32_t pos = next().pos;
        arg = node(NodeKind::kSpread, pos);
        arg->a = parse_expression();
      } else {
        arg = parse_expression();
        if (is(Tok::kEquals)) {
          ++cur;
          if (arg->kind != NodeKind::kIdent)
            error(params ? "Expected identifier for parameter declaration"
                         : "Expected identifier for keyword argument");
          auto kw = node(NodeKind::kKwarg, arg->pos);
          kw->str = arg->str;
          kw->a = parse_expression();
          arg = std::move(kw);
        }
        if (params) {
          if (arg->kind != NodeKind::kIdent && arg->kind != NodeKind::kKwarg)
            error("Expected identifier for parameter declaration");
          if (!names.insert(arg->str).second) error(fmt::format("Duplicate parameter name: {}", arg->str));
        }
        if (arg->kind == NodeKind::kKwarg) {
          saw_kw = true;
        } else if (saw_kw) {
          error(params ? "Non-default argument follows default argument"
                       : "Positional arguments must come before keyword arguments");
        } else if (saw_spread) {
          error("Positional arguments must not follow `*` argument unpacking");
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::kComma)) ++cur;
    }
    expect(Tok::kCloseParen, "Expected closing parenthesis for arguments list");
  }

  NodePtr parse_subscript() {
    uint32_t pos = peek().pos;
    std::vector<NodePtr> parts;
    bool slice = false;
    while (!is(Tok::kCloseBracket)) {
      if (is(Tok::kColon)) {
        parts.push_back(nullptr);
        ++cur;
        slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::kColon)) {
          ++cur;
          slice = true;
        }
      }
    }
    if (parts.empty()) error("Expected at least one argument for member/slice expression");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) error("Expected 0-3 arguments for slice expression");
    auto n = node(NodeKind::kSlice, pos);
    n->a = std::move(parts[0]);
    if (parts.size() > 1) n->b = std::move(parts[1]);
    if (parts.size() > 2) n->c = std::move(parts[2]);
    return n;
  }

  NodePtr parse_member(NodePtr object) {
    while (is(Tok::kDot) || is(Tok::kOpenBracket)) {
      const Token& op = next();
      auto n = node(NodeKind::kMember, op.pos);
      n->flag = op.type == Tok::kOpenBracket;
      if (n->flag) {
        n->b = parse_subscript();
        expect(Tok::kCloseBracket, "Expected closing square bracket");
      } else {
        n->b = parse_primary();
        if (n->b->kind != NodeKind::kIdent && n->b->kind != NodeKind::kInt)
          error("Expected identifier or integer following dot operator");
      }
      n->a = std::move(object);
      object = std::move(n);
    }
    return object;
  }

  NodePtr parse_primary() {
    const Token& t = next();
    switch (t.type) {
      case Tok::kNumber: {
        if (t.value.find('.') != std::string::npos) {
          auto n = node(NodeKind::kFloat, t.pos);
          n->fval = std::stod(t.value);
          return n;
        }
        auto n = node(NodeKind::kInt, t.pos);
        n->ival = std::stoll(t.value);
        return n;
      }
      case Tok::kString: {
        auto n = node(NodeKind::kString, t.pos);
        n->str = t.value;
        while (is(Tok::kString)) n->str += next().value;
        return n;
      }
      case Tok::kIdent: {
        auto n = node(NodeKind::kIdent, t.pos);
        n->str = t.value;
        return n;
      }
      case Tok::kOpenParen: {
        auto e = parse_sequence(false);
        expect(Tok::kCloseParen, "Expected closing parenthesis");
        return e;
      }
      case Tok::kOpenBracket: {
        auto n = node(NodeKind::kArray, t.pos);
        while (!is(Tok::kCloseBracket)) {
          n->list.push_back(parse_expression());
          if (is(Tok::kComma)) ++cur;
        }
        ++cur;
        return n;
      }
      case Tok::kOpenCurly: {
        auto n = node(NodeKind::kObject, t.pos);
        while (!is(Tok::kCloseCurly)) {
          auto k = parse_expression();
          expect(Tok::kColon, "Expected colon between key and value in object literal");
          auto v = parse_expression();
          n->pairs.emplace_back(std::move(k), std::move(v));
          if (is(Tok::kComma)) ++cur;
        }
        ++cur;
        return n;
      }
      default:
        --cur;
        error(fmt::format("Unexpected token: {}", tok_name(t.type)));
    }
  }
};

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens, const std::string& source) {
  Parser p{tokens, source};
  std::vector<NodePtr> program;
  while (p.cur < tokens.size()) program.push_back(p.parse_any());
  return program;
}

}  // namespace mmx::jinja
