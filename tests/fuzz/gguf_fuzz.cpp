// libFuzzer target: the input bytes are a GGUF file. gguf::File::open (and TensorStore::open,
// which dispatches on the magic) must either throw mmx::Error or succeed; on success every
// supported tensor's bytes are read (ASan sees any escape from the mapping) and the Hugging
// Face views (config, tokenizer, tokenizer_config) are built, which may only throw mmx::Error.
// Any other exception, crash or sanitizer report is a finding. The input is written to a memfd
// and opened by name, so the real mmap path runs.
//
// MMX_FUZZ_SEED_DIR=dir: on start-up, also write a few valid seed files into dir.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/qblocks.h"
#include "formats/gguf_writer.h"
#include "formats/hf_view.h"
#include "memfd_input.h"
#include "formats/safetensors.h"

namespace {

MemfdInput g_input;

[[noreturn]] void finding(const char* what, const std::string& detail) {
  std::fprintf(stderr, "FINDING: %s: %s\n", what, detail.c_str());
  std::abort();
}

// A minimal minimax-m2 file: the metadata the views read and one tensor of every type.
void write_seed(const std::string& path, bool with_model_keys) {
  using mmx::DType;
  using mmx::gguf::ValueType;
  mmx::gguf::Writer w(path);
  if (with_model_keys) {
    w.set_string("general.architecture", "minimax-m2");
    w.set_u32("minimax-m2.block_count", 1);
    w.set_u32("minimax-m2.context_length", 64);
    w.set_u32("minimax-m2.embedding_length", 256);
    w.set_u32("minimax-m2.attention.head_count", 2);
    w.set_u32("minimax-m2.expert_count", 2);
    w.set_u32("minimax-m2.expert_used_count", 1);
    w.set_f32("minimax-m2.attention.layer_norm_rms_epsilon", 1e-6f);
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "minimax-m2");
    w.set_array("tokenizer.ggml.tokens", ValueType::kString, {"a", "b", "ab", "<s>"});
    w.set_array("tokenizer.ggml.token_type", ValueType::kI32, {1, 1, 1, 3});
    w.set_array("tokenizer.ggml.merges", ValueType::kString, {"a b"});
    w.set_u32("tokenizer.ggml.bos_token_id", 3);
    w.set_string("tokenizer.chat_template", "{{ messages[0].content }}");
  }
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (DType t : types) w.add_tensor(std::string("t.") + std::string(mmx::dtype_name(t)), t, {2, 256});
  w.add_tensor("token_embd.weight", DType::kF32, {4, 256});
  w.begin();
  std::vector<uint8_t> bytes(4 * 256 * 4, 0x11);
  for (DType t : types) w.write(bytes.data(), 2 * mmx::dtype_row_bytes(t, 256));
  w.write(bytes.data(), 4 * 256 * 4);
  w.finish();
}

void check_file(const mmx::gguf::File& f, size_t size) {
  for (const mmx::gguf::TensorInfo& t : f.tensors()) {
    if (!t.supported) continue;
    if (t.offset > size || t.size_bytes > size - t.offset) finding("tensor outside the file", t.name);
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < t.size_bytes; ++i) sink = sink ^ f.bytes()[t.offset + i];
    (void)sink;
  }
  auto view = [&](auto fn) {
    try {
      (void)fn(f);
    } catch (const mmx::Error&) {
    }
  };
  view([](const mmx::gguf::File& g) { return mmx::gguf::hf_config(g, {"token_embd.weight", "output.weight"}); });
  view(mmx::gguf::hf_tokenizer);
  view(mmx::gguf::hf_tokenizer_config);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  g_input.open("gguf_fuzz");
  if (const char* dir = std::getenv("MMX_FUZZ_SEED_DIR")) {
    write_seed(std::string(dir) + "/seed_model.gguf", true);
    write_seed(std::string(dir) + "/seed_bare.gguf", false);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_input.write(data, size);
  try {
    const auto f = mmx::gguf::File::open(g_input.path());
    check_file(*f, size);
    const mmx::TensorStore st = mmx::TensorStore::open(g_input.path());
    for (const std::string& name : st.names()) {
      try {
        const mmx::Tensor t = st.tensor(name);
        if (t.size_bytes() != st.info(name).size_bytes) finding("view size differs from info", name);
      } catch (const mmx::Error&) {
        if (st.info(name).dtype_supported) finding("tensor() threw for a servable tensor", name);
      }
    }
  } catch (const mmx::Error&) {
    // rejected cleanly: fine
  } catch (const std::exception& e) {
    finding("non-mmx exception", e.what());
  }
  return 0;
}
