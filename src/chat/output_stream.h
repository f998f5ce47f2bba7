// OutputStream: one choice's generated ids -> what the reader sees (data-flow steps 9-10): the
// server's client, `mmx chat`'s terminal, an RL rollout.
//
//   id -> Detokenizer (special tokens kept, so the tags reach the parser)
//      -> stop strings (matched on the raw text; the stop string and all after it dropped;
//         text that may be the start of a stop string is held back until decided)
//      -> OutputParser (reasoning / content / tool calls), or plain text for /v1/completions
//      -> at most max_tool_calls calls (0 = any number): the call that reaches the cap ends the
//         output as a stop string does (stopped()); pieces of a later call are never released, and
//         neither is the rest of the tool-call block (its closing tag, the next call's start)
//
// Not thread-safe: one per choice, used by the thread that reads the choice (in the server, the
// HTTP thread that owns the request). A chat turn's streams come from PreparedTurn (turn.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/output_parser.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mmx::chat {

class OutputStream {
 public:
  // parser: std::nullopt = plain text (completions); the parsed parts come back as content.
  OutputStream(const tok::Tokenizer& tok, std::vector<std::string> stop,
               std::optional<OutputParser> parser, size_t max_tool_calls = 0);

  // One generated id -> the newly decided parts (often empty). After a stop string was seen
  // further ids are ignored and stopped() is true.
  ParsedDelta push(int32_t id);
  // End of generation (engine done, or stopped): releases everything held back.
  ParsedDelta finish();
  bool stopped() const { return stopped_; }
  // The stop string that ended the output ("" if none did).
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  ParsedDelta parse(const std::string& text);
  std::string cut_stop(std::string text);  // text newly decoded -> text safe to release
  ParsedDelta cap_calls(ParsedDelta d);     // max_tool_calls_: the calls past it dropped, the cap stops

  tok::Detokenizer detok_;
  std::vector<std::string> stop_;
  std::optional<OutputParser> parser_;
  std::string held_;  // raw text that may begin a stop string
  bool stopped_ = false;
  std::string matched_stop_;
  bool finished_ = false;
  size_t max_tool_calls_ = 0, n_tool_calls_ = 0;
  bool capped_ = false;  // stopped by max_tool_calls_
};

}  // namespace mmx::chat
