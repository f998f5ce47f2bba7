// mmx::Error and the MMX_CHECK macro.
//
// Two kinds of failure, two tools (DESIGN.md house rule 4):
//   * bad files, configs, requests -> throw mmx::Error with a message that says what to do;
//     it is caught at a boundary (CLI main, HTTP handler);
//   * broken internal invariants   -> MMX_CHECK(cond, fmt, ...) prints file:line and aborts,
//     and stays on in release builds.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace mmx {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Throws mmx::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mmx

#define MMX_CHECK(cond, ...)                                                            \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #cond, \
                   fmt::format(__VA_ARGS__).c_str());                                   \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
