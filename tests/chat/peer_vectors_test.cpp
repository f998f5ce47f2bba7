// The peers' own test vectors, run against our parser: the inputs and expected outputs of vLLM's
// and SGLang's MiniMax tool-call and reasoning parser tests (facts, re-typed here; no code taken).
// Each vector is parsed whole, cut at every split point, byte by byte, with empty deltas and in
// random chunks (parse_helpers.h), and every way must give the expected result.
//
// Sources (cited per vector as [tag]):
//   [vM2]  vllm-project/vllm tests/tool_parsers/test_minimax_m2_tool_parser.py
//   [vM3]  vllm-project/vllm tests/tool_parsers/test_minimax_m3_tool_parser.py
//   [vM1]  vllm-project/vllm tests/tool_parsers/test_minimax_tool_parser.py
//   [vM2r] vllm-project/vllm tests/reasoning/test_minimax_m2_reasoning_parser.py
//   [vM2a] vllm-project/vllm tests/reasoning/test_minimax_m2_append_reasoning_parser.py
//   [vM3r] vllm-project/vllm tests/reasoning/test_minimax_m3_reasoning_parser.py
//   [vM1r] vllm-project/vllm tests/reasoning/test_minimaxm1_reasoning_parser.py
//   [sM2]  sgl-project/sglang MinimaxM2Detector unit tests (class TestMinimaxM2Detector, tools
//          `bash` + `get_weather`, PR #23071 cases)
//   [sM2b] sgl-project/sglang MinimaxM2Detector bug tests (class TestMinimaxM2DetectorBugs, issue #16057)
//   [sR]   sgl-project/sglang test/registered/unit/parser/test_reasoning_parser.py (MiniMaxAppendThinkDetector;
//          "minimax" = Qwen3Detector with force_reasoning, its forced-reasoning vectors)
//
// Where we disagree with a peer and keep ours, the vector says so (KEPT: why). The policies behind
// the differences that recur:
//   (W) whitespace next to tool-call syntax is dropped (the templates put it there): vLLM keeps the
//       space in "Let me check. " before a block; we give "Let me check.";
//   (T) text is never dropped: a block that cannot be read is content, tags included (vLLM drops
//       the block start tag of a bad M3 block, or returns content None for an unreadable M1 block);
//   (S) stream == whole: one answer for a text however it is cut (vLLM's M1 reasoning parser gives
//       `<think>x` as content whole but as reasoning streamed; we give the streamed answer);
//   (R) one parser does reasoning and tools: a tool call inside `<think>` is reasoning text (vLLM's
//       tool parser, tested alone, leaves `<think>...</think>` in content and skips calls in it).
#include <nlohmann/json.hpp>

#include "parse_helpers.h"

