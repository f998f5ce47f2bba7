// Test helpers: a checkpoint's tokenizer and chat template loaded the way the mmx tools load them,
// from the files the formats gateway hands out (formats/checkpoint.h). Header-only, so a test
// that does not call them needs neither the tokenizer nor the template library.
#pragma once

#include <string>

#include "formats/checkpoint.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mmx::testing {

// PATH: a checkpoint directory, a GGUF file, or a tokenizer.json.
inline tok::Tokenizer tokenizer_of(const std::string& path) {
  const CheckpointJson t = open_checkpoint(path).tokenizer();
  return tok::Tokenizer::from_json(t.json, t.where);
}

// template_file (non-empty): replaces the checkpoint's templates, as --chat-template does.
inline ChatTemplate chat_template_of(const std::string& path, const std::string& template_file = "") {
  const ChatTemplateFiles f = open_checkpoint(path).chat_template_files(template_file);
  return ChatTemplate(f.templates, f.tokenizer_config);
}

}  // namespace mmx::testing
