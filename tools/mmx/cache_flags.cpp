#include "cache_flags.h"

namespace mmx::cli {

DType CacheFlags::kv_dtype() const { return kv == "f32" ? DType::kF32 : DType::kBF16; }

std::optional<DType> CacheFlags::ik_dtype() const {
  if (ik == "f32") return DType::kF32;
  if (ik == "bf16") return DType::kBF16;
  if (ik == "f8") return DType::kF8E4M3;
  return std::nullopt;
}

std::string CacheFlags::describe() const {
  return kv + " K/V" + (ik == "auto" ? std::string() : ", " + ik + " index keys");
}

void add_cache_flags(CLI::App* c, CacheFlags* f) {
  c->add_option("--kv-dtype", f->kv,
                "K/V page storage: bf16 (half the bytes of f32, so an auto-sized pool holds twice "
                "the tokens; K/V rounded to bf16) or f32 (exact K/V)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16"}));
  c->add_option("--index-key-dtype", f->ik,
                "M3 MSA index-key pages: auto (as --kv-dtype), f32, bf16, or f8 (E4M3, as the release "
                "stores them: 128 B a token, a quarter of f32; the indexer may then rank blocks with "
                "close scores differently). Other families keep no index keys")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f8"}));
}

}  // namespace mmx::cli
