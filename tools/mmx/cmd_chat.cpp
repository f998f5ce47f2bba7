// mmx chat — an interactive multi-turn chat with a local model in the terminal (no server).
//
//   mmx chat -m DIR|FILE.gguf [--system TEXT] [-n N] [--temp T --top-p P --top-k K --seed S] [-t T]
//
// Each turn goes the way a /v1/chat/completions request does: chat::prepare_turn (chat/turn.h)
// renders the whole conversation with the checkpoint's chat template and makes the engine request
// and the OutputStream (detokenizer + chat::OutputParser); generate() (engine/generate.h: the
// Engine's sampler and stop rule) runs it. Reasoning is shown dimmed on a terminal, tool calls as `[tool call] name {arguments}`.
//
// Lines starting with / are commands: /reset, /system TEXT, /exit (also /help). Ctrl-C during a
// reply stops it (the reply so far stays in the conversation); Ctrl-C at the prompt asks, a
// second one exits. stdin may be a pipe (one line per user turn); the prompt "> " and the
// banner are printed only when stdin is a terminal.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "base/error.h"
#include "chat_model.h"
#include "common.h"
#include "sampling_flags.h"
#include "engine/generate.h"
#include "engine/generation_defaults.h"
#include "ops/ops.h"
#include "chat/chat_error.h"
#include "chat/turn.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {

std::atomic<bool> g_interrupted{false};
void on_sigint(int) { g_interrupted = true; }

struct Opts {
  std::string model, system, reasoning_format = "auto", chat_template;
  int n = 1024, threads = 0;
  LoadOptions load;
  SamplingFlags sampling;  // what is not given comes from the checkpoint's generation_config.json
  bool show_prompt = false;
};

