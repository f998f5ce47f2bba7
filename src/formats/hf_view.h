// A GGUF file seen as a Hugging Face checkpoint: the config.json, tokenizer.json and
// tokenizer_config.json it stands for — so one loading path (config parser, weight loader,
// tokenizer, chat template) serves both formats. The HF <-> GGUF tensor-name map is the
// checkpoint schema's (model/schema.h).
//
// Architecture: `minimax-m2` as llama.cpp writes it (spec §4.3; metadata keys `minimax-m2.*`,
// tokenizer `gpt2` with pre-tokenizer `minimax-m2`, whose split regex is spec §6.1's). Every
// other architecture is refused by name. Keys with a real effect that we do not model (rope
// scaling, sliding window) are refused, never ignored.
//
// The converter (formats/convert/gguf_convert.cpp) writes the same keys from an HF checkpoint
// with the inverse functions here, so a file we write reads back to the config we started from.
//
// Not here: parsing the bytes (formats/gguf.h), deciding that a path is a GGUF file and handing
// these views to the loaders (formats/checkpoint.h), the quantizers (ops/).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"

namespace mmx::gguf {

inline constexpr char kArchM2[] = "minimax-m2";
// The pre-tokenizer split regex of the MiniMax M2 tokenizer.json (spec §6.1).
extern const char* const kMiniMaxM2SplitRegex;

// The tensors hf_config() reads shapes from, by their GGUF names (the caller's checkpoint schema,
// model/schema.h, names them: this view knows bytes and metadata, not tensor names).
struct ModelTensorNames {
  std::string embedding;  // [vocab, d]: the vocabulary size
  std::string output;     // absent: tied embeddings
};

nlohmann::json hf_config(const File& f, const ModelTensorNames& t);  // config.json of the model the file holds
nlohmann::json hf_tokenizer(const File& f);         // tokenizer.json (byte-level BPE)
nlohmann::json hf_tokenizer_config(const File& f);  // bos/eos/pad tokens, chat_template

// The inverse, for writers: the metadata of an HF checkpoint's config.json, tokenizer.json and
// tokenizer_config.json, set on `w` (file_type is the llama.cpp ftype code of the mix).
class Writer;
void set_model_metadata(Writer& w, const nlohmann::json& config, const std::string& name,
                        uint32_t file_type);
void set_tokenizer_metadata(Writer& w, const nlohmann::json& tokenizer,
                            const nlohmann::json& tokenizer_config, int64_t vocab_rows);

}  // namespace mmx::gguf
