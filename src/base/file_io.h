// Whole small files in and out (configs, tokenizer and template files, JSON state): one place for
// the open / read / error wording. Weights are not read this way (base/mapped_file.h).
#pragma once

#include <string>

namespace mmx {

// The bytes of `path`; throws mmx::Error "cannot read the <what> file <path>" when it cannot.
std::string read_file(const std::string& path, const char* what = "");
// Replaces `path` with `bytes`; throws mmx::Error naming the path when it cannot.
void write_file(const std::string& path, const std::string& bytes);

}  // namespace mmx
