// Private: which implementation the dispatch files (ops.cpp, ops_*.cpp) call. Set once from
// MMX_OPS at startup, changed by set_backend() (ops.h). Not for model code.
#pragma once

#include "ops/ops.h"

namespace mmx::ops {
inline bool use_ref() { return backend() == Backend::kRef; }
}  // namespace mmx::ops
