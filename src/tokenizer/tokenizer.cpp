// mmx::Tokenizer (see tokenizer.h): loading and the encode / decode pipelines.
#include "tokenizer/tokenizer.h"

#include "base/scratch.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace mmx::tok {

using nlohmann::json;

Tokenizer Tokenizer::from_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open tokenizer file '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return from_json_text(ss.str());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

Tokenizer Tokenizer::from_path(const std::string& path) {
  namespace fs = std::filesystem;
  if (!fs::exists(path)) fail("tokenizer path '{}' does not exist (give a model directory or a tokenizer.json)", path);
  if (fs::is_directory(path)) {
    const fs::path p = fs::path(path) / "tokenizer.json";
    if (!fs::exists(p)) fail("no tokenizer.json in directory '{}'", path);
    return from_file(p.string());
  }
  return from_file(path);
}

Tokenizer Tokenizer::from_json(const json& j, const std::string& where) {
  try {
    return from_json(j);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

Tokenizer Tokenizer::from_json_text(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("tokenizer.json is not valid JSON: {}", e.what());
  }
  return from_json(j);
}

Tokenizer Tokenizer::from_json(const json& j) {
  Tokenizer t;
  try {
    if (!j.is_object() || !j.contains("model")) fail("tokenizer.json has no \"model\"");
    auto get = [&](const char* k) -> const json& {
      static const json null_json;
      return j.contains(k) ? j[k] : null_json;
    };
    t.normalizer_ = Normalizer::from_json(get("normalizer"));
    t.pretokenizer_ = PreTokenizer::from_json(get("pre_tokenizer"));
    t.model_ = BpeModel::from_json(j["model"], t.pretokenizer_.is_byte_level());
    t.added_ = AddedVocab::from_json(get("added_tokens"), t.normalizer_, t.model_);
    t.post_ = PostProcessor::from_json(get("post_processor"));
    t.decoder_ = Decoder::from_json(get("decoder"));
  } catch (const json::exception& e) {
    fail("tokenizer.json: unexpected structure: {}", e.what());
  }
  if (t.decoder_.is_byte_level() != t.pretokenizer_.is_byte_level())
    fail("tokenizer.json: ByteLevel decoder without ByteLevel pre-tokenizer (or the reverse) is not supported");
  t.cache_ = std::make_unique<BpeCache>();
  return t;
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out, BpeCache* cache) const {
  thread_local std::vector<Piece> pieces;
  pieces.clear();
  pretokenizer_.split(text, pieces);
  for (const Piece& p : pieces) model_.encode_piece(text.substr(p.begin, p.end - p.begin), out, cache);
  release_if_large(pieces);
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  std::string fixed;
  if (!utf8_is_valid(input)) {
    fixed = utf8_lossy(input);
    input = fixed;
  }
  std::vector<int32_t> out;
  out.reserve(input.size() / 3 + 4);
  std::unique_lock<std::mutex> lock(cache_->mu, std::try_to_lock);
  BpeCache* cache = lock.owns_lock() ? cache_.get() : nullptr;

  std::vector<Segment> raw_segs, norm_segs;
  added_.split(input, /*normalized_pass=*/false, raw_segs);
  std::string normalized;
  for (const Segment& s : raw_segs) {
    if (s.id >= 0) {
      out.push_back(s.id);
      continue;
    }
    std::string_view sub = input.substr(s.begin, s.end - s.begin);
    if (!normalizer_.is_identity()) {
      normalizer_.apply(sub, normalized);
      sub = normalized;
    }
    norm_segs.clear();
    added_.split(sub, /*normalized_pass=*/true, norm_segs);
    for (const Segment& n : norm_segs) {
      if (n.id >= 0) out.push_back(n.id);
      else encode_plain(sub.substr(n.begin, n.end - n.begin), out, cache);
    }
  }
  if (add_special_tokens) post_.apply(out);
  return out;
}

std::vector<int32_t> Tokenizer::encode_as_text(std::string_view input) const {
  std::string fixed, normalized;
  if (!utf8_is_valid(input)) {
    fixed = utf8_lossy(input);
    input = fixed;
  }
  if (!normalizer_.is_identity()) {
    normalizer_.apply(input, normalized);
    input = normalized;
  }
  std::vector<int32_t> out;
  std::unique_lock<std::mutex> lock(cache_->mu, std::try_to_lock);
  encode_plain(input, out, lock.owns_lock() ? cache_.get() : nullptr);
  return out;
}

std::vector<std::pair<size_t, size_t>> Tokenizer::added_token_spans(std::string_view text) const {
  std::vector<Segment> segs;
  added_.split(text, /*normalized_pass=*/false, segs);
  std::vector<std::pair<size_t, size_t>> spans;
  for (const Segment& s : segs)
    if (s.id >= 0) spans.emplace_back(s.begin, s.end);
  return spans;
}

bool Tokenizer::token_string(int32_t id, std::string& out) const {
  if (const AddedToken* a = added_.find_id(id)) {
    out = a->content;
    return true;
  }
  if (const std::string* s = model_.id_to_token(id)) {
    out = *s;
    return true;
  }
  return false;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  // HF: every known id -> its string (specials dropped when asked); the decoder then sees the
  // whole list: ByteLevel maps it to bytes and decodes them lossily; no decoder joins with ' '.
  std::string bytes, tok;
  bool first = true;
  for (int32_t id : ids) {
    if (!token_string(id, tok)) continue;
    if (skip_special_tokens && is_special(id)) continue;
    if (decoder_.is_byte_level()) {
      Decoder::token_bytes(tok, bytes);
    } else {
      if (!first) bytes.push_back(' ');
      bytes += tok;
    }
    first = false;
  }
  return decoder_.is_byte_level() ? utf8_lossy(bytes) : bytes;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  const int32_t a = added_.find_content(token);
  return a >= 0 ? a : model_.token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  std::string s;
  token_string(id, s);
  return s;
}

bool Tokenizer::has_id(int32_t id) const { return added_.find_id(id) || model_.id_to_token(id); }

int32_t Tokenizer::vocab_size() const {
  int32_t m = model_.max_id();
  for (const AddedToken& a : added_.tokens()) m = std::max(m, a.id);
  return m + 1;
}

int64_t Tokenizer::min_tokens(size_t bytes) const {
  size_t longest = model_.max_token_bytes();
  for (const AddedToken& t : added_.tokens()) {
    if (t.lstrip || t.rstrip) return 0;  // it also swallows the whitespace around it: no bound
    longest = std::max(longest, t.content.size());
  }
  const size_t per_id = longest * (normalizer_.is_identity() ? 1 : 4);
  return int64_t(bytes / std::max<size_t>(per_id, 1));
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* a = added_.find_id(id);
  return a && a->special;
}

}  // namespace mmx::tok
