// mmx convert: a Hugging Face MiniMax-M2 checkpoint -> one GGUF file (llama.cpp's minimax-m2
// layout) in the chosen type or llama.cpp-style mix; formats/convert/gguf_convert.h has the type policy.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "common.h"
#include "formats/convert/gguf_convert.h"

namespace mmx::cli {

namespace {

struct ConvertOpts {
  std::string model, out, type = "f16";
};

void bytes_bar(uint64_t done, uint64_t total) {
  if (!isatty(fileno(stderr))) return;
  constexpr int kWidth = 30;
  const int fill = total ? int(double(done) / double(total) * kWidth) : kWidth;
  std::fprintf(stderr, "\rwriting  [%.*s%*s] %.2f / %.2f GiB", fill, "##############################",
               kWidth - fill, "", double(done) / (1 << 30), double(total) / (1 << 30));
  if (done >= total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace

void add_convert(CLI::App& app, Action& action) {
  auto o = std::make_shared<ConvertOpts>();
  CLI::App* c = app.add_subcommand(
      "convert", "Write a Hugging Face MiniMax-M2 checkpoint as a GGUF file (llama.cpp's minimax-m2 layout)");
  c->add_option("-m,--model", o->model, "Hugging Face checkpoint directory (config.json, tokenizer.json, safetensors)")
      ->required();
  c->add_option("-o,--out", o->out, "Output .gguf file (written as FILE.partial, renamed when complete)")->required();
  c->add_option("--type", o->type,
                "f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, or q4_k_m (llama.cpp's Q4_K_M mix: Q4_K with "
                "Q6_K output, attn_v and ffn_down in some layers); norms and the router stay F32")
      ->capture_default_str();
  c->callback([o, &action] {
    action = [o] {
      const GgufTarget t = parse_gguf_target(o->type);
      const auto t0 = std::chrono::steady_clock::now();
      const ConvertStats s = convert_to_gguf(o->model, o->out, t, bytes_bar);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("wrote %s: %lld tensors, %.3f B parameters, %.2f GiB (%.2f bits/weight), %s, %.1f s\n",
                  o->out.c_str(), (long long)s.tensors, double(s.params) / 1e9,
                  double(s.bytes_written) / (1 << 30), 8.0 * double(s.bytes_written) / double(s.params),
                  gguf_target_name(t), secs);
    };
  });
}

}  // namespace mmx::cli
