// libFuzzer target: the input bytes are a Jinja template source. Parsing and rendering it over a
// fixed chat context (messages with reasoning, tool calls and tool results, tools, the special
// tokens) must either succeed or throw mmx::Error (jinja::TemplateError); any other exception, a
// crash, a sanitizer report, a hang (-timeout) or a blow-up past -rss_limit_mb is a finding.
// Seeds: the real chat templates under tests/data (run_fuzz.sh copies them in). See README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "template/jinja.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Weather in Paris? ]~b] <think>"},
      {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "c1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
      {"role": "assistant", "content": "<think>ok</think>It is 21 degrees."},
      {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                              "days": {"type": "array", "items": {"type": "integer"}}},
                              "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "]~!b[", "eos_token": "[e~[",
    "enable_thinking": true, "tools_in_user_message": false
  })");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  try {
    const mmx::jinja::Template t(source);
    const std::string out = t.render(context());
    (void)out;
  } catch (const mmx::Error&) {
    // a syntax or runtime error, reported cleanly: fine
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FINDING: non-mmx exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
