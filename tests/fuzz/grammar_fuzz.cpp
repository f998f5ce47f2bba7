// libFuzzer target: constrained decoding's untrusted inputs. The first byte picks the reading:
//   even: the rest is GBNF text (the request's `grammar` field);
//   odd:  the rest is a JSON Schema (response_format.json_schema.schema) and, as a second reading,
//         a tools array for the forced M2, M3 and M1 tool-call grammars.
// Each grammar that compiles is then run: the automaton steps over the input's bytes and a few
// derived sentences' worth of states. Every outcome must be success or mmx::Error (SchemaError
// included); any other exception, a crash, a sanitizer report, a hang (-timeout) or a blow-up past
// -rss_limit_mb is a finding. Seeds: run_fuzz.sh writes a few grammars and schemas.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "grammar/automaton.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/tool_grammar.h"

namespace {

void run(const std::string& gbnf, const std::string& input) {
  mmx::grammar::Automaton a(mmx::grammar::parse_gbnf(gbnf));
  int32_t st = a.start();
  (void)a.dist(st);
  for (unsigned char c : input) {  // the input's own bytes, then back to the start when refused
    const int32_t nx = a.next(st, c);
    st = nx == mmx::grammar::Automaton::kDead ? a.start() : nx;
    (void)a.accepting(st);
    (void)a.dist(st);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      run(rest, rest);
    } else {
      const auto j = nlohmann::ordered_json::parse(rest, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded()) return 0;
      try {
        run(mmx::grammar::json_schema_to_gbnf(j), rest);
      } catch (const mmx::Error&) {
      }
      if (j.is_array()) {
        try {
          run(mmx::grammar::m2_tool_call_gbnf(j, ""), rest);
        } catch (const mmx::Error&) {
        }
        try {
          run(mmx::grammar::m3_tool_call_gbnf(j, ""), rest);
        } catch (const mmx::Error&) {
        }
        run(mmx::grammar::m1_tool_call_gbnf(j, ""), rest);
      }
    }
  } catch (const mmx::Error&) {
  }
  return 0;
}
