// The one gateway to checkpoint files: open_checkpoint(path) sniffs the format once (GGUF by its
// magic, else a Hugging Face safetensors checkpoint) and hands out what the other rooms load from:
// the config.json text (model/config), the tokenizer.json (tokenizer/), the chat templates and
// special tokens of tokenizer_config.json (template/), generation_config.json (engine's sampling
// defaults) and the TensorStore (model/weights, train).
//
// Paths accepted, as before this gateway existed:
//   * a GGUF file (recognised by its magic, whatever its name): everything comes from its
//     metadata through the Hugging Face views of formats/hf_view.h;
//   * a directory: config.json, tokenizer.json, tokenizer_config.json, chat_template.jinja,
//     generation_config.json and model.safetensors(.index.json) inside it;
//   * any other file: tensors() opens it as one .safetensors file (or a *.index.json), and
//     tokenizer() reads it as a tokenizer.json.
// Nothing is read by open_checkpoint itself (it never throws): each accessor reads its file when
// asked and throws mmx::Error naming it (the messages the loaders gave before).
//
// Not here: what the files mean — parsing config.json into a ModelConfig (model/config), building
// the BPE (tokenizer/), rendering templates (template/), mapping generation_config.json onto
// SamplingParams (engine/generation_defaults). A Checkpoint is not thread-safe (it caches the
// parsed GGUF metadata).
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/generation_config.h"
#include "formats/hf_view.h"
#include "formats/safetensors.h"

namespace mmx {

namespace gguf { class File; }

// A JSON file of a checkpoint and the name errors about it carry (the file, or the GGUF file it
// comes from).
struct CheckpointJson {
  std::string where;
  nlohmann::json json;
};

// What a chat template is built from (template/chat_template.h's constructor).
struct ChatTemplateFiles {
  std::map<std::string, std::string> templates;  // name -> Jinja source; "default" when single
  nlohmann::ordered_json tokenizer_config;       // the special tokens' source, or null
};

class Checkpoint {
 public:
  const std::string& path() const { return path_; }
  bool is_gguf() const { return is_gguf_; }

  // config.json's text and the name parse errors carry (PATH/config.json, or the GGUF file and
  // the config it stands for). gguf_names: the GGUF tensors whose shapes a GGUF file's config is
  // read from, named by the caller's checkpoint schema (model/schema.h; unused for safetensors).
  // Throws mmx::Error when the directory has no config.json.
  std::string config_text(const gguf::ModelTensorNames& gguf_names) const;
  std::string config_where() const;

  // True when tokenizer() has something to read: a GGUF file, or PATH/tokenizer.json exists.
  bool has_tokenizer() const;
  // tokenizer.json (GGUF: the byte-level BPE its vocabulary stands for). Throws mmx::Error when
  // PATH does not exist, a directory has no tokenizer.json, or the JSON does not parse.
  CheckpointJson tokenizer() const;

  // The chat templates and the tokenizer_config.json they come with. Templates:
  // PATH/chat_template.jinja if present (transformers >= 4.43 writes it there), else
  // tokenizer_config.json "chat_template" — a string, or a list of {"name", "template"} ("default"
  // is the plain template, "tool_use" the one for requests with tools); GGUF:
  // tokenizer.chat_template. template_file (non-empty) replaces them with that Jinja file (the
  // special tokens still come from the checkpoint). Throws mmx::Error when there is no template,
  // tokenizer_config.json does not parse, or template_file is not a readable file.
  ChatTemplateFiles chat_template_files(const std::string& template_file = "") const;

  // generation_config.json (empty when there is none; a GGUF file carries none).
  GenerationConfig generation_config() const;

  // The tensors: safetensors (directory, single file or index) or the GGUF file's, under their
  // GGUF names. Throws mmx::Error naming the file (formats/safetensors.h).
  TensorStore tensors() const;

 private:
  friend Checkpoint open_checkpoint(const std::string& path);
  const gguf::File& gguf_file() const;  // opened on first use

  std::string path_;
  bool is_gguf_ = false;
  mutable std::shared_ptr<const gguf::File> gguf_;
};

// Sniffs `path` (a GGUF file's magic; never throws: a missing path fails in the accessors).
Checkpoint open_checkpoint(const std::string& path);

}  // namespace mmx
