// mmx make-tiny: write a seeded random checkpoint in the real Hugging Face layout.
#include <cstdio>

#include "common.h"
#include "model/tiny.h"

namespace mmx::cli {

void add_make_tiny(CLI::App& app, Action& action) {
  auto o = std::make_shared<TinyOptions>();
  CLI::App* c = app.add_subcommand("make-tiny", "Write a seeded tiny random checkpoint (HF layout, real tensor names)");
  c->add_option("--arch", o->arch, "Model family: minimax_m2");
  c->add_option("-o,--out", o->out_dir, "Output directory")->required();
  c->add_option("--dtype", o->dtype, "Weight dtype: f32, bf16 or fp8 (e4m3 + block scales)")
      ->check(CLI::IsMember({"f32", "bf16", "fp8"}));
  c->add_option("--seed", o->seed, "Random seed");
  c->add_option("--fp8-block", o->fp8_block, "FP8 block size (weight_block_size [b, b]); real M2 uses 128")
      ->check(CLI::PositiveNumber);
  c->add_option("--layers", o->n_layers, "Number of layers")->check(CLI::Range(1, 64));
  c->add_option("--experts", o->n_experts, "Number of routed experts")->check(CLI::Range(1, 1024));
  c->add_option("--top-k", o->n_experts_active, "Experts per token")->check(CLI::Range(1, 1024));
  c->add_option("--vocab", o->vocab_size, "Vocabulary size")->check(CLI::Range(300, 1 << 20));
  c->callback([o, &action] {
    action = [o] {
      write_tiny_checkpoint(*o);
      std::fprintf(stderr, "wrote tiny %s checkpoint (%s, seed %llu) to %s\n", o->arch.c_str(),
                   o->dtype.c_str(), (unsigned long long)o->seed, o->out_dir.c_str());
    };
  });
}

}  // namespace mmx::cli
