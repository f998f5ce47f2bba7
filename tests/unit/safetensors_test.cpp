// Tests for formats/safetensors: writer/reader round trips, the exact bytes the writer produces,
// directory and sharded-index layouts, and one case per corruption the reader must reject with
// an mmx::Error naming the file (and tensor). Randomized corruption is in
// safetensors_mutation_test.cpp.
//
// Files under test are written here by hand (raw_file) as well as by SafetensorsWriter, so the
// reader is never checked only against its own writer.
#include "base/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace mmx {
namespace {

namespace fs = std::filesystem;

// ---- helpers ----

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           fmt::format("mmx_st_{}_{}_{}", getpid(), info->test_suite_name(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char(uint8_t(v >> (8 * i)));
  return s;
}

// A safetensors file written by hand: length prefix, header text as given, data_size zero bytes.
void raw_file(const std::string& path, const std::string& header, size_t data_size) {
  write_bytes(path, le64(header.size()) + header + std::string(data_size, '\0'));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs f, expects an mmx::Error whose message contains every string in `want`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& want) {
  try {
    f();
    ADD_FAILURE() << "no mmx::Error thrown; wanted one mentioning '" << want.front() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& w : want) {
      EXPECT_NE(msg.find(w), std::string::npos) << "message lacks '" << w << "': " << msg;
    }
  }
}

void expect_open_error(const std::string& path, std::vector<std::string> want) {
  SCOPED_TRACE(path);
  expect_error([&] { TensorStore::open(path); }, want);
}

std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return {p, p + t.size_bytes()};
}

constexpr DType kAllDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3,
                                DType::kI32, DType::kI64, DType::kU8};

// ---- round trips ----

TEST_F(SafetensorsTest, RoundTripEveryDtype) {
  struct Want {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Want> want;
  uint32_t seed = 1;
  for (DType t : kAllDtypes) {
    // A 2-D, a scalar, a 4-D and a zero-size tensor of every dtype.
    const std::vector<std::vector<int64_t>> shapes = {{3, 5}, {}, {2, 1, 3, 2}, {0, 7}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      int64_t numel = 1;
      for (int64_t d : shapes[i]) numel *= d;
      want.push_back({fmt::format("{}.{}", dtype_name(t), i), t, shapes[i],
                      random_bytes(size_t(numel) * dtype_size(t), seed++)});
    }
  }
  SafetensorsWriter w;
  for (const Want& x : want) w.add(x.name, x.dtype, x.shape, x.bytes.data(), x.bytes.size());
  w.set_metadata("format", "pt");
  w.set_metadata("note", "ünïcode ok");
  const std::string file = path("all.safetensors");
  w.write(file);

  const TensorStore st = TensorStore::open(file);
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.metadata().at("note"), "ünïcode ok");
  uint64_t total = 0;
  for (const Want& x : want) {
    SCOPED_TRACE(x.name);
    ASSERT_TRUE(st.has(x.name));
    const TensorInfo& ti = st.info(x.name);
    EXPECT_EQ(ti.name, x.name);
    EXPECT_EQ(ti.dtype, x.dtype);
    EXPECT_TRUE(ti.dtype_supported);
    EXPECT_EQ(ti.dtype_str, dtype_name(x.dtype));
    EXPECT_EQ(ti.shape, x.shape);
    EXPECT_EQ(ti.size_bytes, x.bytes.size());
    EXPECT_EQ(ti.offset % dtype_size(x.dtype), 0u) << "writer must keep tensors aligned";
    EXPECT_EQ(st.file_of(x.name), file);
    const Tensor t = st.tensor(x.name);
    EXPECT_EQ(t.dtype, x.dtype);
    ASSERT_EQ(t.ndim, int(x.shape.size()));
    for (int i = 0; i < t.ndim; ++i) EXPECT_EQ(t.shape[size_t(i)], x.shape[size_t(i)]);
    EXPECT_FALSE(t.empty());  // even zero-size views point into the mapping
    EXPECT_EQ(tensor_bytes(t), x.bytes);
    // The view really is the mapping at info().offset.
    EXPECT_EQ(static_cast<const uint8_t*>(t.data), st.mapped_file(0).data() + ti.offset);
    total += x.bytes.size();
  }
  EXPECT_EQ(st.total_bytes(), total);
  std::vector<std::string> names = st.names();
  EXPECT_EQ(names.size(), want.size());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST_F(SafetensorsTest, WriterProducesExactReferenceBytes) {
  const float a[2] = {1.0f, -2.0f};
  const uint8_t b[3] = {7, 8, 9};
  SafetensorsWriter w;
  w.add("a", DType::kF32, {2}, a, sizeof a);
  w.add("b", DType::kU8, {3, 1}, b, sizeof b);
  w.set_metadata("k", "v");
  const std::string file = path("exact.safetensors");
  w.write(file);

  std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3,1],"data_offsets":[8,11]}})";
  header.append((8 - header.size() % 8) % 8, ' ');  // the reference pads to a multiple of 8
  std::string want = le64(header.size()) + header;
  want.append(reinterpret_cast<const char*>(a), sizeof a);
  want.append(reinterpret_cast<const char*>(b), sizeof b);
  EXPECT_EQ(read_file(file), want);
  EXPECT_EQ((8 + header.size()) % 8, 0u);
  EXPECT_FALSE(fs::exists(file + ".tmp"));
}

