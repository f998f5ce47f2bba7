#include "base/file_io.h"

#include <fstream>
#include <sstream>

#include "base/error.h"

namespace mmx {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read the {}{}file {}", what, *what ? " " : "", path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) fail("error reading {}", path);
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write {}", path);
  f << bytes;
  if (!f) fail("error writing {}", path);
}

}  // namespace mmx
