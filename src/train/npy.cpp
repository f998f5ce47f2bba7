#include "train/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace mmx::train {

namespace {

// The value of 'key': in the header dict, as raw text up to the next top-level ',' or '}'.
std::string dict_value(const std::string& h, const std::string& key, const std::string& path) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) fail("{}: .npy header has no '{}'", path, key);
  size_t i = h.find(':', k);
  if (i == std::string::npos) fail("{}: malformed .npy header", path);
  ++i;
  int paren = 0;
  size_t j = i;
  for (; j < h.size(); ++j) {
    if (h[j] == '(') ++paren;
    if (h[j] == ')') --paren;
    if (paren == 0 && (h[j] == ',' || h[j] == '}')) break;
  }
  std::string v = h.substr(i, j - i);
  while (!v.empty() && v.front() == ' ') v.erase(v.begin());
  while (!v.empty() && v.back() == ' ') v.pop_back();
  return v;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read {}", path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string b = ss.str();
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0) fail("{}: not a .npy file", path);
  const int major = uint8_t(b[6]);
  size_t hlen = 0, off = 0;
  if (major == 1) {
    hlen = uint8_t(b[8]) | size_t(uint8_t(b[9])) << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) fail("{}: truncated .npy header", path);
    hlen = uint8_t(b[8]) | size_t(uint8_t(b[9])) << 8 | size_t(uint8_t(b[10])) << 16 | size_t(uint8_t(b[11])) << 24;
    off = 12;
  } else {
    fail("{}: unsupported .npy version {}", path, major);
  }
  if (hlen > b.size() - off) fail("{}: truncated .npy header", path);
  const std::string h = b.substr(off, hlen);
  const std::string descr = dict_value(h, "descr", path), order = dict_value(h, "fortran_order", path);
  if (order != "False") fail("{}: Fortran-order arrays are not supported", path);
  int width = 0;
  bool is_signed = true;
  if (descr == "'<i4'") width = 4;
  else if (descr == "'<i8'") width = 8;
  else if (descr == "'|u1'" || descr == "'|b1'") width = 1, is_signed = false;
  else fail("{}: dtype {} is not supported (int32, int64, uint8 or bool)", path, descr);
  NpyArray a;
  std::string shape = dict_value(h, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') fail("{}: malformed shape {}", path, shape);
  std::stringstream sh(shape.substr(1, shape.size() - 2));
  std::string item;
  int64_t numel = 1;
  while (std::getline(sh, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    int64_t v = 0;
    try {
      v = std::stoll(item);
    } catch (const std::exception&) {
      fail("{}: malformed shape {}", path, shape);
    }
    if (v < 0 || v > (int64_t(1) << 40) || (v > 0 && numel > (int64_t(1) << 40) / v)) fail("{}: bad shape {}", path, shape);
    a.shape.push_back(v);
    numel *= v;
  }
  const size_t data = off + hlen;
  if (uint64_t(numel) * uint64_t(width) != b.size() - data)
    fail("{}: {} data bytes, the header implies {}", path, b.size() - data, uint64_t(numel) * uint64_t(width));
  a.values.resize(size_t(numel));
  for (int64_t i = 0; i < numel; ++i) {
    const char* p = b.data() + data + size_t(i) * size_t(width);
    if (width == 4) {
      int32_t v;
      std::memcpy(&v, p, 4);
      a.values[size_t(i)] = v;
    } else if (width == 8) {
      int64_t v;
      std::memcpy(&v, p, 8);
      a.values[size_t(i)] = v;
    } else {
      a.values[size_t(i)] = is_signed ? int8_t(*p) : uint8_t(*p);
    }
  }
  return a;
}

}  // namespace mmx::train
