// The checkpoint gateway (see checkpoint.h): the one format sniff, then each file of the
// checkpoint read where it lives — a directory's JSON files, or a GGUF file's metadata.
#include "formats/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"
#include "formats/gguf.h"
#include "formats/hf_view.h"

namespace mmx {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

namespace {

// A tokenizer.json file.
CheckpointJson read_tokenizer_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open tokenizer file '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  CheckpointJson out{path, nullptr};
  try {
    out.json = json::parse(ss.str());
  } catch (const json::exception& e) {
    fail("{}: tokenizer.json is not valid JSON: {}", path, e.what());
  }
  return out;
}

}  // namespace

Checkpoint open_checkpoint(const std::string& path) {
  Checkpoint c;
  c.path_ = path;
  c.is_gguf_ = gguf::is_gguf(path);  // the one format sniff
  return c;
}

const gguf::File& Checkpoint::gguf_file() const {
  MMX_CHECK(is_gguf_, "gguf_file() of the safetensors checkpoint '{}'", path_);
  if (!gguf_) gguf_ = gguf::File::open(path_);
  return *gguf_;
}

// ---- config.json ----

std::string Checkpoint::config_where() const { return is_gguf_ ? path_ : path_ + "/config.json"; }

std::string Checkpoint::config_text(const gguf::ModelTensorNames& gguf_names) const {
  if (is_gguf_) return gguf::hf_config(gguf_file(), gguf_names).dump();  // formats/hf_view.h
  const std::string path = config_where();
  std::ifstream f(path);
  if (!f) fail("cannot open {}: is {} a Hugging Face checkpoint directory?", path, path_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---- tokenizer.json ----

bool Checkpoint::has_tokenizer() const {
  std::error_code ec;
  return is_gguf_ || fs::exists(fs::path(path_) / "tokenizer.json", ec);
}

CheckpointJson Checkpoint::tokenizer() const {
  if (!fs::exists(path_))
    fail("tokenizer path '{}' does not exist (give a model directory or a tokenizer.json)", path_);
  if (is_gguf_) {  // a GGUF file carries its vocabulary (formats/hf_view.h)
    try {
      return {path_, gguf::hf_tokenizer(gguf_file())};
    } catch (const Error& e) {
      fail("{}: {}", path_, e.what());
    }
  }
  if (fs::is_directory(path_)) {
    const fs::path p = fs::path(path_) / "tokenizer.json";
    if (!fs::exists(p)) fail("no tokenizer.json in directory '{}'", path_);
    return read_tokenizer_file(p.string());
  }
  return read_tokenizer_file(path_);
}

// ---- tokenizer_config.json and the chat templates ----

ChatTemplateFiles Checkpoint::chat_template_files(const std::string& template_file) const {
  auto override_or = [&](std::map<std::string, std::string> found) {
    if (template_file.empty()) return found;
    if (!fs::is_regular_file(template_file)) fail("--chat-template: '{}' is not a readable file", template_file);
    return std::map<std::string, std::string>{{"default", read_file(template_file)}};
  };
  if (is_gguf_) {  // tokenizer.chat_template and the special tokens of a GGUF file
    const json config = gguf::hf_tokenizer_config(gguf_file());
    if (!template_file.empty()) return {override_or({}), config};
    if (!config.contains("chat_template"))
      fail("GGUF file '{}' has no chat template (tokenizer.chat_template)", path_);
    return {{{"default", config["chat_template"].get<std::string>()}}, config};
  }
  const fs::path d(path_);
  ordered_json config = nullptr;
  if (fs::exists(d / "tokenizer_config.json")) {
    try {
      config = ordered_json::parse(read_file((d / "tokenizer_config.json").string()));
    } catch (const json::exception& e) {
      fail("{}/tokenizer_config.json: {}", path_, e.what());
    }
  }
  std::map<std::string, std::string> templates;
  if (!template_file.empty()) {
    templates = override_or({});
  } else if (fs::exists(d / "chat_template.jinja")) {
    templates["default"] = read_file((d / "chat_template.jinja").string());
  } else if (config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null()) {
    const ordered_json& ct = config["chat_template"];
    if (ct.is_string()) {
      templates["default"] = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const ordered_json& t : ct) {
        if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
            !t["template"].is_string())
          fail("{}/tokenizer_config.json: chat_template list entries need string \"name\" and \"template\"",
               path_);
        templates[t["name"].get<std::string>()] = t["template"].get<std::string>();
      }
    } else {
      fail("{}/tokenizer_config.json: chat_template must be a string or a list of {{name, template}}", path_);
    }
  }
  if (templates.empty())
    fail("{} has no chat template (neither chat_template.jinja nor tokenizer_config.json \"chat_template\")",
         path_);
  return {templates, config};
}

// ---- generation_config.json, tensors ----

GenerationConfig Checkpoint::generation_config() const { return read_generation_config(path_); }

TensorStore Checkpoint::tensors() const {
  return is_gguf_ ? TensorStore::open_gguf(path_) : TensorStore::open_safetensors(path_);
}

}  // namespace mmx