namespace mmx::chat {
namespace {

using testing::parse_all_modes;
using testing::parse_cut;
constexpr auto kM2 = OutputFormat::kM2;
constexpr auto kM3 = OutputFormat::kM3;
constexpr auto kM1 = OutputFormat::kM1;
const std::string NS = "]<]minimax[>[";

struct Call {
  std::string name;
  std::string args;  // JSON, compared as parsed JSON (the peers compare json.loads results)
};

struct Expect {
  std::string content;
  std::string reasoning;
  std::vector<Call> calls;
};

// Runs `text` in every chunking and checks the result.
void check(const std::string& what, OutputFormat f, bool in_reasoning, const std::string& text,
           const nlohmann::json& tools, const Expect& e, ParserOptions opts = {}) {
  SCOPED_TRACE(what);
  const ParsedDelta d = parse_all_modes(f, text, in_reasoning, tools, opts);
  for (size_t cut = 1; cut < text.size(); ++cut)  // every split point
    testing::expect_same(d, parse_cut(f, text, {cut}, in_reasoning, tools, opts), "split at " + std::to_string(cut));
  EXPECT_EQ(d.content, e.content);
  EXPECT_EQ(d.reasoning, e.reasoning);
  ASSERT_EQ(d.tool_calls.size(), e.calls.size()) << testing::describe(d);
  for (size_t i = 0; i < e.calls.size(); ++i) {
    EXPECT_EQ(d.tool_calls[i].name, e.calls[i].name);
    EXPECT_EQ(nlohmann::json::parse(d.tool_calls[i].arguments_json), nlohmann::json::parse(e.calls[i].args))
        << d.tool_calls[i].arguments_json;
  }
}

// [{"type": "function", "function": {"name": N, "parameters": {"type": "object", "properties": P}}}]
nlohmann::json tools_of(std::initializer_list<std::pair<std::string, const char*>> defs) {
  nlohmann::json t = nlohmann::json::array();
  for (const auto& [name, props] : defs)
    t.push_back({{"type", "function"},
                 {"function",
                  {{"name", name},
                   {"parameters", {{"type", "object"}, {"properties", nlohmann::json::parse(props)}}}}}});
  return t;
}

const nlohmann::json kNoTools = nullptr;  // the peers' `request=None`: nothing to check names against

std::string m2(const std::string& invokes) { return "<minimax:tool_call>" + invokes + "</minimax:tool_call>"; }
std::string inv(const std::string& name, const std::string& params) {
  return "<invoke name=\"" + name + "\">" + params + "</invoke>";
}
std::string par(const std::string& k, const std::string& v) {
  return "<parameter name=\"" + k + "\">" + v + "</parameter>";
}

// ---------------------------------------------------------------- vLLM M2 tool parser [vM2]

TEST(PeerVectors, VllmM2ToolParser) {
  const auto seattle = m2(inv("get_weather", par("city", "Seattle")));
  check("[vM2] test_plain_content", kM2, false, "Hello world", kNoTools, {"Hello world", "", {}});
  // KEPT (W): vLLM's content is "Let me check. ".
  check("[vM2] test_content_before_tool_call", kM2, false, "Let me check. " + seattle, kNoTools,
        {"Let me check.", "", {{"get_weather", R"({"city": "Seattle"})"}}});
  check("[vM2] test_incremental_chunks / test_single_chunk_complete", kM2, false, seattle, kNoTools,
        {"", "", {{"get_weather", R"({"city": "Seattle"})"}}});
  // No tools in the request: an unknown parameter is a string ("5", not 5), as vLLM says.
  check("[vM2] test_multiple_params / test_header_and_params_in_separate_chunks", kM2, false,
        m2(inv("get_weather", par("city", "Seattle") + par("days", "5"))), kNoTools,
        {"", "", {{"get_weather", R"({"city": "Seattle", "days": "5"})"}}});
  check("[vM2] test_two_invokes_incremental", kM2, false,
        m2(inv("search_web", par("query", "OpenAI")) + inv("search_web", par("query", "Gemini"))), kNoTools,
        {"", "", {{"search_web", R"({"query": "OpenAI"})"}, {"search_web", R"({"query": "Gemini"})"}}});
  check("[vM2] test_two_invokes_in_single_delta", kM2, false,
        m2(inv("fn_a", par("x", "1")) + inv("fn_b", par("y", "2"))), kNoTools,
        {"", "", {{"fn_a", R"({"x": "1"})"}, {"fn_b", R"({"y": "2"})"}}});
  check("[vM2] test_different_functions", kM2, false,
        m2(inv("get_weather", par("city", "NYC")) + inv("get_stock", par("ticker", "AAPL"))), kNoTools,
        {"", "", {{"get_weather", R"({"city": "NYC"})"}, {"get_stock", R"({"ticker": "AAPL"})"}}});
  check("[vM2] test_prev_tool_call_arr_single", kM2, false, m2(inv("fn", par("a", "1"))), kNoTools,
        {"", "", {{"fn", R"({"a": "1"})"}}});
  check("[vM2] test_prev_tool_call_arr_multiple", kM2, false,
        m2(inv("search", par("q", "hello")) + inv("search", par("q", "world"))), kNoTools,
        {"", "", {{"search", R"({"q": "hello"})"}, {"search", R"({"q": "world"})"}}});
  check("[vM2] test_tool_call_fields", kM2, false, m2(inv("fn", par("k", "v"))), kNoTools,
        {"", "", {{"fn", R"({"k": "v"})"}}});
  check("[vM2] test_multi_invoke_indices", kM2, false, m2(inv("a", par("x", "1")) + inv("b", par("x", "2"))),
        kNoTools, {"", "", {{"a", R"({"x": "1"})"}, {"b", R"({"x": "2"})"}}});
  const auto profile = tools_of({{"update_profile", R"({"nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]}})"}});
  check("[vM2] test_anyof_nullable_param_non_null_value", kM2, false,
        m2(inv("update_profile", par("nickname", "Alice"))), profile,
        {"", "", {{"update_profile", R"({"nickname": "Alice"})"}}});
  check("[vM2] test_anyof_nullable_param_null_value", kM2, false,
        m2(inv("update_profile", par("nickname", "null"))), profile,
        {"", "", {{"update_profile", R"({"nickname": null})"}}});
  check("[vM2] test_anyof_nullable_param_object_value", kM2, false,
        m2(inv("update_settings", par("config", R"({"theme": "dark", "fontSize": 14})"))),
        tools_of({{"update_settings", R"({"config": {"anyOf": [{"type": "object"}, {"type": "null"}]}})"}}),
        {"", "", {{"update_settings", R"({"config": {"theme": "dark", "fontSize": 14}})"}}});
}

// ---------------------------------------------------------------- SGLang M2 detector [sM2] [sM2b]

TEST(PeerVectors, SglangM2Detector) {
  const auto tools = tools_of({{"bash", R"({"command": {"type": "string"}, "description": {"type": "string"}})"},
                               {"get_weather", R"({"city": {"type": "string"}, "unit": {"type": "string"}})"}});
  check("[sM2] test_non_streaming_single_call", kM2, false, m2(inv("bash", par("command", "ls -la"))), tools,
        {"", "", {{"bash", R"({"command": "ls -la"})"}}});
  const auto cat_run = m2(inv("bash", par("command", "cat | head -100") + par("description", "Run tests")));
  check("[sM2] test_streaming_one_chunk / split_at_param_boundaries / split_inside_param_value / "
        "no_double_emission_for_same_tool", kM2, false, cat_run, tools,
        {"", "", {{"bash", R"({"command": "cat | head -100", "description": "Run tests"})"}}});
  check("[sM2] test_non_streaming_multiple_params", kM2, false,
        m2(inv("bash", par("command", "cat foo") + par("description", "read file"))), tools,
        {"", "", {{"bash", R"({"command": "cat foo", "description": "read file"})"}}});
  check("[sM2] test_streaming_char_by_char / partial_start_token_held", kM2, false,
        m2(inv("bash", par("command", "ls"))), tools, {"", "", {{"bash", R"({"command": "ls"})"}}});
  check("[sM2] test_streaming_two_parallel_tool_calls", kM2, false,
        m2(inv("bash", par("command", "A"))) + m2(inv("bash", par("command", "B"))), tools,
        {"", "", {{"bash", R"({"command": "A"})"}, {"bash", R"({"command": "B"})"}}});
  // KEPT (W): SGLang's normal text is "Sure, running it now. ".
  check("[sM2] test_streaming_normal_text_then_tool", kM2, false,
        "Sure, running it now. " + m2(inv("bash", par("command", "ls"))), tools,
        {"Sure, running it now.", "", {{"bash", R"({"command": "ls"})"}}});
  // A call to a function the request does not list is dropped (ParserOptions), nothing is content.
  check("[sM2] test_streaming_invalid_tool_name_dropped", kM2, false,
        m2(inv("not_a_real_tool", par("x", "y"))), tools, {"", "", {}});
  check("[sM2] test_streaming_two_invokes_in_one_wrapper", kM2, false,
        m2(inv("bash", par("command", "FIRST")) + inv("bash", par("command", "SECOND") + par("description", "D"))),
        tools, {"", "", {{"bash", R"({"command": "FIRST"})"}, {"bash", R"({"command": "SECOND", "description": "D"})"}}});
  check("[sM2] test_streaming_two_separate_wrappers_distinct_params", kM2, false,
        m2(inv("bash", par("command", "FIRST"))) + m2(inv("bash", par("command", "SECOND") + par("description", "D"))),
        tools, {"", "", {{"bash", R"({"command": "FIRST"})"}, {"bash", R"({"command": "SECOND", "description": "D"})"}}});
  check("[sM2] test_streaming_invalid_invoke_does_not_drop_following_valid_invoke", kM2, false,
        m2(inv("bogus", par("x", "y"))) + m2(inv("bash", par("command", "VALID"))), tools,
        {"", "", {{"bash", R"({"command": "VALID"})"}}});
  check("[sM2] test_streaming_invoke_with_no_parameters", kM2, false, m2(inv("bash", "")), tools,
        {"", "", {{"bash", "{}"}}});
  // KEPT: SGLang keeps the first of a repeated parameter ({"command": "FIRST"}). We write both where
  // they occur, {"command": "FIRST", "command": "SECOND"}: each was streamed when it closed, and a
  // JSON reader keeps the last, as vLLM's dict does. (Compared here as parsed JSON: the last wins.)
  check("[sM2] test_streaming_duplicate_parameter_keeps_first", kM2, false,
        m2(inv("bash", par("command", "FIRST") + par("command", "SECOND"))), tools,
        {"", "", {{"bash", R"({"command": "SECOND"})"}}});
  check("[sM2] test_streaming_multi_param_types", kM2, false,
        m2(inv("set_config", par("count", "3") + par("ratio", "0.5") + par("enabled", "true"))),
        tools_of({{"set_config", R"({"count": {"type": "integer"}, "ratio": {"type": "number"}, "enabled": {"type": "boolean"}})"}}),
        {"", "", {{"set_config", R"({"count": 3, "ratio": 0.5, "enabled": true})"}}});

  const auto union_tool = tools_of({{"the_tool", R"({"args": {"anyOf": [{"type": "string"}, {"type": "null"}]}})"}});
  check("[sM2b] test_anyof_with_null_should_preserve_string_value", kM2, false,
        m2(inv("the_tool", par("args", "hi"))), union_tool, {"", "", {{"the_tool", R"({"args": "hi"})"}}});
  check("[sM2b] test_anyof_with_null_should_allow_explicit_null", kM2, false,
        m2(inv("the_tool", par("args", "null"))), union_tool, {"", "", {{"the_tool", R"({"args": null})"}}});
  const auto ctx = tools_of({{"context_info", R"({"metadata_only": {"type": "boolean"}})"}});
  // The block never closes: the call is read as if it did (vLLM too); nothing of it is content.
  check("[sM2b] test_incomplete_tool_call_should_not_leak_to_normal_text", kM2, false,
        "[Pasted ~4 lines]<minimax:tool_call>" + inv("context_info", par("metadata_only", "false")), ctx,
        {"[Pasted ~4 lines]", "", {{"context_info", R"({"metadata_only": false})"}}});
  check("[sM2b] test_complete_tool_call_should_not_leak_end_marker", kM2, false,
        "Here is some text." + m2(inv("context_info", par("metadata_only", "true"))) + "More text after.", ctx,
        {"Here is some text.More text after.", "", {{"context_info", R"({"metadata_only": true})"}}});
  // KEPT: SGLang would like "This text contains </parameter> in it" (its test asserts only if it
  // parses a call). A value runs to the first </parameter> (vLLM's regex, and what the model means
  // by the tag); the rest of the invoke cannot be read, so it is content and the call closes.
  check("[sM2b] test_parameter_value_with_closing_tag_substring", kM2, false,
        m2(inv("test_func", par("content", "This text contains </parameter> in it"))),
        tools_of({{"test_func", R"({"content": {"type": "string"}})"}}),
        {"in it</parameter></invoke>", "", {{"test_func", R"({"content": "This text contains"})"}}});
  check("[sM2b] test_parameter_value_with_xml_content", kM2, false,
        m2(inv("process_html", par("html", "<div>Hello</div>"))),
        tools_of({{"process_html", R"({"html": {"type": "string"}})"}}),
        {"", "", {{"process_html", R"({"html": "<div>Hello</div>"})"}}});
  // The stream ends inside the invoke: the call with its closed parameter stands (SGLang asserts
  // only that no tag leaks into the text).
  check("[sM2b] test_streaming_incomplete_tool_call_should_buffer", kM2, false,
        "Normal text before<minimax:tool_call>" + std::string("<invoke name=\"context_info\">") +
            par("metadata_only", "false"),
        ctx, {"Normal text before", "", {{"context_info", R"({"metadata_only": false})"}}});
  check("[sM2b] test_streaming_complete_tool_call_emits_properly", kM2, false,
        "Text before " + m2(inv("context_info", par("metadata_only", "true"))) + " Text after", ctx,
        {"Text before Text after", "", {{"context_info", R"({"metadata_only": true})"}}});
  check("[sM2b] test_complex_anyof_with_object_and_null", kM2, false,
        m2(inv("complex_func", par("data", R"({"key": "value"})"))),
        tools_of({{"complex_func", R"({"data": {"anyOf": [{"type": "object", "properties": {"key": {"type": "string"}}}, {"type": "null"}]}})"}}),
        {"", "", {{"complex_func", R"({"data": {"key": "value"}})"}}});
  check("[sM2b] test_array_type_in_parameters", kM2, false,
        m2(inv("array_func", par("items", R"([1, 2, 3, "four"])"))),
        tools_of({{"array_func", R"({"items": {"type": "array"}})"}}),
        {"", "", {{"array_func", R"({"items": [1, 2, 3, "four"]})"}}});
}

// ---------------------------------------------------------------- vLLM M2 reasoning [vM2r] [vM2a]

TEST(PeerVectors, VllmM2Reasoning) {
  // The M2 prompt opens the reasoning (starts_in_reasoning): the model writes only </think>.
  check("[vM2r] SIMPLE_REASONING", kM2, true, "This is a reasoning section</think>This is the rest", kNoTools,
        {"This is the rest", "This is a reasoning section", {}});
  check("[vM2r] COMPLETE_REASONING", kM2, true, "This is a reasoning section</think>", kNoTools,
        {"", "This is a reasoning section", {}});
  check("[vM2r] NO_END_TOKEN", kM2, true, "This is reasoning in progress", kNoTools,
        {"", "This is reasoning in progress", {}});
  check("[vM2r] MULTIPLE_LINES", kM2, true, "First line\nSecond line</think>Response first line\nResponse second",
        kNoTools, {"Response first line\nResponse second", "First line\nSecond line", {}});
  check("[vM2r] SHORTEST_REASONING", kM2, true, "</think>This is the response", kNoTools,
        {"This is the response", "", {}});
  check("[vM2r] EMPTY", kM2, true, "", kNoTools, {"", "", {}});
  check("[vM2r] SPECIAL_CHARS", kM2, true, "Let me think... 1+1=2, right?</think>Yes, 1+1=2.", kNoTools,
        {"Yes, 1+1=2.", "Let me think... 1+1=2, right?", {}});
  check("[vM2r] CODE_IN_REASONING", kM2, true, "```python\nprint('hello')\n```</think>Here is the code.", kNoTools,
        {"Here is the code.", "```python\nprint('hello')\n```", {}});
  check("[vM2r] DOUBLE_END_TOKEN", kM2, true, "reasoning</think>content A</think>content B", kNoTools,
        {"content Acontent B", "reasoning", {}});

  const auto a = OutputFormat::kM2AppendThink;
  check("[vM2a] SIMPLE_OUTPUT", a, true, "This is reasoning</think>This is response", kNoTools,
        {"<think>This is reasoning</think>This is response", "", {}});
  check("[vM2a] NO_END_TOKEN", a, true, "This is reasoning in progress", kNoTools,
        {"<think>This is reasoning in progress", "", {}});
  check("[vM2a] ONLY_END_TOKEN", a, true, "</think>This is response", kNoTools,
        {"<think></think>This is response", "", {}});
  check("[vM2a] MULTIPLE_LINES", a, true, "Line 1\nLine 2</think>Response 1\nResponse 2", kNoTools,
        {"<think>Line 1\nLine 2</think>Response 1\nResponse 2", "", {}});
  // KEPT (S): vLLM gives "<think>" whole and nothing streamed; we give "<think>" both ways.
  check("[vM2a] EMPTY", a, true, "", kNoTools, {"<think>", "", {}});
  check("[vM2a] SPECIAL_CHARS", a, true, "Let me think... 1+1=2</think>Yes!", kNoTools,
        {"<think>Let me think... 1+1=2</think>Yes!", "", {}});
  check("[vM2a] CODE_OUTPUT", a, true, "```python\nprint('hi')\n```</think>Here's the code.", kNoTools,
        {"<think>```python\nprint('hi')\n```</think>Here's the code.", "", {}});
}

// ---------------------------------------------------------------- SGLang reasoning [sR]

TEST(PeerVectors, SglangReasoning) {
  const auto a = OutputFormat::kM2AppendThink;
  check("[sR] test_detect_and_parse_prepends_think", a, true, "Hello world", kNoTools, {"<think>Hello world", "", {}});
  check("[sR] test_streaming_first_chunk_prepends_think / second_chunk_no_prepend", a, true, "First chunkSecond",
        kNoTools, {"<think>First chunkSecond", "", {}});
  // SGLang's "minimax" reasoning parser is Qwen3Detector with force_reasoning (test_minimax_forces_reasoning).
  check("[sR] test_detect_and_parse_qwen3_forced_reasoning_format", kM2, true,
        "I need to think about this step by step.</think>The answer is 42.", kNoTools,
        {"The answer is 42.", "I need to think about this step by step.", {}});
  check("[sR] test_detect_and_parse_with_start_token (forced)", kM2, true,
        "<think>I need to think about this.</think>The answer is 42.", kNoTools,
        {"The answer is 42.", "I need to think about this.", {}});
  check("[sR] test_streaming_qwen3_forced_reasoning_format", kM2, true,
        "I need to think about this.</think>The answer is 42.", kNoTools,
        {"The answer is 42.", "I need to think about this.", {}});
}

// ---------------------------------------------------------------- vLLM M3 reasoning [vM3r]

TEST(PeerVectors, VllmM3Reasoning) {
  check("[vM3r] explicit_reasoning_block / tags_are_not_returned / boundary", kM3, false,
        "<mm:think>plan</mm:think>answer", kNoTools, {"answer", "plan", {}});
  check("[vM3r] without_start_tag_is_content / plain_content", kM3, false, "plain answer", kNoTools,
        {"plain answer", "", {}});
  check("[vM3r] drops_leading_end_tag", kM3, false, "</mm:think>answer", kNoTools, {"answer", "", {}});
  check("[vM3r] non_leading_end_tag_is_content", kM3, false, "XXX</mm:think>YYY", kNoTools,
        {"XXX</mm:think>YYY", "", {}});
  check("[vM3r] enabled_mode_starts_in_reasoning", kM3, true, "plan</mm:think>answer", kNoTools,
        {"answer", "plan", {}});
  check("[vM3r] open_reasoning_block", kM3, false, "<mm:think>still thinking", kNoTools,
        {"", "still thinking", {}});
  check("[vM3r] split_marker_tokens / split_marker_text_across_deltas", kM3, false,
        "<mm:think>Reasoning content</mm:think>content", kNoTools, {"content", "Reasoning content", {}});
  check("[vM3r] split_marker_tokens_enabled_mode", kM3, true, "Reasoning content</mm:think>content", kNoTools,
        {"content", "Reasoning content", {}});
}

// ---------------------------------------------------------------- vLLM M1 reasoning [vM1r]

TEST(PeerVectors, VllmM1Reasoning) {
  check("[vM1r] WITH_THINK", kM1, false, "<think>\nThis is a reasoning section\n</think>\nThis is the rest", kNoTools,
        {"This is the rest", "This is a reasoning section", {}});
  check("[vM1r] WITHOUT_THINK", kM1, false, "This is the rest", kNoTools, {"This is the rest", "", {}});
  check("[vM1r] COMPLETE_REASONING", kM1, false, "<think>\nThis is a reasoning section\n</think>\n", kNoTools,
        {"", "This is a reasoning section", {}});
  check("[vM1r] MULTILINE_REASONING", kM1, false,
        "<think>\nThis is a reasoning\nsection\n</think>\nThis is the rest\nThat", kNoTools,
        {"This is the rest\nThat", "This is a reasoning\nsection", {}});
  // KEPT (S): ONLY_OPEN_TAG gives the text as content whole, as reasoning streamed: we follow the
  // streamed vector (ONLY_OPEN_TAG_STREAM).
  check("[vM1r] ONLY_OPEN_TAG_STREAM", kM1, false, "<think>\nThis is a reasoning section", kNoTools,
        {"", "This is a reasoning section", {}});
  check("[vM1r] PERIOD", kM1, false,
        "<think>\nHTML\xE6\x8D\xA2\xE8\xA1\x8C\xE5\x8F\xAF\xE4\xBB\xA5\xE7\x94\xA8<br>\xE3\x80\x82\n</think>\nHTML\xE7\x94\xA8<br>\xE6\x8D\xA2\xE8\xA1\x8C",
        kNoTools,
        {"HTML\xE7\x94\xA8<br>\xE6\x8D\xA2\xE8\xA1\x8C",
         "HTML\xE6\x8D\xA2\xE8\xA1\x8C\xE5\x8F\xAF\xE4\xBB\xA5\xE7\x94\xA8<br>\xE3\x80\x82", {}});
}

// ---------------------------------------------------------------- vLLM M1 tool parser [vM1]

TEST(PeerVectors, VllmM1ToolParser) {
  const std::string dallas = R"({"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}})";
  const std::string dallas_args = R"({"city": "Dallas", "state": "TX", "unit": "fahrenheit"})";
  check("[vM1] test_extract_tool_calls_no_tools", kM1, false, "This is a test", kNoTools, {"This is a test", "", {}});
  check("[vM1] single_tool_call", kM1, false, "<tool_calls>\n" + dallas + "\n</tool_calls>", kNoTools,
        {"", "", {{"get_current_weather", dallas_args}}});
  check("[vM1] multiple_tool_calls", kM1, false,
        "<tool_calls>\n" + dallas + "\n" +
            R"({"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}})" +
            "\n</tool_calls>",
        kNoTools,
        {"", "", {{"get_current_weather", dallas_args},
                  {"get_current_weather", R"({"city": "Orlando", "state": "FL", "unit": "fahrenheit"})"}}});
  check("[vM1] tool_call_with_content_before", kM1, false,
        "I'll help you check the weather. <tool_calls>\n" +
            std::string(R"({"name": "get_current_weather", "arguments": {"city": "Seattle", "state": "WA", "unit": "celsius"}})") +
            "\n</tool_calls>",
        kNoTools,
        {"I'll help you check the weather.", "", {{"get_current_weather", R"({"city": "Seattle", "state": "WA", "unit": "celsius"})"}}});
  check("[vM1] tool_call_incomplete_tag", kM1, false,
        "<tool_calls>\n" + std::string(R"({"name": "get_current_weather", "arguments": {"city": "Boston", "state": "MA"}})"),
        kNoTools, {"", "", {{"get_current_weather", R"({"city": "Boston", "state": "MA"})"}}});
  // KEPT (R): vLLM's tool parser alone returns the <think> part as content.
  check("[vM1] test_extract_tool_calls_with_thinking_tags", kM1, false,
        "<think>I should use a tool. <tool_calls>\n" +
            std::string(R"({"name": "ignored_tool", "arguments": {"should": "ignore"}})") +
            "\n</tool_calls></think>\n\nLet me help you with the weather. <tool_calls>\n" +
            R"({"name": "get_current_weather", "arguments": {"city": "Miami", "state": "FL", "unit": "fahrenheit"}})" +
            "\n</tool_calls>",
        kNoTools,
        {"Let me help you with the weather.",
         "I should use a tool. <tool_calls>\n" + std::string(R"({"name": "ignored_tool", "arguments": {"should": "ignore"}})") +
             "\n</tool_calls>",
         {{"get_current_weather", R"({"city": "Miami", "state": "FL", "unit": "fahrenheit"})"}}});
  // Each line is independent: the calls after a bad line stand. KEPT (T): vLLM drops the bad line;
  // we return it as content.
  check("[vM1] test_extract_tool_calls_invalid_json", kM1, false,
        "<tool_calls>\n" + std::string(R"({"name": "valid_tool", "arguments": {"city": "Seattle"}})") +
            "\n{invalid json here}\n" + R"({"name": "another_valid_tool", "arguments": {"param": "value"}})" +
            "\n</tool_calls>",
        kNoTools,
        {"{invalid json here}", "", {{"valid_tool", R"({"city": "Seattle"})"}, {"another_valid_tool", R"({"param": "value"})"}}});
  // KEPT (T): the two lines that are not calls are content (vLLM drops them).
  check("[vM1] test_extract_tool_calls_missing_name_or_arguments", kM1, false,
        "<tool_calls>\n" + std::string(R"({"name": "valid_tool", "arguments": {"city": "Seattle"}})") + "\n" +
            R"({"name": "missing_args"})" + "\n" + R"({"arguments": {"city": "Portland"}})" + "\n" +
            R"({"name": "another_valid_tool", "arguments": {"param": "value"}})" + "\n</tool_calls>",
        kNoTools,
        {std::string(R"({"name": "missing_args"})") + "\n" + R"({"arguments": {"city": "Portland"}})", "",
         {{"valid_tool", R"({"city": "Seattle"})"}, {"another_valid_tool", R"({"param": "value"})"}}});
  // KEPT (T): no line is a call, so the block is content as written (vLLM: content None).
  const std::string multiline =
      "<tool_calls>\n{\n  \"name\": \"get_current_weather\",\n  \"arguments\": {\n    \"city\": \"New York\",\n"
      "    \"state\": \"NY\",\n    \"unit\": \"celsius\"\n  }\n}\n</tool_calls>";
  check("[vM1] test_extract_tool_calls_multiline_json_not_supported", kM1, false, multiline, kNoTools,
        {multiline, "", {}});
  // KEPT (R): vLLM's tool parser alone keeps <think>...</think> in the content.
  check("[vM1] test_streaming_with_thinking_tags", kM1, false,
        R"(<think><tool_calls>{"name": "ignored", "arguments": {}}</tool_calls></think><tool_calls>{"name": "real_tool", "arguments": {"param": "value"}}</tool_calls>)",
        kNoTools,
        {"", R"(<tool_calls>{"name": "ignored", "arguments": {}}</tool_calls>)", {{"real_tool", R"({"param": "value"})"}}});
  const std::string weather = R"({"name": "get_current_weather", "arguments": {"city": "Seattle", "state": "WA", "unit": "celsius"}})";
  const std::string area = R"({"name": "calculate_area", "arguments": {"shape": "rectangle", "dimensions": {"width": 10, "height": 5}}})";
  // KEPT (R): vLLM's tool parser alone keeps <think>...</think> in the content.
  check("[vM1] test_streaming_complex_scenario_with_multiple_tools", kM1, false,
        "Let me help you with this task.<think>I need to analyze this situation first.<tool_calls>\n" +
            std::string(R"({"name": "internal_analysis", "arguments": {"query": "analyze situation"}})") +
            "\n</tool_calls></think>\nNow I need to get weather information and calculate area.<tool_calls>\n" + weather +
            "\n" + area + "</tool_calls>",
        kNoTools,
        {"Let me help you with this task.Now I need to get weather information and calculate area.",
         "I need to analyze this situation first.<tool_calls>\n" +
             std::string(R"({"name": "internal_analysis", "arguments": {"query": "analyze situation"}})") + "\n</tool_calls>",
         {{"get_current_weather", R"({"city": "Seattle", "state": "WA", "unit": "celsius"})"},
          {"calculate_area", R"({"shape": "rectangle", "dimensions": {"width": 10, "height": 5}})"}}});
  // KEPT (R): vLLM's tool parser alone keeps <think>...</think> in the content.
  check("[vM1] test_streaming_character_by_character_output", kM1, false,
        "I'll help you with the weather analysis. <think>Let me think about this. <tool_calls>\n" +
            std::string(R"({"name": "internal_analysis", "arguments": {"type": "thinking"}})") +
            "\n</tool_calls>This tool should be ignored.</think>\n\nNow I'll get the weather information for you. "
            "<tool_calls>\n" + weather + "\n" + area + "\n</tool_calls>Here are the results.",
        kNoTools,
        {"I'll help you with the weather analysis. Now I'll get the weather information for you.Here are the results.",
         "Let me think about this. <tool_calls>\n" +
             std::string(R"({"name": "internal_analysis", "arguments": {"type": "thinking"}})") +
             "\n</tool_calls>This tool should be ignored.",
         {{"get_current_weather", R"({"city": "Seattle", "state": "WA", "unit": "celsius"})"},
          {"calculate_area", R"({"shape": "rectangle", "dimensions": {"width": 10, "height": 5}})"}}});
}

