// Jinja parser: tokens -> a list of statements. Same grammar and precedence as
// @huggingface/jinja (tests bind tighter than `*`, filters tighter than unary minus, `**` is
// left-associative, `a if b` without else is a select expression). Statements: set (incl. block
// set), if/elif/else, for/else, macro, call, filter, break, continue. No raw/include/extends.
#pragma once

#include <string>
#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace mmx::jinja {

// Throws mmx::Error "chat template syntax error at line L, column C: ..." on bad input.
std::vector<NodePtr> parse(const std::vector<Token>& tokens, const std::string& source);

}  // namespace mmx::jinja
