#include "base/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
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

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {} to sync it: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("cannot sync {}: {}", path, std::strerror(err));
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot write {}: {}", tmp, std::strerror(errno));
  const bool ok = (bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size()) &&
                  std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    fail("error writing {}: {}", tmp, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail("cannot rename {} to {}: {}", tmp, path, std::strerror(e));
  }
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  fsync_path(dir.empty() ? "." : dir.string());
}

}  // namespace mmx
