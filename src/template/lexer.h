// Jinja lexer: template source -> tokens, with the whitespace handling of @huggingface/jinja
// (trim_blocks and lstrip_blocks on, one trailing newline dropped, `{%-`/`-%}`/`{{-`/`-}}`/`{#-`
// stripping, transformers' `{% generation %}` tags removed). Every token remembers its byte
// offset in the ORIGINAL source so errors can name a line and column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mmx::jinja {

enum class Tok : uint8_t {
  kText,
  kNumber,
  kString,
  kIdent,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenBracket,
  kCloseBracket,
  kOpenCurly,
  kCloseCurly,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // unary - + not followed by a number
  kComment,
};

const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  uint32_t pos;  // byte offset in the original template source
};

// Throws mmx::Error "line L, column C: ..." on a lexical error.
std::vector<Token> tokenize(const std::string& source);

// "line L, column C" for a byte offset into `source` (1-based, columns count bytes).
std::string describe_pos(const std::string& source, uint32_t pos);

}  // namespace mmx::jinja
