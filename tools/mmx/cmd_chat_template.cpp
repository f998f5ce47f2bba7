// mmx chat-template — render a checkpoint's chat template (the command-line face of
// src/template/chat_template.h).
//
//   mmx chat-template -m DIR --messages FILE.json [--tools FILE.json] [--add-generation-prompt]
//                     [--kwargs FILE.json] [--template NAME] [--parse-arguments]
//       prints the rendered prompt to stdout exactly (no newline added).
// FILE.json for --messages is a JSON array of messages, or an object {"messages": [...],
// "tools": [...]} (an explicit --tools wins). --kwargs is a JSON object of extra template
// variables (enable_thinking, model_identity, ...). This output contract is used by acceptance
// checks: keep it stable. --parse-arguments turns tool-call arguments given as JSON strings into
// objects first (mmx::parse_tool_call_arguments), as the server does.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "common.h"
#include "template/chat_template.h"

namespace mmx::cli {

namespace {
nlohmann::ordered_json read_json(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open {} file '{}'", what, path);
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return nlohmann::ordered_json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail("{} file '{}' is not valid JSON: {}", what, path, e.what());
  }
}
}  // namespace

void add_chat_template(CLI::App& app, Action& action) {
  struct Opts {
    std::string model_dir, messages, tools, kwargs, name;
    bool add_generation_prompt = false, parse_arguments = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("chat-template", "Render the model's chat template for a conversation");
  c->add_option("-m,--model", o->model_dir, "Model directory (tokenizer_config.json or chat_template.jinja)")
      ->required();
  c->add_option("--messages", o->messages, "JSON file: array of messages, or {messages, tools}")->required();
  c->add_option("--tools", o->tools, "JSON file: array of tool schemas");
  c->add_flag("--add-generation-prompt", o->add_generation_prompt, "End with the assistant turn opener");
  c->add_option("--kwargs", o->kwargs, "JSON file: object of extra template variables");
  c->add_option("--template", o->name, "Template name when tokenizer_config.json has several");
  c->add_flag("--parse-arguments", o->parse_arguments, "Parse tool-call arguments given as JSON strings");
  c->callback([o, &action] {
    action = [o] {
      nlohmann::ordered_json messages = read_json(o->messages, "messages");
      nlohmann::ordered_json tools = nullptr, kwargs = nullptr;
      if (messages.is_object()) {
        if (messages.contains("tools")) tools = messages["tools"];
        if (!messages.contains("messages")) fail("messages file '{}' has no \"messages\" field", o->messages);
        nlohmann::ordered_json m = messages["messages"];
        messages = m;
      }
      if (!o->tools.empty()) tools = read_json(o->tools, "tools");
      if (!o->kwargs.empty()) kwargs = read_json(o->kwargs, "kwargs");
      if (o->parse_arguments) messages = parse_tool_call_arguments(messages);
      ChatTemplate t = load_chat_template(open_checkpoint(o->model_dir));
      std::string out = t.render(messages, tools, o->add_generation_prompt, kwargs, o->name);
      std::fwrite(out.data(), 1, out.size(), stdout);
      std::fflush(stdout);
    };
  });
}

}  // namespace mmx::cli
