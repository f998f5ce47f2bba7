// Seeded mutation test for formats/safetensors: truncate a valid file at every length, and corrupt
// its length prefix and header (and a sharded index) a few thousand times. Every result must
// either open — and then every tensor() view lies inside its file's mapping and reads back the
// file's bytes — or throw mmx::Error. A crash, a sanitizer report or any other exception type is
// a failure. Deterministic: std::mt19937 with fixed seeds.
//
// The libFuzzer target tests/fuzz/safetensors_fuzz.cpp explores the same property without a
// fixed budget; this test is the always-on, CI-sized version.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;

class SafetensorsMutationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("mmx_stm_{}_{}", getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// Overwrites in place and then sets the size: truncating to zero first (std::ofstream) makes
// ext4 flush on close (auto_da_alloc), ~3 ms per write, which would dominate this test.
void write_bytes(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  const bool ok = ::pwrite(fd, bytes.data(), bytes.size(), 0) == ssize_t(bytes.size()) &&
                  ::ftruncate(fd, off_t(bytes.size())) == 0;
  ::close(fd);
  ASSERT_TRUE(ok) << path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A small valid checkpoint: several dtypes, a scalar, a zero-size tensor, a 4-D one, metadata.
std::string make_valid_file(const std::string& path) {
  std::mt19937 rng(7);
  SafetensorsWriter w;
  auto add = [&](const std::string& name, DType t, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<uint8_t> bytes(size_t(n) * dtype_size(t));
    for (auto& b : bytes) b = uint8_t(rng());
    w.add(name, t, std::move(shape), bytes.data(), bytes.size());
  };
  add("model.embed_tokens.weight", DType::kBF16, {4, 3});
  add("model.norm.weight", DType::kF32, {3});
  add("ids", DType::kI64, {2});
  add("scale", DType::kF8E4M3, {0, 5});
  add("w4", DType::kU8, {2, 1, 2, 1});
  add("s", DType::kI32, {});
  add("h", DType::kF16, {2, 2});
  w.set_metadata("format", "pt");
  w.write(path);
  return read_file(path);
}

enum class Outcome { kOpened, kRejected };

// Every view must lie inside the mapping of its shard and hold exactly the file's bytes there.
void check_views(const TensorStore& st, const std::vector<std::string>& file_bytes) {
  for (const std::string& name : st.names()) {
    const TensorInfo& ti = st.info(name);
    ASSERT_GE(ti.file_index, 0);
    ASSERT_LT(size_t(ti.file_index), file_bytes.size());
    const std::span<const uint8_t> map = st.mapped_file(ti.file_index);
    ASSERT_EQ(map.size(), file_bytes[size_t(ti.file_index)].size());
    ASSERT_LE(ti.offset, map.size()) << name;
    ASSERT_LE(ti.size_bytes, map.size() - ti.offset) << name;
    Tensor t;
    try {
      t = st.tensor(name);
    } catch (const Error&) {  // unsupported dtype or > 4 dims: allowed, if the info says so
      EXPECT_TRUE(!ti.dtype_supported || ti.shape.size() > size_t(kMaxDims)) << name;
      continue;
    }
    const auto* p = static_cast<const uint8_t*>(t.data);
    ASSERT_GE(p, map.data()) << name;
    ASSERT_EQ(t.size_bytes(), ti.size_bytes) << name;
    ASSERT_LE(p + t.size_bytes(), map.data() + map.size()) << name;
    const char* want = file_bytes[size_t(ti.file_index)].data() + ti.offset;
    ASSERT_EQ(std::memcmp(p, want, t.size_bytes()), 0) << name;
  }
}

// Opens `open_path`; file_bytes are the shards' contents by file_index order (for check_views).
Outcome try_open(const std::string& open_path, const std::vector<std::string>& file_bytes) {
  try {
    const TensorStore st = TensorStore::open(open_path);
    check_views(st, file_bytes);
    return Outcome::kOpened;
  } catch (const Error&) {
    return Outcome::kRejected;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-mmx exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << "non-std exception";
  }
  return Outcome::kRejected;
}

Outcome open_bytes(const std::string& file, const std::string& bytes) {
  write_bytes(file, bytes);
  return try_open(file, {bytes});
}

uint64_t header_length(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  return n;
}

void set_header_length(std::string* bytes, uint64_t n) {
  for (int i = 0; i < 8; ++i) (*bytes)[size_t(i)] = char(uint8_t(n >> (8 * i)));
}

// One random edit of the length prefix or the header text. Chosen to reach deep into the
// parser: JSON punctuation and digits are more likely to survive parsing than random bytes.
void mutate(std::string* bytes, std::mt19937& rng) {
  static const std::string kInteresting = std::string("{}[]\":,-0123456789.eE \\u") + '\0' + '\xff';
  const uint64_t n = std::min<uint64_t>(header_length(*bytes), bytes->size() - 8);
  auto pick = [&](uint64_t lo, uint64_t hi) {  // [lo, hi]
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng);
  };
  const size_t pos = size_t(8 + (n ? pick(0, n - 1) : 0));
  switch (pick(0, 7)) {
    case 0:  // flip one bit of the header
      (*bytes)[pos] = char((*bytes)[pos] ^ (1 << pick(0, 7)));
      break;
    case 1:  // overwrite a header byte with a JSON-ish character
      (*bytes)[pos] = kInteresting[size_t(pick(0, kInteresting.size() - 1))];
      break;
    case 2:  // overwrite a header byte with anything
      (*bytes)[pos] = char(pick(0, 255));
      break;
    case 3:  // nudge the length prefix
      set_header_length(bytes, header_length(*bytes) + pick(0, 16) - 8);
      break;
    case 4:  // flip a bit of the length prefix
      (*bytes)[size_t(pick(0, 7))] ^= char(1 << pick(0, 7));
      break;
    case 5:  // make a number in the header longer (overflow paths), keeping the prefix consistent
      if (std::isdigit(uint8_t((*bytes)[pos]))) {
        const size_t k = size_t(pick(1, 20));
        bytes->insert(pos, std::string(k, '9'));
        set_header_length(bytes, n + k);
      }
      break;
    case 6:  // delete a header byte, keeping the prefix consistent
      bytes->erase(pos, 1);
      set_header_length(bytes, n ? n - 1 : 0);
      break;
    default:  // duplicate a header slice in place, keeping the prefix consistent
    {
      const size_t len = size_t(pick(1, 24));
      const std::string slice = bytes->substr(pos, len);
      bytes->insert(pos, slice);
      set_header_length(bytes, n + slice.size());
      break;
    }
  }
}

TEST_F(SafetensorsMutationTest, EveryTruncation) {
  const std::string file = path("t.safetensors");
  const std::string valid = make_valid_file(file);
  ASSERT_EQ(open_bytes(file, valid), Outcome::kOpened);
  int n_opened = 0;
  for (size_t len = 0; len < valid.size(); ++len) {
    SCOPED_TRACE(len);
    n_opened += open_bytes(file, valid.substr(0, len)) == Outcome::kOpened;
  }
  // Cutting into the data section must be caught ("truncated?"): no prefix opens.
  EXPECT_EQ(n_opened, 0);
}

TEST_F(SafetensorsMutationTest, HeaderAndPrefixMutations) {
  const std::string file = path("m.safetensors");
  const std::string valid = make_valid_file(file);
  std::mt19937 rng(20240601);
  int n_opened = 0, n_rejected = 0;
  for (int iter = 0; iter < 8000; ++iter) {
    SCOPED_TRACE(iter);
    std::string bytes = valid;
    const int n_edits = 1 + int(rng() % 3);
    for (int e = 0; e < n_edits && bytes.size() > 8; ++e) mutate(&bytes, rng);
    (open_bytes(file, bytes) == Outcome::kOpened ? n_opened : n_rejected)++;
    if (HasFatalFailure()) return;
  }
  // The mutations are only meaningful if some survive parsing and some do not.
  EXPECT_GT(n_opened, 200);
  EXPECT_GT(n_rejected, 2000);
  std::printf("header mutations: %d opened, %d rejected\n", n_opened, n_rejected);
}

TEST_F(SafetensorsMutationTest, IndexMutations) {
  const std::string shard1 = make_valid_file(path("s1.safetensors"));
  SafetensorsWriter w;
  const uint8_t x[2] = {1, 2};
  w.add("x", DType::kU8, {2}, x, sizeof x);
  w.write(path("s2.safetensors"));
  const std::string shard2 = read_file(path("s2.safetensors"));
  const std::string valid_index =
      R"({"metadata": {"total_size": 1}, "weight_map": {"ids": "s1.safetensors", )"
      R"("model.norm.weight": "s1.safetensors", "x": "s2.safetensors", "s": "s1.safetensors"}})";
  const std::string index = path("model.safetensors.index.json");
  std::mt19937 rng(99);
  static const std::string kInteresting = "{}[]\":,./\\12s ";
  int n_opened = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    SCOPED_TRACE(iter);
    std::string text = valid_index;
    for (int e = 0, n_edits = 1 + int(rng() % 2); e < n_edits && !text.empty(); ++e) {
      const size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[pos] = kInteresting[rng() % kInteresting.size()];
          break;
        case 1:
          text.erase(pos, 1);
          break;
        default:
          text[pos] = char(rng());
          break;
      }
    }
    write_bytes(index, text);
    // Which shard gets file_index 0 depends on the (mutated) weight_map order, so the expected
    // bytes per file_index are looked up by file_of().
    try {
      const TensorStore st = TensorStore::open(dir_.string());
      std::vector<std::string> by_index;
      for (const std::string& name : st.names()) {
        const size_t i = size_t(st.info(name).file_index);
        if (i >= by_index.size()) by_index.resize(i + 1);
        by_index[i] = st.file_of(name) == path("s1.safetensors") ? shard1 : shard2;
      }
      for (auto& b : by_index)
        if (b.empty()) b = shard1;  // index unused by any tensor; never consulted
      check_views(st, by_index);
      ++n_opened;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "non-mmx exception: " << e.what();
    }
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(n_opened, 10);
  std::printf("index mutations: %d opened\n", n_opened);
}

}  // namespace
}  // namespace mmx
