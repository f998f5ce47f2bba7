#include "chat/text_shield.h"

#include <algorithm>

namespace mmx::chat {

namespace {
void append(std::vector<int32_t>& a, const std::vector<int32_t>& b) { a.insert(a.end(), b.begin(), b.end()); }
}  // namespace

void TextShield::shield(ojson& v, const std::vector<std::string>& keep) {
  if (v.is_string()) v = shield_string(v.get<std::string>(), keep);
  else if (v.is_array() || v.is_object())
    for (auto& x : v) shield(x, keep);
}

void TextShield::shield_messages(ojson& messages) {
  for (ojson& msg : messages) {
    const bool assistant = msg.contains("role") && msg["role"] == "assistant";
    shield(msg, assistant ? model_tags_ : std::vector<std::string>{});
  }
}

std::vector<int32_t> TextShield::encode(const std::string& text) const {
  if (originals_.empty()) return tk_.encode(text, false);
  std::vector<int32_t> ids;
  size_t from = 0;
  for (size_t at = text.find(kOpen); at != std::string::npos; at = text.find(kOpen, at + 1)) {
    size_t k = at + kOpen.size(), idx = 0;
    const size_t digits = k;
    while (k < text.size() && text[k] >= '0' && text[k] <= '9' && k - digits < 9) idx = idx * 10 + size_t(text[k++] - '0');
    if (k == digits || text.compare(k, kClose.size(), kClose) != 0 || idx >= originals_.size()) continue;
    append(ids, tk_.encode(std::string_view(text).substr(from, at - from), false));
    append(ids, tk_.encode_as_text(originals_[idx]));
    from = k + kClose.size();
    at = from - 1;
  }
  append(ids, tk_.encode(std::string_view(text).substr(from), false));
  return ids;
}

std::string TextShield::shield_string(const std::string& s, const std::vector<std::string>& keep) {
  std::vector<std::pair<size_t, size_t>> spans = tk_.added_token_spans(s);
  for (size_t at = s.find(kOpen); at != std::string::npos; at = s.find(kOpen, at + 1)) spans.emplace_back(at, at + kOpen.size());
  if (spans.empty()) return s;
  std::sort(spans.begin(), spans.end());
  std::string out;
  size_t from = 0;
  for (const auto& [b, e] : spans) {
    if (b < from) continue;  // overlaps the previous span
    const std::string piece = s.substr(b, e - b);
    if (std::find(keep.begin(), keep.end(), piece) != keep.end()) continue;
    out.append(s, from, b - from);
    out += std::string(kOpen) + std::to_string(originals_.size()) + std::string(kClose);
    originals_.push_back(piece);
    from = e;
  }
  out.append(s, from, std::string::npos);
  return out;
}

}  // namespace mmx::chat