// Added small-element first, written large-element first so the F32 stays 4-byte aligned.
TEST_F(SafetensorsTest, WriterAlignsByElementSize) {
  const uint8_t b[3] = {7, 8, 9};
  const float a[1] = {0.5f};
  const uint16_t h[1] = {0x3c00};
  SafetensorsWriter w;
  w.add("b", DType::kU8, {3}, b, sizeof b);
  w.add("h", DType::kF16, {1}, h, sizeof h);
  w.add("a", DType::kF32, {1}, a, sizeof a);
  const std::string file = path("align.safetensors");
  w.write(file);

  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("h":{"dtype":"F16","shape":[1],"data_offsets":[4,6]},)"
                       R"("b":{"dtype":"U8","shape":[3],"data_offsets":[6,9]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string want = le64(header.size()) + header;
  want.append(reinterpret_cast<const char*>(a), sizeof a);
  want.append(reinterpret_cast<const char*>(h), sizeof h);
  want.append(reinterpret_cast<const char*>(b), sizeof b);
  EXPECT_EQ(read_file(file), want);
}

TEST_F(SafetensorsTest, EmptyWriterWritesEmptyHeader) {
  const std::string file = path("empty.safetensors");
  SafetensorsWriter().write(file);
  EXPECT_EQ(read_file(file), le64(8) + "{}      ");
  const TensorStore st = TensorStore::open(file);
  EXPECT_TRUE(st.names().empty());
  EXPECT_EQ(st.total_bytes(), 0u);
}

// A file not written by our writer: unsorted offsets, a gap, a zero-size tensor inside another
// tensor's range, trailing spaces, extra unknown fields.
TEST_F(SafetensorsTest, ReadsHandMadeFile) {
  const std::string header =
      R"({"z": {"dtype": "I32", "shape": [2], "data_offsets": [8, 16], "extra": [1]},)"
      R"( "e": {"dtype": "BF16", "shape": [0, 4], "data_offsets": [10, 10]},)"
      R"( "a": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]}}        )";
  std::string data(20, '\0');
  const int32_t z[2] = {-5, 123456};
  std::memcpy(&data[8], z, sizeof z);
  data[0] = 'x', data[1] = 'y', data[2] = 'z';
  const std::string file = path("hand.safetensors");
  write_bytes(file, le64(header.size()) + header + data);

  const TensorStore st = TensorStore::open(file);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "e", "z"}));
  EXPECT_EQ(st.info("z").offset, 8 + header.size() + 8);
  // This header is not padded, so "z" is not 4-byte aligned in memory: read it with memcpy.
  int32_t got[2];
  std::memcpy(got, st.tensor("z").data, sizeof got);
  EXPECT_EQ(got[0], -5);
  EXPECT_EQ(got[1], 123456);
  EXPECT_EQ(std::string(st.tensor("a").ptr<char>(), 3), "xyz");
  EXPECT_EQ(st.tensor("e").numel(), 0);
  EXPECT_EQ(st.info("e").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(st.metadata().empty());
}

