// Speculative decoding: the speculator room (DESIGN data-flow step 7b). Each step, every sequence
// that decodes may carry up to K drafted tokens after its last sampled one; they run as one chunk
// asking K + 1 logit rows (one forward of the main model: verification costs one step), and the
// engine walks the rows through the sequence's own Sampler — row j draws the token the model gives
// there, exactly as plain decoding would (same rules, same RNG stream) — going on while that token
// equals draft j. Memory rolls the rejected tail back (PagedMemory::rollback; with lightning
// layers to a checkpoint, the rest re-fed).
//
// Why this is lossless: the drafts here are deterministic (the drafter names one token), so the
// proposal q is one token d for sure, and the standard rule — accept d with min(1, p(d)/q(d)),
// else draw from the normalised max(0, p - q) — becomes: d with probability p(d), else a draw
// from p without d. Drawing t ~ p and accepting iff t == d gives each token exactly p(t). With a
// draft drawn from a distribution q (not done yet: MTP heads draft greedily), the general rule is
// spec_accept() below. Greedy (temperature 0): exact match.
//
// Drafters: PromptLookupDrafter (n-gram lookup in the sequence's own tokens: llama.cpp's lookup
// decoding, vLLM's "ngram"); MTP heads will be the second.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mmx {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to k tokens likely to follow `tokens` (the prompt and what was generated); may be fewer or none.
  virtual std::vector<int32_t> draft(std::span<const int32_t> tokens, int64_t k) = 0;
};

// The tokens that followed the most recent earlier occurrence of the sequence's last n tokens,
// for the longest n from max_ngram down to min_ngram that occurs. Costs no model; pays off on
// text that repeats its context (code edits, quoting, structured output).
class PromptLookupDrafter final : public Drafter {
 public:
  explicit PromptLookupDrafter(int max_ngram = 3, int min_ngram = 1) : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  std::vector<int32_t> draft(std::span<const int32_t> tokens, int64_t k) override;

 private:
  int max_ngram_, min_ngram_;
};

// Counters, as vLLM names them (spec_decode_num_*): drafts (steps with >= 1 drafted token),
// drafted tokens, accepted tokens, and accepted tokens by draft position (0-based).
// Mean acceptance length = 1 + accepted / drafts.
struct SpecStats {
  int64_t drafts = 0, draft_tokens = 0, accepted = 0;
  std::vector<int64_t> accepted_per_pos;
  void count(int64_t n_drafted, int64_t n_accepted);
};

// The standard rule over explicit distributions (Leviathan et al. 2023; Chen et al. 2023): draft
// d was drawn from q; accept it with probability min(1, p(d)/q(d)) (u_accept in [0, 1)), else draw
// from the normalised max(0, p - q) (u_residual in [0, 1)). p, q: [n] probabilities. Returns the
// token; *accepted says which branch. The output is distributed as p whatever q is.
int32_t spec_accept(std::span<const double> p, std::span<const double> q, int32_t d, double u_accept,
                    double u_residual, bool* accepted);

}  // namespace mmx
