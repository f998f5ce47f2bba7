#include "chat/output_stream.h"

#include <algorithm>

namespace mmx::chat {

OutputStream::OutputStream(const tok::Tokenizer& tok, std::vector<std::string> stop,
                           std::optional<OutputParser> parser, size_t max_tool_calls)
    : detok_(tok, /*skip_special_tokens=*/false), stop_(std::move(stop)), parser_(std::move(parser)),
      max_tool_calls_(max_tool_calls) {}

ParsedDelta OutputStream::cap_calls(ParsedDelta d) {
  if (max_tool_calls_ == 0) return d;
  const size_t room = max_tool_calls_ - n_tool_calls_;
  if (d.tool_calls.size() >= room) {
    d.tool_calls.resize(room);
    stopped_ = capped_ = true;
  }
  n_tool_calls_ += d.tool_calls.size();
  std::erase_if(d.tool_call_deltas, [this](const ToolCallDelta& t) { return t.index >= max_tool_calls_; });
  return d;
}

ParsedDelta OutputStream::parse(const std::string& text) {
  if (parser_) return parser_->feed(text);
  ParsedDelta d;
  d.content = text;
  return d;
}

std::string OutputStream::cut_stop(std::string text) {
  if (stop_.empty()) return text;
  held_ += text;
  // The earliest stop string wins; everything from it on is dropped.
  size_t cut = std::string::npos;
  for (const std::string& s : stop_)
    if (const size_t at = held_.find(s); at < cut) cut = at, matched_stop_ = s;
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string. Its first byte is
  // the first byte of a (valid UTF-8) stop string, so the released part ends on a code point.
  size_t keep = 0;
  for (const std::string& s : stop_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

ParsedDelta OutputStream::push(int32_t id) {
  if (stopped_ || finished_) return {};
  return cap_calls(parse(cut_stop(detok_.push(id))));
}

ParsedDelta OutputStream::finish() {
  if (finished_) return {};
  ParsedDelta d;
  if (!stopped_) {
    d = parse(cut_stop(detok_.flush()));
    if (!stopped_) d.append(parse(held_));  // generation ended inside a stop-string prefix
    held_.clear();
  }
  if (parser_ && !capped_) d.append(parser_->finish());  // (capped: what is held is the block's rest)
  finished_ = true;
  return capped_ ? d : cap_calls(std::move(d));
}

}  // namespace mmx::chat
