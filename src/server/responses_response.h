// OpenAI Responses API response shapes: the response object and its streamed events, from the
// parsed deltas the route feeds in (responses_route.cpp). The whole response and the stream come
// from the same builder, so they cannot disagree: a non-streaming request feeds every delta and
// drops the event text.
//
//   response  {id: "resp_…", object: "response", created_at, status, error, incomplete_details,
//              model, output: [reasoning?, message?, function_call*] in the order they were
//              written, usage, the request fields it repeats (instructions, tools, tool_choice,
//              parallel_tool_calls, temperature, top_p, max_output_tokens, previous_response_id,
//              store, text, reasoning, truncation, metadata, ...), mmx_ignored_tools when some
//              tools were not offered to the model}
//   items     reasoning {id: "rs_…", summary: [summary_text]? , content: [reasoning_text]}
//               (the model's whole reasoning; as its summary too when reasoning.summary was asked)
//             message {id: "msg_…", role: assistant, status, content: [output_text + annotations]}
//             function_call {id: "fc_…", call_id, name, namespace?, arguments, status}
//   stream    "event: TYPE\ndata: {type, sequence_number, ...}\n\n": response.created,
//             response.in_progress, per item output_item.added … output_item.done (reasoning:
//             reasoning_summary_part.added / reasoning_summary_text.delta / .done / part.done
//             when summarized, reasoning_text.delta / .done; message: content_part.added,
//             output_text.delta / .done, content_part.done; function_call:
//             function_call_arguments.delta / .done), then response.completed or
//             response.incomplete, or response.failed for an error mid-stream.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "chat/output_parser.h"
#include "server/api_error.h"

namespace mmx::server {

struct ResponseUsage {
  int64_t input = 0, cached = 0, output = 0, reasoning = 0;  // input counts every prompt token
};

struct ResponseSetup {
  std::string id, model;                 // id: "resp_…"; its items are rs_/msg_/fc_ + the same suffix
  int64_t created_at = 0;
  bool summary = false;                  // reasoning.summary asked
  std::map<std::string, std::pair<std::string, std::string>> namespaced;  // flat name -> {namespace, name}
  nlohmann::ordered_json fields;         // the repeated request fields, in the response's order
};

class ResponseEvents {
 public:
  using ojson = nlohmann::ordered_json;
  explicit ResponseEvents(ResponseSetup setup) : s_(std::move(setup)) {}

  std::string start();                            // response.created, response.in_progress
  std::string delta(const chat::ParsedDelta& d);  // reasoning, then text, then tool-call pieces
  // finish_reason (generation.h): "length" ends it incomplete (max_output_tokens).
  std::string finish(const std::string& finish_reason, const ResponseUsage& usage);
  std::string fail(const ApiError& e);           // response.failed (the stream then ends)

  // The response object now (in_progress until finish/fail).
  ojson response() const;
  const ojson& output() const { return output_; }

 private:
  enum class Kind { kNone, kReasoning, kMessage, kCall };
  std::string event(const char* type, ojson data);
  std::string open(Kind kind, ojson item);
  std::string close(const char* status);
  std::string item_id(const char* prefix) const;

  ResponseSetup s_;
  int64_t seq_ = 0;
  std::string status_ = "in_progress";
  ojson incomplete_details_ = nullptr, error_ = nullptr, usage_ = nullptr;
  ojson output_ = ojson::array();
  Kind open_ = Kind::kNone;
  std::string text_;      // the open item's text (reasoning, output text, arguments)
  size_t call_ = 0;       // the parser's index of the open function_call
  int n_calls_ = 0;
};

// "event: TYPE\ndata: {json}\n\n" (never throws: invalid UTF-8 is replaced).
std::string responses_sse(const std::string& type, const nlohmann::ordered_json& data);

}  // namespace mmx::server
