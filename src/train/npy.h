// A bounds-checked reader of NumPy .npy files (format 1.0/2.0/3.0), for the batches and masks that
// `mmx grad` and the reference checks exchange. Integer and bool arrays only: <i4, <i8, |u1, |b1,
// C order. Anything else is refused with a message naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mmx::train {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;  // widened to int64, C order
};

NpyArray read_npy(const std::string& path);

}  // namespace mmx::train