// ---- tensor-level errors ----

TEST_F(SafetensorsTest, UnsupportedDtypeListedButNotServed) {
  const std::string file = path("bool.safetensors");
  raw_file(file,
           R"({"mask":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]},)"
           R"("d":{"dtype":"F64","shape":[1],"data_offsets":[8,16]},)"
           R"("e5":{"dtype":"F8_E5M2","shape":[2],"data_offsets":[4,6]},)"
           R"("f4":{"dtype":"F4","shape":[4],"data_offsets":[6,8]},)"
           R"("w":{"dtype":"F32","shape":[1],"data_offsets":[16,20]}})",
           20);
  const TensorStore st = TensorStore::open(file);
  EXPECT_EQ(st.names(), (std::vector<std::string>{"d", "e5", "f4", "mask", "w"}));
  EXPECT_FALSE(st.info("mask").dtype_supported);
  EXPECT_EQ(st.info("mask").dtype_str, "BOOL");
  EXPECT_EQ(st.info("d").size_bytes, 8u);
  EXPECT_EQ(st.info("f4").size_bytes, 2u);
  expect_error([&] { st.tensor("mask"); }, {file, "'mask'", "BOOL", "not supported"});
  expect_error([&] { st.tensor("e5"); }, {file, "'e5'", "F8_E5M2"});
  EXPECT_EQ(st.tensor("w").numel(), 1);
}

TEST_F(SafetensorsTest, MoreThanFourDimsRejectedOnTensor) {
  const std::string file = path("5d.safetensors");
  raw_file(file, R"({"t5":{"dtype":"U8","shape":[1,1,1,1,2],"data_offsets":[0,2]}})", 2);
  const TensorStore st = TensorStore::open(file);
  EXPECT_EQ(st.info("t5").shape.size(), 5u);
  expect_error([&] { st.tensor("t5"); }, {file, "'t5'", "5 dims"});
}

TEST_F(SafetensorsTest, MissingTensorNamesTensorAndCheckpoint) {
  const std::string file = path("one.safetensors");
  raw_file(file, R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 1);
  const TensorStore st = TensorStore::open(file);
  EXPECT_FALSE(st.has("nope"));
  expect_error([&] { st.info("nope"); }, {"'nope'", file});
  expect_error([&] { st.tensor("nope"); }, {"'nope'", file});
  expect_error([&] { st.file_of("nope"); }, {"'nope'", file});
}

// ---- corrupt files ----

struct Corruption {
  const char* label;
  std::string header;
  size_t data_size;
  std::vector<std::string> want;  // substrings of the message besides the file name
};

