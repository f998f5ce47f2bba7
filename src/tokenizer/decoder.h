// Decoders of HF tokenizer.json: token strings -> text. Supported: ByteLevel (each token's
// alphabet characters back to bytes; a token with a non-alphabet character contributes its own
// UTF-8, as HF does), Sequence of ByteLevel, and null (tokens joined with single spaces, HF's
// behaviour without a decoder). Refused: ByteFallback, Fuse, Strip, Replace, Metaspace,
// WordPiece, CTC, BPEDecoder.
//
// The decoded bytes of a chunk are turned into text with utf8_lossy (invalid bytes -> U+FFFD),
// matching HF's String::from_utf8_lossy.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace mmx::tok {

class Decoder {
 public:
  Decoder() = default;  // null decoder
  static Decoder from_json(const nlohmann::json& j);

  bool is_byte_level() const { return byte_level_; }
  // Byte-level: the bytes `token` decodes to (appended to out). Null decoder: see Tokenizer.
  static void token_bytes(std::string_view token, std::string& out);

 private:
  bool byte_level_ = false;
};

}  // namespace mmx::tok
