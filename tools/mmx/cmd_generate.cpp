// mmx generate: stream tokens from a checkpoint.
//   --ids 1,2,3     prompt as token ids; generated ids are printed space-separated on one line
//   -p TEXT         prompt as text (the checkpoint's tokenizer.json); generated text is streamed
//   -p TEXT --chat  TEXT is one user message rendered with the checkpoint's chat template
#include <cstdio>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "cache_flags.h"
#include "common.h"
#include "sampling_flags.h"
#include "engine/generate.h"
#include "engine/generation_defaults.h"
#include "model/msa_stats.h"
#include "ops/ops.h"
#include "template/chat_template.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

namespace {
struct Opts {
  std::string model, prompt, ids, system;
  CacheFlags cache;
  int n = 32, threads = 0;
  LoadOptions load;
  SamplingFlags sampling;  // what is not given comes from the checkpoint's generation_config.json
  bool stats = false;
  bool ignore_eos = false;
  bool chat = false;
  bool show_prompt = false;
  bool msa_stats = false;
  int64_t lookup = 0;
};

void run_generate(const Opts& o) {
  ops::set_n_threads(o.threads);
  std::optional<tok::Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  const Checkpoint ck = open_checkpoint(o.model);
  if (ck.has_tokenizer()) tokenizer = load_tokenizer(ck);
  if (!o.ids.empty()) {
    prompt = parse_ids(o.ids);
  } else {
    if (o.prompt.empty()) fail("give a prompt: -p TEXT (or --ids 1,2,3)");
    if (!tokenizer) fail("{} has no tokenizer.json: pass the prompt as --ids 1,2,3", o.model);
    std::string text = o.prompt;
    if (o.chat) {
      nlohmann::json messages = nlohmann::json::array();
      if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
      messages.push_back({{"role", "user"}, {"content", o.prompt}});
      text = load_chat_template(ck).render(messages, nullptr, /*add_generation_prompt=*/true);
    }
    // A chat template writes its special tokens as text; a raw prompt gets the tokenizer's own
    // post-processing (as HF `tokenizer(text)` does).
    prompt = tokenizer->encode(text, /*add_special_tokens=*/!o.chat);
    if (o.show_prompt) std::fprintf(stderr, "%s", text.c_str());
  }
  auto model = load_for_cli(o.model, o.load);
  SamplingParams sp = generation_defaults(ck.generation_config());
  o.sampling.apply(sp);
  if (!o.sampling.seed_given() && sp.temperature > 0)
    std::fprintf(stderr, "mmx generate: sampling seed %llu (pass --seed to repeat)\n", (unsigned long long)sp.seed);
  GenRequest req;
  req.prompt = prompt;
  req.sampling = sp;
  req.max_tokens = o.n;
  if (!o.ignore_eos)
    for (int64_t id : model->config().eos_token_ids) req.stop_ids.push_back(int32_t(id));
  GenerateStats st;
  MsaStats msa_stats;
  if (o.msa_stats) model->set_msa_stats(&msa_stats);
  std::optional<tok::Detokenizer> detok;
  if (tokenizer && o.ids.empty()) detok.emplace(*tokenizer, /*skip_special_tokens=*/false);
  bool first = true;
  GenerateOptions go;
  go.n_valid_vocab = tokenizer ? tokenizer->vocab_size() : 0;
  go.kv_dtype = o.cache.kv_dtype();
  go.ik_dtype = o.cache.ik_dtype();
  if (o.lookup > 0) go.spec_k = o.lookup, go.drafter = std::make_shared<PromptLookupDrafter>();
  generate(*model, req,
           [&](int32_t t) {
             if (detok) std::fputs(detok->push(t).c_str(), stdout);
             else std::printf(first ? "%d" : " %d", t);
             std::fflush(stdout);
             first = false;
             return true;
           },
           &st, go);
  if (detok) std::fputs(detok->flush().c_str(), stdout);
  std::printf("\n");
  std::fflush(stdout);  // before the stats on stderr
  if (o.stats)
    std::fprintf(stderr, "prefill %lld tokens in %.3f s (%.1f tok/s); decode %lld tokens in %.3f s (%.1f tok/s)\n",
                 (long long)st.n_prompt, st.prefill_s, st.n_prompt / st.prefill_s, (long long)st.n_generated,
                 st.decode_s, st.n_generated > 1 ? (st.n_generated - 1) / st.decode_s : 0.0);
  if (o.stats && o.lookup > 0)
    std::fprintf(stderr, "speculative (lookup %lld): %lld drafts, %lld drafted tokens, %lld accepted (%.0f %%), "
                 "mean acceptance length %.2f\n", (long long)o.lookup, (long long)st.spec_drafts,
                 (long long)st.spec_draft_tokens, (long long)st.spec_accepted,
                 st.spec_draft_tokens ? 100.0 * double(st.spec_accepted) / double(st.spec_draft_tokens) : 0.0,
                 st.spec_drafts ? 1.0 + double(st.spec_accepted) / double(st.spec_drafts) : 1.0);
  if (o.msa_stats) {
    if (msa_stats.layers().empty())
      std::fprintf(stderr, "--msa-stats: this model has no sparse-attention (MSA) layers\n");
    else
      std::fprintf(stderr, "MSA selection vs full attention (prefill + decode queries):\n%s",
                   msa_stats.report().c_str());
  }
}
}  // namespace

void add_generate(CLI::App& app, Action& action) {
  auto o = std::make_shared<Opts>();
  CLI::App* c = app.add_subcommand(
      "generate", "Generate after a prompt: text in -> text out, or --ids in -> ids out (space-separated)");
  c->add_option("-m,--model", o->model, "Checkpoint directory (Hugging Face layout)")->required();
  auto* p = c->add_option("-p,--prompt", o->prompt, "Prompt text (tokenized with the checkpoint's tokenizer.json)");
  auto* i = c->add_option("--ids", o->ids, "Prompt token ids, comma-separated, e.g. 1,2,3");
  p->excludes(i);
  c->add_flag("--chat", o->chat, "Render -p as a user message with the checkpoint's chat template")->needs(p);
  c->add_option("--system", o->system, "System message (with --chat)");
  c->add_flag("--show-prompt", o->show_prompt, "Print the rendered prompt on stderr");
  c->add_option("-n,--n-predict", o->n, "Number of tokens to generate")->check(CLI::NonNegativeNumber);
  add_sampling_flags(c, &o->sampling,
                     {"Sampling temperature (0 = greedy); this and the next four default to the checkpoint's "
                      "generation_config.json (else 1, no filters)",
                      "Sampling seed (default: random, printed on stderr)", /*penalties=*/true});
  c->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)");
  add_load_options(c, &o->load);
  add_cache_flags(c, &o->cache);
  c->add_flag("--stats", o->stats, "Print prefill/decode speed on stderr");
  c->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at the end-of-sequence token");
  c->add_option("--lookup", o->lookup,
                "Speculative decoding by prompt lookup: draft up to K tokens per step from an earlier occurrence "
                "of the last tokens, verified in one forward (the output is the same as without)")
      ->check(CLI::Range(0, 16));
  c->add_flag("--msa-stats", o->msa_stats,
              "MiniMax-M3: per sparse layer and GQA group, recall of the true top-16 blocks and the "
              "attention-mass coverage of the indexer's selection, and index vs attention time "
              "(slow: runs full fp64 attention alongside)");
  c->callback([o, &action] { action = [o] { run_generate(*o); }; });
}

}  // namespace mmx::cli