TEST_F(SafetensorsTest, EveryHeaderCorruptionIsAnError) {
  const std::string ok_entry = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  // clang-format off
  const std::vector<Corruption> cases = {
      {"not json", R"({"w": )", 0, {"not valid JSON"}},
      {"bad utf8", "{\"w\xff\":{}}", 0, {"not valid JSON"}},
      {"trailing garbage", R"({} x)", 0, {"not valid JSON"}},
      {"root array", R"([1, 2])", 0, {"array, not an object"}},
      {"root string", R"("x")", 0, {"not an object"}},
      {"entry number", R"({"w": 5})", 0, {"'w'", "not an object"}},
      {"no dtype", R"({"w":{"shape":[2],"data_offsets":[0,8]}})", 8, {"'w'", "missing \"dtype\""}},
      {"no shape", R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8, {"'w'", "missing \"shape\""}},
      {"no offsets", R"({"w":{"dtype":"F32","shape":[2]}})", 8, {"'w'", "missing \"data_offsets\""}},
      {"dtype number", R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8,
       {"'w'", "\"dtype\" is not a string"}},
      {"shape string", R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", 8,
       {"'w'", "\"shape\" is not a list"}},
      {"unknown dtype", R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", 8,
       {"'w'", "unknown dtype \"F33\""}},
      {"lowercase dtype", R"({"w":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})", 8,
       {"'w'", "unknown dtype \"f32\""}},
      {"negative dim", R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
       {"'w'", "shape entry -2"}},
      {"fractional dim", R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8,
       {"'w'", "shape entry 2.5"}},
      {"float dim", R"({"w":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8,
       {"'w'", "shape entry 2.0"}},
      {"dim 2^63", R"({"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8]}})", 8,
       {"'w'", "shape entry 9223372036854775808"}},
      {"dim 2^64", R"({"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,8]}})",
       8, {"'w'", "shape entry"}},
      {"numel overflow", R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       8, {"'w'", "overflows"}},
      {"overflow before a zero",
       R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 8,
       {"'w'", "overflows"}},
      {"bytes overflow",
       R"({"w":{"dtype":"I64","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8,
       {"'w'", "size in bytes overflows"}},
      {"sub-byte remainder", R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 8,
       {"'w'", "not a whole number of bytes"}},
      {"one offset", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8,
       {"'w'", "\"data_offsets\" must be [begin, end]"}},
      {"three offsets", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", 8,
       {"'w'", "\"data_offsets\""}},
      {"offsets object", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":{"a":1}}})", 8,
       {"'w'", "\"data_offsets\""}},
      {"negative offset", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8,
       {"'w'", "non-negative"}},
      {"float offset", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", 8,
       {"'w'", "\"data_offsets\""}},
      {"begin > end", R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8,
       {"'w'", "begin > end"}},
      {"size mismatch", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8,
       {"'w'", "span 4 bytes", "needs 8"}},
      {"past the end", "{\"w\":{" + ok_entry + "}}", 4, {"'w'", "past the data section", "truncated?"}},
      {"far past the end",
       R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[18446744073709551613,18446744073709551615]}})",
       4, {"'w'", "truncated?"}},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, {"'a'", "'b'", "overlap"}},
      {"same range",
       R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"b":{"dtype":"I8","shape":[2],"data_offsets":[2,4]}})",
       4, {"overlap"}},
      {"duplicate name", "{\"w\":{" + ok_entry + "},\"w\":{" + ok_entry + "}}", 8,
       {"duplicate tensor name 'w'"}},
      {"duplicate field",
       R"({"w":{"dtype":"F32","dtype":"U8","shape":[2],"data_offsets":[0,8]}})", 8,
       {"duplicate key 'dtype'"}},
      {"metadata number", R"({"__metadata__": 3})", 0, {"\"__metadata__\" is not an object"}},
      {"metadata value", R"({"__metadata__": {"k": 1}})", 0, {"__metadata__", "'k'", "not a string"}},
      {"deep nesting", R"({"w":{"x":[[[[[[[[[[[[1]]]]]]]]]]]]}})", 0, {"nested deeper"}},
      {"empty header", "", 0, {"not valid JSON"}},
      {"nul padding", std::string("{}") + std::string(6, '\0'), 0, {"not valid JSON"}},
  };
  // clang-format on
  for (const Corruption& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string file = path("bad.safetensors");
    raw_file(file, c.header, c.data_size);
    std::vector<std::string> want = c.want;
    want.push_back(file);
    expect_open_error(file, want);
  }
}

