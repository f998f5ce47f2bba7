// The KV-cache storage flags of the commands that run a model (mmx generate, serve, bench model):
// --kv-dtype (K/V pages) and --index-key-dtype (M3's MSA index-key pages). One helper adds both,
// so the words and the defaults are said once.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "base/dtype.h"

namespace mmx::cli {

struct CacheFlags {
  std::string kv = "bf16";  // f32 | bf16
  std::string ik = "auto";  // auto (= kv) | f32 | bf16 | f8
  DType kv_dtype() const;
  std::optional<DType> ik_dtype() const;  // none: as the K/V pages
  std::string describe() const;           // "bf16 K/V, f8 index keys" (start-up lines)
};

void add_cache_flags(CLI::App* c, CacheFlags* f);

}  // namespace mmx::cli
