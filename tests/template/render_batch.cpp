// render_batch — the C++ side of the chat-template parity test (parity.js is the other side).
// Reads one JSON job from stdin:
//   {"templates": [{"dir": D} | {"file": F, "config": {...tokenizer_config fields...}}, ...],
//    "cases": [{"messages": [...], "tools": [...]|null, "add_generation_prompt": bool,
//               "kwargs": {...}|null}, ...]}
// and writes {"results": [[{"ok": true, "out": S} | {"ok": false, "err": E}, ...per case], ...per
// template]} to stdout. A template that fails to load fails every case. Links only mmx_template.
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "formats/checkpoint.h"
#include "template/chat_template.h"

using json = nlohmann::ordered_json;

static std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int main() {
  std::string in((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  json job = json::parse(in);
  json results = json::array();
  for (const json& spec : job["templates"]) {
    json row = json::array();
    std::optional<mmx::ChatTemplate> tmpl;
    std::string load_error;
    try {
      if (spec.contains("dir")) {
        const mmx::ChatTemplateFiles f = mmx::open_checkpoint(spec["dir"].get<std::string>()).chat_template_files();
        tmpl.emplace(f.templates, f.tokenizer_config);
      } else {
        tmpl.emplace(std::map<std::string, std::string>{{"default", slurp(spec["file"].get<std::string>())}},
                     spec.value("config", json(nullptr)));
      }
    } catch (const std::exception& e) {
      load_error = e.what();
    }
    for (const json& c : job["cases"]) {
      json r;
      if (!tmpl) {
        r = {{"ok", false}, {"err", load_error}};
      } else {
        try {
          std::string out = tmpl->render(c["messages"], c.value("tools", json(nullptr)),
                                         c.value("add_generation_prompt", false), c.value("kwargs", json(nullptr)));
          r = {{"ok", true}, {"out", out}};
        } catch (const std::exception& e) {
          r = {{"ok", false}, {"err", e.what()}};
        }
      }
      row.push_back(r);
    }
    results.push_back(row);
  }
  std::string out = json{{"results", results}}.dump(-1, ' ', false, json::error_handler_t::replace);
  std::cout << out;
  return 0;
}
