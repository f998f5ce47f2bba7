// Whole small files in and out (configs, tokenizer and template files, JSON state): one place for
// the open / read / error wording. Weights are not read this way (base/mapped_file.h).
#pragma once

#include <string>

namespace mmx {

// The bytes of `path`; throws mmx::Error "cannot read the <what> file <path>" when it cannot.
std::string read_file(const std::string& path, const char* what = "");
// Replaces `path` with `bytes`; throws mmx::Error naming the path when it cannot.
void write_file(const std::string& path, const std::string& bytes);
// The same, durably and all-or-nothing: the bytes go to `path`.tmp, are fsync'ed, and the temp file
// is renamed over `path` (then the directory is fsync'ed). A kill at any point leaves either the old
// file or the new one at `path` (and at worst a stale `path`.tmp); never a mix.
void write_file_atomic(const std::string& path, const std::string& bytes);
// fsync of a file or directory already written (throws mmx::Error naming it when it cannot).
void fsync_path(const std::string& path);

}  // namespace mmx
