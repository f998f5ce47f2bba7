// Jinja syntax tree: one Node type with a kind tag, as produced by parser.cpp. Statements and
// expressions share the type (as in the reference, a `{{ }}` block is just an expression
// statement). Nodes are owned by their parent; the interpreter holds raw pointers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mmx::jinja {

enum class NodeKind : uint8_t {
  // expressions
  kString,    // str
  kInt,       // ival
  kFloat,     // fval
  kIdent,     // str
  kArray,     // list
  kTuple,     // list
  kObject,    // pairs
  kMember,    // a[b] (flag = computed) or a.b; b may be kSlice
  kSlice,     // a:b:c, null = omitted
  kCall,      // a(list)
  kUnary,     // str op, a
  kBinary,    // str op, a, b
  kFilter,    // a | b (b = kIdent or kCall)
  kTest,      // a is [not] str (flag = negate)
  kSelect,    // a if b   (no else)
  kTernary,   // a if b else c
  kKwarg,     // str = a
  kSpread,    // *a
  kKwSpread,  // **a
  // statements
  kIf,           // a, body, alt
  kFor,          // a = loop var, b = iterable, body, alt
  kSet,          // a = target, b = value (or body)
  kMacro,        // str name, list = params, body
  kCallBlock,    // a = kCall, list = caller params, flag = has params, body
  kFilterBlock,  // a = filter (kIdent or kCall), body
  kBreak,
  kContinue,
  kComment,
};

struct Node {
  NodeKind kind;
  uint32_t pos = 0;  // byte offset in the template source
  std::string str;
  int64_t ival = 0;
  double fval = 0;
  bool flag = false;
  std::unique_ptr<Node> a, b, c;
  std::vector<std::unique_ptr<Node>> list, body, alt;
  std::vector<std::pair<std::unique_ptr<Node>, std::unique_ptr<Node>>> pairs;

  Node(NodeKind k, uint32_t p) : kind(k), pos(p) {}
};
using NodePtr = std::unique_ptr<Node>;

}  // namespace mmx::jinja
