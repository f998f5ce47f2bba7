// Template: lex + parse at construction, evaluate with a fresh global scope per render().
#include "base/error.h"
#include "template/interpreter.h"
#include "template/jinja.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace mmx::jinja {

static void line_col(const std::string& src, uint32_t pos, int& line, int& col) {
  line = 1;
  col = 1;
  for (uint32_t k = 0; k < pos && k < src.size(); ++k) {
    if (src[k] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
}

Template::Template(std::string source) : source_(std::move(source)) {
  try {
    program_ = parse(tokenize(source_), source_);
  } catch (const TemplateError&) {
    throw;
  } catch (const mmx::Error& e) {
    throw TemplateError(e.what(), false, 0, 0);
  } catch (const std::exception& e) {  // e.g. an integer literal out of range
    throw TemplateError(fmt::format("chat template syntax error: {}", e.what()), false, 0, 0);
  }
}

bool is_builtin_global(const std::string& name) {
  static const Env globals = [] {
    Env e;
    install_globals(e);
    return e;
  }();
  return globals.vars.count(name) > 0;
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  auto env = std::make_shared<Env>();
  install_globals(*env);
  if (!context.is_null() && !context.is_object()) throw mmx::Error("chat template context must be a JSON object");
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      if (env->vars.count(it.key())) fail("chat template variable already declared: {}", it.key());
      env->set(it.key(), from_json(it.value()));
    }
  }
  Interpreter interp;
  try {
    return interp.eval_block(program_, env);
  } catch (const EvalError& e) {
    int line = 0, col = 0;
    line_col(source_, e.pos, line, col);
    if (e.raised) throw TemplateError(e.msg, true, line, col);
    throw TemplateError(fmt::format("chat template error at line {}, column {}: {}", line, col, e.msg), false, line,
                        col);
  } catch (const mmx::Error&) {
    throw;
  } catch (...) {  // break/continue outside a loop
    throw TemplateError("chat template error: break or continue outside a loop", false, 0, 0);
  }
}

}  // namespace mmx::jinja