// One line from stdin without its newline. std::nullopt at end of input, or when Ctrl-C
// interrupted the read (g_interrupted is then set).
std::optional<std::string> read_line() {
  std::string line;
  for (;;) {
    char c;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return line;
      line += c;
    } else if (n == 0) {
      if (line.empty()) return std::nullopt;
      return line;
    } else if (errno == EINTR) {
      if (g_interrupted) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
}

// Prints a reply's parsed parts as they come: reasoning dimmed (on a terminal), then content,
// tool calls on their own lines.
class ReplyPrinter {
 public:
  explicit ReplyPrinter(bool ansi) : ansi_(ansi) {}

  void print(const chat::ParsedDelta& d) {
    if (!d.reasoning.empty()) {
      if (!in_reasoning_) {
        if (ansi_) std::fputs("\x1b[2m", stdout);
        in_reasoning_ = true;
      }
      std::fputs(d.reasoning.c_str(), stdout);
      ended_newline_ = d.reasoning.back() == '\n';
    }
    if (!d.content.empty()) {
      leave_reasoning();
      std::fputs(d.content.c_str(), stdout);
      ended_newline_ = d.content.back() == '\n';
    }
    for (const chat::ToolCall& c : d.tool_calls) {
      leave_reasoning();
      if (!ended_newline_) std::fputc('\n', stdout);
      std::printf("[tool call] %s %s\n", c.name.c_str(), c.arguments_json.c_str());
      ended_newline_ = true;
    }
    std::fflush(stdout);
  }
  // Ends the reply: closes the dim block and the line.
  void end(const char* note) {
    leave_reasoning(/*more=*/false);
    if (note) std::printf("%s[%s]", ended_newline_ ? "" : " ", note);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  // more: content or a tool call follows (a blank line sets it apart from the reasoning).
  void leave_reasoning(bool more = true) {
    if (!in_reasoning_) return;
    if (ansi_) std::fputs("\x1b[0m", stdout);
    in_reasoning_ = false;
    if (!more) return;
    if (!ended_newline_) std::fputc('\n', stdout);
    std::fputc('\n', stdout);
    ended_newline_ = true;
  }

  bool ansi_;
  bool in_reasoning_ = false, ended_newline_ = true;
};

class ChatSession {
 public:
  ChatSession(const Opts& o, Model& model, const chat::ServedModel& sm, SamplingParams sampling)
      : o_(o), model_(model), sm_(sm), sampling_(sampling), system_(o.system), ansi_(isatty(STDOUT_FILENO)) {}

  // Runs one user turn: renders, generates, prints, and keeps the assistant's turn in history.
  void turn(const std::string& text) {
    history_.push_back({{"role", "user"}, {"content", text}});
    chat::Conversation c;
    if (!system_.empty()) c.messages.push_back({{"role", "system"}, {"content", system_}});
    for (const auto& m : history_) c.messages.push_back(m);
    const int64_t context = model_.config().max_position;
    chat::TurnOptions to;
    to.gen.sampling = sampling_;
    to.gen.sampling.seed = sampling_.seed + uint64_t(n_turns_);  // each turn its own draw, repeatable
    to.gen.max_tokens = o_.n;
    to.context_limit = context;
    to.tool_call_id_seed = to.gen.sampling.seed;  // a seeded session repeats its tool-call ids too
    int64_t n_prompt = -1;
    to.on_prompt = [&](const chat::ChatPrompt& p) {
      n_prompt = int64_t(p.ids.size());
      if (o_.show_prompt)
        std::fprintf(stderr, "--- prompt: %zu tokens ---\n%s\n--- end of prompt ---\n", p.ids.size(), p.text.c_str());
    };
    chat::PreparedTurn t;
    try {
      t = chat::prepare_turn(sm_, std::move(c), to);
    } catch (const chat::ChatError& e) {
      history_.erase(history_.end() - 1);
      if (e.kind() == chat::ChatError::Kind::kContextExceeded && n_prompt >= 0)
        std::fprintf(stderr, "error: the conversation is %lld tokens, the model's context is %lld: /reset to start over\n",
                     (long long)n_prompt, (long long)context);
      else
        std::fprintf(stderr, "error: %s\n", e.what());
      return;
    }
    ++n_turns_;
    const GenRequest& req = t.request;
    chat::OutputStream out = t.make_stream(0);
    chat::ParsedDelta all;
    ReplyPrinter printer(ansi_);
    auto show = [&](chat::ParsedDelta d) {
      printer.print(d);
      all.append(std::move(d));
    };
    GenerateOptions go;
    go.n_valid_vocab = sm_.tokenizer->vocab_size();
    g_interrupted = false;
    std::string note;
    int64_t n_tokens = 0;
    int32_t last = -1;
    try {
      generate(model_, req,
               [&](int32_t id) {
                 if (g_interrupted) return false;
                 ++n_tokens;
                 last = id;
                 show(out.push(id));
                 return !out.stopped();
               },
               nullptr, go);
    } catch (const Error& e) {
      note = e.what();
    }
    show(out.finish());
    const bool eos = std::find(req.stop_ids.begin(), req.stop_ids.end(), last) != req.stop_ids.end();
    if (g_interrupted) note = "stopped";
    else if (note.empty() && n_tokens == req.max_tokens && !eos) note = fmt::format("cut at {} tokens (-n)", n_tokens);
    printer.end(note.empty() ? nullptr : note.c_str());
    g_interrupted = false;
    history_.push_back(assistant_turn(all));
  }

  void reset() { history_.clear(); }
  void set_system(std::string s) { system_ = std::move(s); }
  const std::string& system() const { return system_; }
  size_t n_messages() const { return history_.size(); }

 private:
  // The assistant's turn as a client would send it back (tool-call arguments as JSON strings).
  static chat::ojson assistant_turn(const chat::ParsedDelta& d) {
    chat::ojson m = {{"role", "assistant"}, {"content", d.content}};
    if (!d.reasoning.empty()) m["reasoning_content"] = d.reasoning;
    if (!d.tool_calls.empty()) {
      m["tool_calls"] = chat::ojson::array();
      for (const chat::ToolCall& c : d.tool_calls)
        m["tool_calls"].push_back({{"id", c.id}, {"type", "function"},
                                   {"function", {{"name", c.name}, {"arguments", c.arguments_json}}}});
    }
    return m;
  }

  const Opts& o_;
  Model& model_;
  const chat::ServedModel& sm_;
  SamplingParams sampling_;
  std::string system_;
  bool ansi_;
  std::vector<chat::ojson> history_;  // user and assistant turns, the system prompt apart
  int n_turns_ = 0;
};

const char* kHelp =
    "commands: /reset (clear the conversation), /system TEXT (set the system prompt; /system alone clears it), "
    "/exit\n";

void run_chat(const Opts& o) {
  ops::set_n_threads(o.threads);
  const Checkpoint ck = open_checkpoint(o.model);
  if (!ck.has_tokenizer()) fail("{} has no tokenizer.json: mmx chat needs the checkpoint's tokenizer", o.model);
  tok::Tokenizer tokenizer = load_tokenizer(ck);
  ChatTemplate tmpl = load_chat_template(ck, o.chat_template);
  auto model = load_for_cli(o.model, o.load);

  chat::ServedModel sm;
  sm.name = std::filesystem::path(o.model).lexically_normal().filename().string();
  sm.tokenizer = &tokenizer;
  sm.chat_template = &tmpl;
  describe_model(*model, o.model, o.reasoning_format, sm);

  SamplingParams sp = sm.sampling;
  o.sampling.apply(sp);

  // No SA_RESTART: Ctrl-C interrupts a blocked read of the prompt line.
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);

  const bool interactive = isatty(STDIN_FILENO);
  if (interactive)
    std::printf("mmx chat: %s (%s). Ctrl-C stops a reply; %s", sm.name.c_str(), o.model.c_str(), kHelp);
  ChatSession chat(o, *model, sm, sp);
  bool asked_to_exit = false;  // one Ctrl-C at the prompt was seen
  for (;;) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    std::optional<std::string> line = read_line();
    if (!line) {
      if (!g_interrupted) break;  // end of input
      g_interrupted = false;
      if (asked_to_exit) break;
      asked_to_exit = true;
      std::fputs("\n(Ctrl-C again to exit, or /exit)\n", stdout);
      continue;
    }
    asked_to_exit = false;
    std::string text = *line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    if (text == "/exit" || text == "/quit") break;
    if (text == "/help") {
      std::fputs(kHelp, stdout);
    } else if (text == "/reset") {
      chat.reset();
      std::fputs("(conversation cleared)\n", stdout);
    } else if (text == "/system" || text.rfind("/system ", 0) == 0) {
      chat.set_system(text.size() > 8 ? text.substr(8) : "");
      std::fputs(chat.system().empty() ? "(system prompt cleared)\n" : "(system prompt set)\n", stdout);
    } else if (text[0] == '/' && text.find(' ') == std::string::npos && text.size() > 1 && text[1] != '/') {
      std::fprintf(stdout, "unknown command %s; %s", text.c_str(), kHelp);
    } else {
      chat.turn(text);
    }
    std::fflush(stdout);
  }
  std::fflush(stdout);
}

}  // namespace

void add_chat(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand("chat", "Interactive multi-turn chat with a local model in the terminal");
  c->add_option("-m,--model", o->model, "Checkpoint directory (Hugging Face layout) or GGUF file")->required();
  c->add_option("--system", o->system, "System prompt (change it in the chat with /system TEXT)");
  c->add_option("--chat-template", o->chat_template, "A Jinja chat template file to use instead of the checkpoint's");
  c->add_option("--reasoning-format", o->reasoning_format,
                "Output parser: auto (by model family), minimax_m2, minimax_m2_append_think, minimax_m3, minimax")
      ->capture_default_str();
  c->add_option("-n,--n-predict", o->n, "Most tokens per reply")->capture_default_str()->check(CLI::PositiveNumber);
  add_sampling_flags(c, &o->sampling,
                     {"Sampling temperature (0 = greedy); this and the next three default to the checkpoint's "
                      "generation_config.json",
                      "Sampling seed (turn i uses seed + i; default: random)"});
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  c->add_flag("--show-prompt", o->show_prompt, "Print each turn's rendered prompt and its token count on stderr");
  add_load_options(c, &o->load);
  c->callback([o, &action] { action = [o] { run_chat(*o); }; });
}

}  // namespace mmx::cli
