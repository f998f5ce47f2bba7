// TextShield: client-supplied strings are text, never special tokens (hardening issue, finding 8).
//
// Each added-token match in a shielded string (and each U+E000, so no string can forge a
// placeholder) is replaced, before rendering, by the placeholder U+E000 <i> U+E001 for
// originals[i]; after rendering, encode() encodes placeholders as text and the rest normally. No
// match anywhere (the usual case): the prompt is encoded whole, exactly as without the shield. A
// template that escapes non-ASCII inside tojson (ensure_ascii) would show the placeholder's
// escape instead — still text, never a special token. Used by build_chat_prompt (prompt.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/conversation.h"
#include "tokenizer/tokenizer.h"

namespace mmx::chat {

class TextShield {
 public:
  // model_tags: the markers the model writes itself; they stay special in assistant turns only.
  TextShield(const tok::Tokenizer& tk, std::vector<std::string> model_tags) : tk_(tk), model_tags_(std::move(model_tags)) {}

  // Every string in v; the added-token strings in `keep` are left as they are.
  void shield(ojson& v, const std::vector<std::string>& keep = {});
  // Every message; an assistant message keeps the model tags.
  void shield_messages(ojson& messages);
  // The rendered prompt -> ids: placeholders as their originals' text, the rest with special tokens.
  std::vector<int32_t> encode(const std::string& text) const;

 private:
  static constexpr std::string_view kOpen = "\xEE\x80\x80", kClose = "\xEE\x80\x81";  // U+E000, U+E001
  std::string shield_string(const std::string& s, const std::vector<std::string>& keep);

  const tok::Tokenizer& tk_;
  std::vector<std::string> model_tags_;
  std::vector<std::string> originals_;
};

}  // namespace mmx::chat