TEST_F(SafetensorsTest, LengthPrefixCorruptions) {
  const std::string file = path("len.safetensors");
  write_bytes(file, "");
  expect_open_error(file, {file, "0 bytes", "shorter than the 8-byte"});
  write_bytes(file, "abc");
  expect_open_error(file, {file, "3 bytes", "shorter than the 8-byte"});
  write_bytes(file, le64(3) + "{}");
  expect_open_error(file, {file, "header length 3 exceeds", "truncated"});
  write_bytes(file, le64(~0ull) + "{}");
  expect_open_error(file, {file, "absurd"});
  // Absurd even when the file is that large: a sparse 101 MB file costs no disk.
  write_bytes(file, le64((100ull << 20) + 1) + "{}");
  fs::resize_file(file, (101ull << 20));
  expect_open_error(file, {file, "absurd"});
}

TEST_F(SafetensorsTest, LegalOddities) {
  const std::string file = path("odd.safetensors");
  raw_file(file, "{}", 0);  // no tensors, unpadded
  EXPECT_TRUE(TensorStore::open(file).names().empty());
  raw_file(file, "  {}  \n\t ", 5);  // whitespace around the object; trailing data nobody uses
  EXPECT_TRUE(TensorStore::open(file).names().empty());
  raw_file(file, R"({"__metadata__":{},"z":{"dtype":"F16","shape":[0],"data_offsets":[0,0]}})", 0);
  const TensorStore st = TensorStore::open(file);
  EXPECT_EQ(st.info("z").size_bytes, 0u);
  EXPECT_EQ(st.tensor("z").numel(), 0);
}

TEST_F(SafetensorsTest, NotAFile) {
  expect_open_error(path("missing.safetensors"), {path("missing.safetensors"), "no such file"});
  ASSERT_EQ(mkfifo(path("fifo.safetensors").c_str(), 0600), 0);  // must not block
  expect_open_error(path("fifo.safetensors"), {path("fifo.safetensors"), "not a regular file"});
  fs::create_directories(path("sub"));
  expect_open_error(path("sub"),
                    {path("sub"), "model.safetensors.index.json", "model.safetensors", "neither"});
}

// ---- directories and shards ----

// Writes one shard holding the named U8 tensors, each of length 3 filled with its first letter.
void write_shard(const std::string& file, const std::vector<std::string>& names,
                 const std::string& meta_value) {
  SafetensorsWriter w;
  for (const std::string& n : names) {
    const std::string bytes(3, n[0]);
    w.add(n, DType::kU8, {3}, bytes.data(), bytes.size());
  }
  w.set_metadata("shard", meta_value);
  w.write(file);
}

TEST_F(SafetensorsTest, DirectoryWithSingleFile) {
  write_shard(path("model.safetensors"), {"a", "b"}, "only");
  const TensorStore st = TensorStore::open(dir_.string());
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(st.file_of("b"), path("model.safetensors"));
  expect_error([&] { st.info("c"); }, {"'c'", dir_.string()});
}

class ShardedTest : public SafetensorsTest {
 protected:
  void SetUp() override {
    SafetensorsTest::SetUp();
    write_shard(path("model-00001-of-00002.safetensors"), {"a", "b"}, "one");
    write_shard(path("model-00002-of-00002.safetensors"), {"c"}, "two");
  }
  void write_index(const std::string& weight_map_json) {
    write_bytes(path("model.safetensors.index.json"),
                R"({"metadata": {"total_size": 9}, "weight_map": )" + weight_map_json + "}");
  }
  std::string index() const { return path("model.safetensors.index.json"); }
};

TEST_F(ShardedTest, TwoShards) {
  write_index(R"({"a": "model-00001-of-00002.safetensors",
                  "b": "model-00001-of-00002.safetensors",
                  "c": "model-00002-of-00002.safetensors"})");
  for (const std::string& p : {dir_.string(), index()}) {
    SCOPED_TRACE(p);
    const TensorStore st = TensorStore::open(p);
    EXPECT_EQ(st.names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(st.file_of("a"), path("model-00001-of-00002.safetensors"));
    EXPECT_EQ(st.file_of("c"), path("model-00002-of-00002.safetensors"));
    EXPECT_EQ(&st.file_of("a"), &st.file_of("b"));  // one SafetensorsFile per shard
    EXPECT_EQ(st.info("a").file_index, st.info("b").file_index);
    EXPECT_NE(st.info("a").file_index, st.info("c").file_index);
    for (const char* n : {"a", "b", "c"}) {
      EXPECT_EQ(tensor_bytes(st.tensor(n)), std::vector<uint8_t>(3, uint8_t(n[0]))) << n;
    }
    EXPECT_EQ(st.total_bytes(), 9u);
    EXPECT_EQ(st.metadata().at("shard"), "one");  // first shard wins
    expect_error([&] { st.info("d"); }, {"'d'", p});
  }
}

