// Incremental detokenizer (see detokenizer.h).
#include "tokenizer/detokenizer.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

Detokenizer::Detokenizer(const Tokenizer& tok, bool skip_special_tokens) : tok_(&tok), skip_special_(skip_special_tokens) {}

std::string Detokenizer::push(int32_t id) {
  if (!tok_->token_string(id, scratch_)) return {};
  if (skip_special_ && tok_->is_special(id)) return {};
  if (!tok_->decoder_is_byte_level()) {
    std::string out = first_ ? scratch_ : " " + scratch_;
    first_ = false;
    return out;
  }
  first_ = false;
  Decoder::token_bytes(scratch_, pending_);
  const size_t hold = utf8_incomplete_tail(pending_);
  std::string out = utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string Detokenizer::flush() {
  std::string out = utf8_lossy(pending_);
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace mmx::tok