// ---------------------------------------------------------------- vLLM M3 tool parser [vM3]

TEST(PeerVectors, VllmM3ToolParser) {
  const auto tools = tools_of({{"create_order", R"({
      "user_id": {"type": "integer"}, "urgent": {"type": "boolean"}, "note": {"type": "string"},
      "shipping": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}},
      "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}},
      "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
      "duplicate_demo": {"type": "object"}})"}});
  auto tag = [](const std::string& k, const std::string& v) { return NS + "<" + k + ">" + v + NS + "</" + k + ">"; };
  const std::string order =
      NS + "<tool_call>\n" + NS + "<invoke name=\"create_order\">" + tag("user_id", "42") + tag("urgent", "true") +
      tag("note", "Please leave at front desk.") + tag("shipping", tag("city", "Singapore") + tag("zip", "018956")) +
      tag("items", tag("item", tag("sku", "book-001") + tag("qty", "2")) + tag("item", tag("sku", "pen-007") + tag("qty", "5"))) +
      tag("metadata", tag("source", "mobile") + tag("campaign", "may-launch")) +
      tag("duplicate_demo", tag("tag", "a") + tag("tag", "b")) + NS + "</invoke>\n" + NS + "</tool_call>";
  const std::string order_args = R"({"user_id": 42, "urgent": true, "note": "Please leave at front desk.",
      "shipping": {"city": "Singapore", "zip": 18956},
      "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
      "metadata": {"source": "mobile", "campaign": "may-launch"}, "duplicate_demo": {"tag": ["a", "b"]}})";
  // KEPT (W): vLLM's content is "I will create it.\n".
  check("[vM3] test_non_streaming_nested_tool_call / test_streaming_nested_tool_call", kM3, false,
        "I will create it.\n" + order, tools, {"I will create it.", "", {{"create_order", order_args}}});
  check("[vM3] test_non_streaming_without_tool_call_keeps_content", kM3, false, "plain response", tools,
        {"plain response", "", {}});
  auto order_inv = [&](int id) {
    return NS + "<invoke name=\"create_order\">" + tag("user_id", std::to_string(id)) + NS + "</invoke>";
  };
  check("[vM3] test_non_streaming_multiple_tool_calls", kM3, false,
        NS + "<tool_call>\n" + order_inv(1) + "\n" + order_inv(2) + "\n" + NS + "</tool_call>", tools,
        {"", "", {{"create_order", R"({"user_id": 1})"}, {"create_order", R"({"user_id": 2})"}}});
  check("[vM3] test_streaming_flushes_partial_tool_start_as_text", kM3, false, "plain " + NS + "<tool_ca", tools,
        {"plain " + NS + "<tool_ca", "", {}});
  // The second invoke is cut off before any of its parameters closed: it is content, not a call.
  // KEPT (W): vLLM's content keeps the space of "plain ".
  const std::string second = "\n" + NS + "<invoke name=\"create_order\">" + NS + "<user_id>2";
  check("[vM3] test_streaming_error_recovery_keeps_committed_tool_call_structured", kM3, false,
        "plain " + NS + "<tool_call>\n" + order_inv(1) + second, tools,
        {"plain" + second, "", {{"create_order", R"({"user_id": 1})"}}});
  // KEPT (T): vLLM's content is "\nNS</user_id> after error" (it drops the block's start tag).
  check("[vM3] test_streaming_parse_error_emits_buffer_and_later_deltas", kM3, false,
        NS + "<tool_call>\n" + NS + "</user_id> after error", tools,
        {NS + "<tool_call>\n" + NS + "</user_id> after error", "", {}});
}

}  // namespace
}  // namespace mmx::chat
