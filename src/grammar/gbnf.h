// GBNF text -> Grammar (the notation and its subset: gbnf.cpp, docs/structured-output.md).
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace mmx::grammar {

// Throws mmx::Error naming the line and what is wrong.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace mmx::grammar