// TensorStore::to_huge_pages (the default weight residency of load_model): every shard's bytes
// move into anonymous memory, 2 MiB aligned, and every tensor reads back the same bytes.
TEST_F(ShardedTest, HugePagesHoldTheSameBytes) {
  write_index(R"({"a": "model-00001-of-00002.safetensors",
                  "b": "model-00001-of-00002.safetensors",
                  "c": "model-00002-of-00002.safetensors"})");
  TensorStore st = TensorStore::open(dir_.string());
  const void* mapped = st.tensor("a").data;
  st.to_huge_pages();
  st.to_huge_pages();  // a second call changes nothing
  EXPECT_NE(st.tensor("a").data, mapped);
  for (const char* n : {"a", "b", "c"}) {
    EXPECT_EQ(tensor_bytes(st.tensor(n)), std::vector<uint8_t>(3, uint8_t(n[0]))) << n;
  }
  EXPECT_EQ(st.metadata().at("shard"), "one");
  EXPECT_EQ(st.total_bytes(), 9u);
}

TEST_F(SafetensorsTest, HugePagesOfAFileThatShrankIsAnError) {
  const std::string p = path("big.bin");
  {
    std::ofstream f(p, std::ios::binary);
    const std::vector<char> bytes(size_t(3) << 20, 'x');
    f.write(bytes.data(), std::streamsize(bytes.size()));
  }
  MappedFile m(p, "test file");
  EXPECT_FALSE(m.in_huge_pages());
  fs::resize_file(p, 1 << 20);  // another process truncated it after the open
  expect_error([&] { m.to_huge_pages(); }, {"test file", p, "reading it into memory failed"});
  EXPECT_FALSE(m.in_huge_pages());
  fs::resize_file(p, size_t(3) << 20);  // the zero-filled tail again: the copy succeeds
  m.to_huge_pages();
  EXPECT_TRUE(m.in_huge_pages());
  EXPECT_EQ(m.size(), uint64_t(3) << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.bytes()) % (uintptr_t(2) << 20), 0u);
  EXPECT_EQ(m.bytes()[0], 'x');
  EXPECT_EQ(m.bytes()[(size_t(3) << 20) - 1], 0);
}

// MappedFile::release: only whole 4 KiB pages inside the range read as zeros after; the bytes
// around them are intact; a mapped (not copied) file and a range outside it are refused.
TEST_F(SafetensorsTest, ReleaseGivesBackWholePagesInsideTheRangeOnly) {
  const std::string p = path("rel.bin");
  {
    std::ofstream f(p, std::ios::binary);
    const std::vector<char> bytes(size_t(5) * 4096, 'y');
    f.write(bytes.data(), std::streamsize(bytes.size()));
  }
  MappedFile m(p, "test file");
  EXPECT_FALSE(m.release(m.bytes(), 4096));  // mapped: nothing to give back
  m.to_huge_pages();
  const uint8_t* b = m.bytes();
  EXPECT_FALSE(m.release(b + 4096, size_t(5) * 4096));  // runs past the end
  EXPECT_FALSE(m.release(b - 1, 2));
  ASSERT_TRUE(m.release(b + 100, size_t(3) * 4096));  // [100, 12388): page 1 and 2 whole
  for (size_t i = 0; i < size_t(5) * 4096; ++i) {
    const bool gone = i >= 4096 && i < 3 * 4096;
    ASSERT_EQ(b[i], gone ? 0 : 'y') << "byte " << i;
  }
}

