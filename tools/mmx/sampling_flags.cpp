#include "sampling_flags.h"

#include <random>

namespace mmx::cli {

void SamplingFlags::apply(SamplingParams& sp) const {
  if (temperature) sp.temperature = *temperature;
  if (top_k) sp.top_k = *top_k;
  if (top_p) sp.top_p = *top_p;
  if (min_p) sp.min_p = *min_p;
  if (presence) sp.presence_penalty = *presence;
  if (frequency) sp.frequency_penalty = *frequency;
  if (repetition) sp.repetition_penalty = *repetition;
  sp.seed = seed ? *seed : std::random_device{}();
}

void add_sampling_flags(CLI::App* c, SamplingFlags* f, const SamplingFlagsHelp& help) {
  c->add_option("--temp", f->temperature, help.temperature);
  c->add_option("--top-k", f->top_k, "Top-k (0 = off)");
  c->add_option("--top-p", f->top_p, "Top-p nucleus mass (1 = off)");
  c->add_option("--min-p", f->min_p, "Min-p relative to the most likely token (0 = off)");
  if (help.penalties) {
    c->add_option("--repeat-penalty", f->repetition,
                  "Repetition penalty over prompt and output ids: positive logits / r, negative x r (1 = off)");
    c->add_option("--presence-penalty", f->presence,
                  "Subtracted from the logit of every id already generated (0 = off)");
    c->add_option("--frequency-penalty", f->frequency, "Subtracted once per earlier occurrence in the output (0 = off)");
  }
  c->add_option("--seed", f->seed, help.seed);
}

}  // namespace mmx::cli
