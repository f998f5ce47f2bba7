// Shared pieces of the mmx subcommands: id-list parsing, the load progress bar, registration.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/checkpoint.h"
#include "model/model.h"
#include "tiny/tiny.h"

namespace mmx {
class ChatTemplate;
namespace tok { class Tokenizer; }
}  // namespace mmx

namespace mmx::cli {

// "1,2,3" -> {1,2,3}; throws mmx::Error with the offending item on bad input.
std::vector<int32_t> parse_ids(const std::string& s);
// -log softmax(row)[target] over a row of V logits, in double (ppl, probe).
double row_nll(const float* row, int64_t V, int32_t target);
// KL(softmax(p) || softmax(q)) over rows of V logits, in double, nats (ppl --kl-base).
double row_kl(const float* p, const float* q, int64_t V);
// A progress bar on stderr for layer loading: [#####     ] 31/62 layers.
void progress_bar(int done, int total);

// The checkpoint's tokenizer and chat template, from the files the formats gateway hands out
// (formats/checkpoint.h; ck.has_tokenizer() says whether there is one). template_file: --chat-template.
tok::Tokenizer load_tokenizer(const Checkpoint& ck);
ChatTemplate load_chat_template(const Checkpoint& ck, const std::string& template_file = "");

// Loads a model for a command: progress bar, then "note: ..." lines for the config's warnings.
std::unique_ptr<Model> load_for_cli(const std::string& dir, const LoadOptions& o);

// The shape flags of make-tiny and train (--layers, --experts, --top-k, --vocab, --hidden, --heads,
// --kv-heads, --head-dim, --rotary-dim, --ffn, --max-pos; M3: --msa-block, --msa-topk, --dense-ffn,
// --shared-ffn, --index-dim).
// The family's tiny shape (tiny_defaults(o->arch)) for every shape flag not given on the command
// line (make-tiny, train).
void apply_family_defaults(CLI::App* c, TinyOptions* o);
// with_vocab = false leaves --vocab to the caller (train: the tokenizer's size).
void add_shape_options(CLI::App* c, TinyOptions* o, bool with_vocab = true);

// Adds the model-loading options (--lightning-block) to a subcommand.
void add_load_options(CLI::App* c, LoadOptions* o);

// Each subcommand registers itself: adds its options to `app` and returns the action to run.
using Action = std::function<void()>;
void add_generate(CLI::App& app, Action& action);
void add_logits(CLI::App& app, Action& action);
void add_make_tiny(CLI::App& app, Action& action);
void add_inspect(CLI::App& app, Action& action);
void add_bench(CLI::App& app, Action& action);
void add_bench_train(CLI::App* bench, Action& action);  // bench_train.cpp: `mmx bench train`
void add_bench_rl(CLI::App* bench, Action& action);     // bench_rl.cpp: `mmx bench rl`
void add_bench_spec(CLI::App* bench, Action& action);   // bench_spec.cpp: `mmx bench spec`
void add_bench_model(CLI::App* bench, Action& action);  // bench_model.cpp: `mmx bench model`
void add_tokenize(CLI::App& app, Action& action);       // cmd_tokenize.cpp: tokenize + detokenize
void add_chat_template(CLI::App& app, Action& action);  // cmd_chat_template.cpp
void add_serve(CLI::App& app, Action& action);          // cmd_serve.cpp: the HTTP server
void add_chat(CLI::App& app, Action& action);           // cmd_chat.cpp: terminal chat on a local model
void add_train(CLI::App& app, Action& action);          // cmd_train.cpp
void add_ppl(CLI::App& app, Action& action);            // cmd_ppl.cpp
void add_grad(CLI::App& app, Action& action);            // cmd_grad.cpp: one batch's loss and gradients
void add_rl(CLI::App& app, Action& action);              // cmd_rl.cpp: mmx rl grad (agent RL)
void add_rl_task(CLI::App* rl, Action& action);          // cmd_rl_task.cpp: mmx rl task-data, task-eval
void add_probe(CLI::App& app, Action& action);           // cmd_probe.cpp: long-range retrieval probe
void add_train_tokenizer(CLI::App& app, Action& action);  // cmd_train_tokenizer.cpp: BPE training
void add_convert(CLI::App& app, Action& action);          // cmd_convert.cpp: HF -> GGUF
void add_family_tokens(CLI::App& app, Action& action);    // cmd_family_tokens.cpp
void add_sandbox(CLI::App& app, Action& action);          // cmd_sandbox.cpp: a contained command, as JSON

}  // namespace mmx::cli
