// mmx::jinja::Template — our Jinja2 interpreter for chat templates, byte-compatible with
// @huggingface/jinja 0.5.x (the engine transformers.js uses; see docs/chat-templates.md for the
// supported subset and the known gaps). Parse once, render many times; render() is const and
// thread-compatible (no shared mutable state).
//
//   jinja::Template t(source);                       // throws TemplateError on a syntax error
//   std::string s = t.render(context_json);          // throws TemplateError on a runtime error
//
// Not here: which variables a chat template receives (chat_template.h builds that context).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"

namespace mmx::jinja {

// A template error with its position. what() is "chat template error at line L, column C: ..."
// (or "chat template syntax error at ..."), except for raise_exception(msg) in the template,
// where what() is exactly msg and is_raised() is true.
class TemplateError : public mmx::Error {
 public:
  TemplateError(const std::string& what, bool raised, int line, int column)
      : mmx::Error(what), raised_(raised), line_(line), column_(column) {}
  bool is_raised() const { return raised_; }
  int line() const { return line_; }
  int column() const { return column_; }

 private:
  bool raised_;
  int line_, column_;
};

struct Node;

class Template {
 public:
  explicit Template(std::string source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // context: a JSON object; each key becomes a global variable (JSON numbers with an integral
  // value become integers, as in JavaScript). Keys that clash with built-in globals (true, none,
  // namespace, range, raise_exception, ...) are an error, as in the reference.
  std::string render(const nlohmann::ordered_json& context) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::unique_ptr<Node>> program_;
};

// True for the names a context may not declare (true, none, namespace, range, raise_exception, ...).
bool is_builtin_global(const std::string& name);

}  // namespace mmx::jinja