TEST_F(ShardedTest, OnlyWeightMapTensorsAreExposed) {
  write_index(R"({"a": "model-00001-of-00002.safetensors"})");
  const TensorStore st = TensorStore::open(dir_.string());
  EXPECT_EQ(st.names(), (std::vector<std::string>{"a"}));
}

TEST_F(ShardedTest, TensorInTheWrongShard) {
  write_index(R"({"a": "model-00001-of-00002.safetensors",
                  "c": "model-00001-of-00002.safetensors"})");
  expect_open_error(dir_.string(),
                    {index(), "'c'", "model-00001-of-00002.safetensors", "does not contain"});
}

TEST_F(ShardedTest, MissingShard) {
  write_index(R"({"a": "model-00003-of-00002.safetensors"})");
  expect_open_error(dir_.string(),
                    {index(), "'a'", "model-00003-of-00002.safetensors", "does not exist"});
}

TEST_F(ShardedTest, CorruptShardNamesTheShard) {
  write_index(R"({"a": "model-00001-of-00002.safetensors",
                  "c": "model-00002-of-00002.safetensors"})");
  write_bytes(path("model-00002-of-00002.safetensors"), "abc");
  expect_open_error(dir_.string(), {path("model-00002-of-00002.safetensors"), "shorter"});
}

TEST_F(ShardedTest, HostileShardNames) {
  // A real file outside the directory, so a reader that followed "../" would succeed.
  write_shard(
      (dir_.parent_path() / fmt::format("mmx_st_outside_{}.safetensors", getpid())).string(), {"a"},
      "outside");
  const std::string outside = fmt::format("../mmx_st_outside_{}.safetensors", getpid());
  for (const std::string& shard :
       {outside, std::string(".."), std::string("."), std::string("sub/model.safetensors"),
        std::string("/etc/passwd"), std::string("a\\\\b"), std::string("")}) {
    SCOPED_TRACE(shard);
    write_index(R"({"a": ")" + shard + R"("})");
    expect_open_error(dir_.string(), {index(), "'a'", "not a plain file name"});
  }
  fs::remove(dir_.parent_path() / fmt::format("mmx_st_outside_{}.safetensors", getpid()));
}

TEST_F(ShardedTest, MalformedIndex) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"metadata": {}})", "missing \"weight_map\""},
      {R"({"weight_map": ["a"]})", "missing \"weight_map\""},
      {R"({"metadata": 5, "weight_map": {}})", "\"metadata\" is not an object"},
      {R"({"weight_map": {"a": 1}})", "not a file name"},
      {R"({"weight_map": {"a": "x", "a": "y"}})", "duplicate"},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    write_bytes(index(), text);
    expect_open_error(dir_.string(), {index(), want});
  }
}

// ---- writer errors ----

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  SafetensorsWriter w;
  const float x[2] = {1, 2};
  w.add("x", DType::kF32, {2}, x, sizeof x);
  expect_error([&] { w.add("x", DType::kF32, {2}, x, sizeof x); }, {"duplicate", "'x'"});
  expect_error([&] { w.add("__metadata__", DType::kF32, {2}, x, sizeof x); }, {"reserved"});
  expect_error([&] { w.add("y", DType::kF32, {3}, x, sizeof x); }, {"'y'", "needs 12 bytes"});
  expect_error([&] { w.add("y", DType::kF32, {-1}, x, 0); }, {"'y'", "bad shape"});
  expect_error([&] { w.write(path("no/such/dir/out.safetensors")); }, {"cannot create"});
  SafetensorsWriter bad_utf8;
  bad_utf8.add("\xff", DType::kF32, {2}, x, sizeof x);
  expect_error([&] { bad_utf8.write(path("u.safetensors")); }, {"cannot encode header"});
}

}  // namespace
}  // namespace mmx
