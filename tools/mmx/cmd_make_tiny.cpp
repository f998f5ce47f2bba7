// mmx make-tiny: write a seeded random checkpoint in the real Hugging Face layout.
#include <cstdio>

#include "common.h"
#include "tiny/tiny.h"

namespace mmx::cli {

void add_make_tiny(CLI::App& app, Action& action) {
  auto o = std::make_shared<TinyOptions>();
  CLI::App* c = app.add_subcommand("make-tiny", "Write a seeded tiny random checkpoint (HF layout, real tensor names)");
  c->add_option("--arch", o->arch,
                 "Model family: minimax_m2 (default), minimax_text01 or minimax_m1 (lightning hybrid; "
                 "tiny defaults 8 layers with softmax at 3 and 7, 4 heads, f32/f16/bf16 only), "
                 "minimax_m3 (MSA; tiny defaults 4 layers, layer 0 dense, MSA block 4 top-3; "
                 "f32/f16/bf16/mxfp8)")
      ->check(CLI::IsMember({"minimax_m2", "minimax_text01", "minimax_m1", "minimax_m3"}));
  c->add_option("-o,--out", o->out_dir, "Output directory")->required();
  c->add_option("--dtype", o->dtype,
                 "Weight dtype: f32, f16, bf16, fp8 (M2: e4m3 + block scales) or mxfp8 (M3: e4m3 + "
                 "1x32 E8M0 scales)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "fp8", "mxfp8"}));
  c->add_option("--seed", o->seed, "Random seed");
  c->add_option("--fp8-block", o->fp8_block, "FP8 block size (weight_block_size [b, b]); real M2 uses 128")
      ->check(CLI::PositiveNumber);
  add_shape_options(c, o.get());
  c->add_flag("--synthetic", o->synthetic,
              "Fast approximate random values (for benchmark-sized checkpoints; not for numerics tests)");
  c->add_flag("--hf-keys", o->hf_keys,
              "minimax_text01/minimax_m1: write the transformers -hf config spelling (layer_types, "
              "*_alpha_factor/*_beta_factor) instead of attn_type_list/layernorm_*_alpha/postnorm");
  auto m2_slice = std::make_shared<bool>(false);
  c->add_flag("--m2-slice", *m2_slice,
              "Real MiniMax-M2 widths (hidden 3072, 48/8 heads, 256 experts x 1536, top-8, vocab 200064), "
              "fp8 128x128 with synthetic values; --layers (default 2), --experts (default 256) and "
              "--dtype (default fp8) may be given (~3.6 GB a layer at 256 fp8 experts)");
  c->callback([o, m2_slice, c, &action] {
    if (tiny_is_text01(o->arch) || o->arch == "minimax_m3") {
      apply_family_defaults(c, o.get());
      if (*m2_slice) throw CLI::ValidationError("--m2-slice", "only for --arch minimax_m2");
      if (o->hf_keys && !tiny_is_text01(o->arch))
        throw CLI::ValidationError("--hf-keys", "only for --arch minimax_text01 / minimax_m1");
    } else if (o->hf_keys) {
      throw CLI::ValidationError("--hf-keys", "only for --arch minimax_text01 / minimax_m1");
    }
    if (*m2_slice) {
      const int layers = c->count("--layers") ? o->n_layers : 2;
      TinyOptions& t = *o;
      t.d_model = 3072, t.n_heads = 48, t.n_kv_heads = 8, t.head_dim = 128, t.rotary_dim = 64;
      t.ffn_dim = 1536, t.n_experts = c->count("--experts") ? o->n_experts : 256, t.n_experts_active = 8;
      t.vocab_size = 200064, t.max_position = 196608, t.n_layers = layers, t.fp8_block = 128;
      if (!c->count("--dtype")) t.dtype = "fp8";
      t.synthetic = true;
    }
    action = [o] {
      write_tiny_checkpoint(*o);
      std::fprintf(stderr, "wrote tiny %s checkpoint (%s, seed %llu) to %s\n", o->arch.c_str(),
                   o->dtype.c_str(), (unsigned long long)o->seed, o->out_dir.c_str());
    };
  });
}

}  // namespace mmx::cli
