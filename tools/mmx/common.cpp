#include "common.h"

#include "tiny/tiny.h"

#include <map>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unistd.h>

#include "base/error.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mmx::cli {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i <= s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string item = s.substr(i, j - i);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 0 || v > INT32_MAX)
      fail("--ids: \"{}\" is not a non-negative integer token id (expected e.g. --ids 1,2,3)", item);
    ids.push_back(int32_t(v));
    i = j + 1;
  }
  return ids;
}

double row_nll(const float* row, int64_t V, int32_t target) {
  double mx = row[0], sum = 0;
  for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
  for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
  return mx + std::log(sum) - double(row[target]);
}

double row_kl(const float* p, const float* q, int64_t V) {
  // log-sum-exp of each row, then sum_v P(v) (log P(v) - log Q(v)).
  auto lse = [V](const float* r) {
    double mx = r[0], sum = 0;
    for (int64_t v = 1; v < V; ++v) mx = std::max(mx, double(r[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(double(r[v]) - mx);
    return mx + std::log(sum);
  };
  const double lp = lse(p), lq = lse(q);
  double kl = 0;
  for (int64_t v = 0; v < V; ++v) {
    const double a = double(p[v]) - lp;
    kl += std::exp(a) * (a - (double(q[v]) - lq));
  }
  return std::max(0.0, kl);
}

void progress_bar(int done, int total) {
  if (!isatty(fileno(stderr))) return;  // no bar in logs and pipes
  constexpr int kWidth = 30;
  const int fill = total ? done * kWidth / total : kWidth;
  std::fprintf(stderr, "\rloading  [%.*s%*s] %d/%d layers", fill, "##############################",
               kWidth - fill, "", done, total);
  if (done == total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

tok::Tokenizer load_tokenizer(const Checkpoint& ck) {
  const CheckpointJson t = ck.tokenizer();
  return tok::Tokenizer::from_json(t.json, t.where);
}

ChatTemplate load_chat_template(const Checkpoint& ck, const std::string& template_file) {
  const ChatTemplateFiles f = ck.chat_template_files(template_file);
  return ChatTemplate(f.templates, f.tokenizer_config);
}

std::unique_ptr<Model> load_for_cli(const std::string& dir, const LoadOptions& o) {
  auto m = load_model(dir, progress_bar, o);
  for (const auto& w : m->config().warnings) std::fprintf(stderr, "note: %s\n", w.c_str());
  return m;
}

void add_load_options(CLI::App* c, LoadOptions* o) {
  c->add_flag("--mmap", o->mmap_weights,
              "Leave the weights mapped from the file (no copy; pages fault in on first use) instead of "
              "reading them into 2 MiB huge pages at load, which decodes MoE models faster here "
              "(docs/performance.md)");
  c->add_option("--lightning-block", o->lightning_block,
                "Lightning attention: chunk length of the blockwise prefill (default: the config's "
                "block capped at 64, the fastest here). Changes rounding only")
      ->check(CLI::Range(1, 1 << 16));
  static const std::map<std::string, DType> kTypes = {{"f16", DType::kF16},   {"bf16", DType::kBF16}, {"q8_0", DType::kQ8_0},
                                                      {"q4_0", DType::kQ4_0}, {"q4_k", DType::kQ4_K}, {"q5_k", DType::kQ5_K},
                                                      {"q6_k", DType::kQ6_K}};
  c->add_option_function<std::string>(
       "--lm-head-type",
       [o](const std::string& s) {
         const auto it = kTypes.find(s);
         if (it == kTypes.end()) throw CLI::ValidationError("--lm-head-type", "choose f16, bf16, q8_0, q4_0, q4_k, q5_k or q6_k");
         o->lm_head_dtype = it->second;
       },
       "Re-encode the lm_head at load (f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k), as llama.cpp stores the output "
       "matrix of a quantized file: the official FP8 checkpoints' BF16 lm_head is 1.2 GB read per token. "
       "Changes the logits within that type's error");
}

void add_shape_options(CLI::App* c, TinyOptions* o, bool with_vocab) {
  c->add_option("--layers", o->n_layers, "Number of layers")->check(CLI::Range(1, 64));
  c->add_option("--experts", o->n_experts, "Number of routed experts")->check(CLI::Range(1, 1024));
  c->add_option("--top-k", o->n_experts_active, "Experts per token")->check(CLI::Range(1, 1024));
  if (with_vocab)
    c->add_option("--vocab", o->vocab_size, "Vocabulary size")->check(CLI::Range(300, 1 << 20));
  c->add_option("--hidden", o->d_model, "hidden_size")->check(CLI::Range(8, 1 << 16));
  c->add_option("--heads", o->n_heads, "num_attention_heads")->check(CLI::Range(1, 1024));
  c->add_option("--kv-heads", o->n_kv_heads, "num_key_value_heads")->check(CLI::Range(1, 1024));
  c->add_option("--head-dim", o->head_dim, "head_dim")->check(CLI::Range(2, 1024));
  c->add_option("--rotary-dim", o->rotary_dim, "rotary_dim (even, <= head_dim)")->check(CLI::Range(0, 1024));
  c->add_option("--ffn", o->ffn_dim, "intermediate_size (per expert)")->check(CLI::Range(1, 1 << 16));
  c->add_option("--max-pos", o->max_position, "max_position_embeddings")->check(CLI::Range(16, 1 << 24));
  c->add_option("--msa-block", o->msa_block, "minimax_m3: sparse_block_size (default 4)")
      ->check(CLI::Range(1, 1 << 16));
  c->add_option("--msa-topk", o->msa_topk, "minimax_m3: sparse_topk_blocks (default 3)")
      ->check(CLI::Range(1, 1 << 16));
  c->add_option("--dense-ffn", o->dense_ffn_dim, "minimax_m3: dense_intermediate_size (the dense layers' MLP)")
      ->check(CLI::Range(1, 1 << 16));
  c->add_option("--shared-ffn", o->shared_ffn_dim, "minimax_m3: shared expert width (0 = none)")
      ->check(CLI::Range(0, 1 << 16));
  c->add_option("--index-dim", o->index_dim, "minimax_m3: sparse_index_dim")->check(CLI::Range(1, 1 << 12));
  c->add_option("--full-attn-interval", o->full_attn_interval,
                "minimax_text01: every N-th layer is softmax attention, the rest lightning (default 4; "
                "more than --layers = pure lightning)")
      ->check(CLI::Range(1, 1 << 16));
}

void apply_family_defaults(CLI::App* c, TinyOptions* o) {
  const TinyOptions d = tiny_defaults(o->arch);
  const std::pair<const char*, int TinyOptions::*> shape[] = {
      {"--layers", &TinyOptions::n_layers},     {"--experts", &TinyOptions::n_experts},
      {"--top-k", &TinyOptions::n_experts_active}, {"--vocab", &TinyOptions::vocab_size},
      {"--hidden", &TinyOptions::d_model},      {"--heads", &TinyOptions::n_heads},
      {"--kv-heads", &TinyOptions::n_kv_heads}, {"--head-dim", &TinyOptions::head_dim},
      {"--rotary-dim", &TinyOptions::rotary_dim}, {"--ffn", &TinyOptions::ffn_dim},
      {"--max-pos", &TinyOptions::max_position}, {"--msa-block", &TinyOptions::msa_block},
      {"--msa-topk", &TinyOptions::msa_topk},     {"--dense-ffn", &TinyOptions::dense_ffn_dim},
      {"--shared-ffn", &TinyOptions::shared_ffn_dim}, {"--index-dim", &TinyOptions::index_dim},
      {"--full-attn-interval", &TinyOptions::full_attn_interval}};
  for (const auto& [flag, field] : shape) {
    bool given = false;
    try {
      given = c->count(flag) > 0;
    } catch (const CLI::OptionNotFound&) {  // a command without this flag (train has no shape --vocab)
    }
    if (!given) o->*field = d.*field;
  }
}

}  // namespace mmx::cli
