// Per-thread scratch vectors keep their capacity between calls, so a hot loop allocates nothing —
// but a long-lived thread (an HTTP worker) would then keep the largest input it ever saw, for
// good (hardening issue, finding 4: RSS grew by each huge prompt's buffers, per thread).
// release_if_large() gives a vector's memory back once a call is done with it.
#pragma once

#include <cstddef>

namespace mmx {

template <class V>
inline void release_if_large(V& v, size_t keep_bytes = size_t(1) << 20) {
  if (v.capacity() * sizeof(typename V::value_type) > keep_bytes) V().swap(v);
}

}  // namespace mmx
