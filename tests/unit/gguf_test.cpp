// gguf: a file built byte by byte by hand (independent of our writer) parses as the format says;
// the writer round-trips every value and tensor type; and hostile files — truncated at every
// length, seeded byte mutations, and one hand-made case per rule of gguf.h — give mmx::Error
// naming the file (and the key or tensor), never a crash or another exception type.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/qblocks.h"
#include "formats/gguf_writer.h"
#include "formats/hf_view.h"
#include "formats/safetensors.h"

namespace mmx {
namespace {

namespace fs = std::filesystem;
using gguf::ValueType;

// Little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& num(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Bytes& str(const std::string& s) {
    num<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad(size_t a) {
    while (b.size() % a) b.push_back(0);
    return *this;
  }
};

class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("mmx_gguf_{}_{}", getpid(), info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string put(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream(path(name), std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path(name);
  }
  // Opening must throw mmx::Error whose message contains every one of `parts`.
  static void expect_error(const std::string& file, std::initializer_list<const char*> parts) {
    try {
      (void)gguf::File::open(file);
      ADD_FAILURE() << "opened " << file;
    } catch (const Error& e) {
      for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }

  // A hand-made v3 file: 2 metadata entries, one F32 tensor [2, 3] (ggml ne = {3, 2}) holding 0..5,
  // then one Q8_0 tensor [1, 32].
  static Bytes hand_file() {
    Bytes f;
    f.num<uint32_t>(0x46554747).num<uint32_t>(3).num<uint64_t>(2).num<uint64_t>(2);
    f.str("general.architecture").num<uint32_t>(8).str("minimax-m2");
    f.str("xs").num<uint32_t>(9).num<uint32_t>(5).num<uint64_t>(3).num<int32_t>(-1).num<int32_t>(7).num<int32_t>(9);
    f.str("w").num<uint32_t>(2).num<uint64_t>(3).num<uint64_t>(2).num<uint32_t>(0).num<uint64_t>(0);
    f.str("q").num<uint32_t>(2).num<uint64_t>(32).num<uint64_t>(1).num<uint32_t>(8).num<uint64_t>(32);
    f.pad(32);
    for (int i = 0; i < 6; ++i) f.num<float>(float(i));
    f.pad(32);
    f.num<uint16_t>(0x3c00);  // d = 1.0 in fp16
    for (int i = 0; i < 32; ++i) f.num<int8_t>(int8_t(i - 16));
    return f;
  }

  fs::path dir_;
};

TEST_F(GgufTest, HandMadeFileParsesAsTheFormatSays) {
  const std::string p = put("hand.gguf", hand_file().b);
  ASSERT_TRUE(gguf::is_gguf(p));
  const auto f = gguf::File::open(p);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "minimax-m2");
  const auto& xs = f->get_array("xs", ValueType::kI32);
  ASSERT_EQ(xs.size(), 3u);
  EXPECT_EQ(xs[0].get<int>(), -1);
  EXPECT_EQ(xs[2].get<int>(), 9);
  ASSERT_EQ(f->tensors().size(), 2u);
  const gguf::TensorInfo& w = f->tensors()[0];
  EXPECT_EQ(w.name, "w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));  // ne {3, 2} reversed
  EXPECT_TRUE(w.supported);
  EXPECT_EQ(w.size_bytes, 24u);
  const float* data = reinterpret_cast<const float*>(f->bytes() + w.offset);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(data[i], float(i));
  const gguf::TensorInfo& q = f->tensors()[1];
  EXPECT_EQ(q.dtype, DType::kQ8_0);
  EXPECT_EQ(q.size_bytes, 34u);

  // Through TensorStore: a view with the outermost-first shape.
  const TensorStore st = TensorStore::open(p);
  ASSERT_NE(st.gguf(), nullptr);
  const Tensor t = st.tensor("w");
  EXPECT_EQ(t.dtype, DType::kF32);
  EXPECT_EQ(t.dim(0), 2);
  EXPECT_EQ(t.dim(1), 3);
  EXPECT_EQ(t.ptr<float>()[5], 5.0f);
  EXPECT_EQ(st.tensor("q").size_bytes(), 34u);
}

TEST_F(GgufTest, WriterRoundTripsEveryValueAndTensorType) {
  const std::string p = path("rt.gguf");
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  std::vector<std::vector<uint8_t>> payloads;
  {
    gguf::Writer w(p);
    w.set("u8", {ValueType::kU8, ValueType::kU8, 200});
    w.set("i8", {ValueType::kI8, ValueType::kU8, -100});
    w.set("u16", {ValueType::kU16, ValueType::kU8, 60000});
    w.set("i16", {ValueType::kI16, ValueType::kU8, -30000});
    w.set_u32("u32", 4000000000u);
    w.set_i32("i32", -2000000000);
    w.set("u64", {ValueType::kU64, ValueType::kU8, uint64_t(1) << 60});
    w.set("i64", {ValueType::kI64, ValueType::kU8, -(int64_t(1) << 60)});
    w.set_f32("f32", 0.25f);
    w.set("f64", {ValueType::kF64, ValueType::kU8, 1e300});
    w.set_bool("yes", true);
    w.set_string("s", std::string("h\xc3\xa9llo\0x", 8));
    w.set_array("strs", ValueType::kString, {"a", "", "ccc"});
    w.set_array("floats", ValueType::kF32, {1.5, -2.0});
    w.set_array("empty", ValueType::kU32, nlohmann::json::array());
    std::mt19937 rng(7);
    for (DType t : types) {
      const std::vector<int64_t> shape = {3, 2, 256};
      w.add_tensor(std::string("t.") + std::string(dtype_name(t)), t, shape);
      std::vector<uint8_t> b(6 * dtype_row_bytes(t, 256));
      for (auto& x : b) x = uint8_t(rng());
      payloads.push_back(std::move(b));
    }
    w.begin();
    for (const auto& b : payloads) {
      w.write(b.data(), 5);  // any chunking
      w.write(b.data() + 5, b.size() - 5);
    }
    w.finish();
  }
  EXPECT_FALSE(fs::exists(p + ".partial"));
  const auto f = gguf::File::open(p);
  EXPECT_EQ(f->get_int("u8"), 200);
  EXPECT_EQ(f->get_int("i8"), -100);
  EXPECT_EQ(f->get_int("u16"), 60000);
  EXPECT_EQ(f->get_int("i16"), -30000);
  EXPECT_EQ(f->get_int("u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("i32"), -2000000000);
  EXPECT_EQ(f->get_int("u64"), int64_t(1) << 60);
  EXPECT_EQ(f->get_int("i64"), -(int64_t(1) << 60));
  EXPECT_EQ(f->get_float("f32"), 0.25);
  EXPECT_EQ(f->get_float("f64"), 1e300);
  EXPECT_TRUE(f->get_bool("yes", false));
  EXPECT_EQ(f->get_string("s"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f->get_array("strs", ValueType::kString).size(), 3u);
  EXPECT_EQ(f->get_array("floats", ValueType::kF32)[0].get<double>(), 1.5);
  EXPECT_TRUE(f->get_array("empty", ValueType::kU32).empty());
  // Wrong kinds are errors that name the key.
  EXPECT_THROW((void)f->get_string("u8"), Error);
  EXPECT_THROW((void)f->get_int("missing"), Error);
  EXPECT_THROW((void)f->get_array("strs", ValueType::kF32), Error);
  ASSERT_EQ(f->tensors().size(), std::size(types));
  for (size_t i = 0; i < std::size(types); ++i) {
    const gguf::TensorInfo& t = f->tensors()[i];
    EXPECT_EQ(t.dtype, types[i]);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2, 256}));
    EXPECT_EQ(t.offset % 32, 0u);
    ASSERT_EQ(t.size_bytes, payloads[i].size());
    EXPECT_EQ(std::memcmp(f->bytes() + t.offset, payloads[i].data(), t.size_bytes), 0) << t.name;
  }
  // A stacked tensor's slice0 is one expert: rows of whole blocks.
  const TensorStore st = TensorStore::open(p);
  const Tensor q = st.tensor("t.Q4_K");
  EXPECT_EQ(q.slice0(2).size_bytes(), 2 * sizeof(BlockQ4K));
}

TEST_F(GgufTest, EachRuleHasItsError) {
  // Each case edits the hand-made file and names what the error must say.
  auto variant = [&](const std::string& name, auto edit) {
    Bytes f = hand_file();
    edit(f.b);
    return put(name, f.b);
  };
  auto set32 = [](std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); };
  auto set64 = [](std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); };
  expect_error(variant("magic.gguf", [&](auto& b) { b[0] = 'X'; }), {"magic.gguf", "not a GGUF file"});
  expect_error(variant("version.gguf", [&](auto& b) { set32(b, 4, 4); }), {"version 4"});
  expect_error(variant("ntensors.gguf", [&](auto& b) { set64(b, 8, uint64_t(1) << 40); }), {"tensors"});
  expect_error(variant("nkv.gguf", [&](auto& b) { set64(b, 16, uint64_t(1) << 60); }), {"metadata"});
  // The first key's length field is at 24.
  expect_error(variant("keylen.gguf", [&](auto& b) { set64(b, 24, uint64_t(1) << 50); }), {"metadata key"});
  // Value type of the first entry: 24 + 8 + 20 = 52.
  expect_error(variant("vtype.gguf", [&](auto& b) { set32(b, 52, 99); }), {"general.architecture", "unknown value type 99"});
  // Byte offsets in hand_file(), computed from the layout: the first entry's key length is at 24,
  // key 32..52, type 52, string 56..74; the "xs" entry's key length at 74, key 82..84.
  constexpr size_t kXsType = 74 + 8 + 2, kXsElem = kXsType + 4, kXsCount = kXsElem + 4;
  constexpr size_t kW = kXsCount + 8 + 3 * 4;  // tensor "w": name length here, then 1 byte
  constexpr size_t kWDims = kW + 8 + 1, kWNe0 = kWDims + 4, kWType = kWNe0 + 16, kWOff = kWType + 4;
  constexpr size_t kQ = kWOff + 8;
  constexpr size_t kQName = kQ + 8, kQNe0 = kQName + 1 + 4, kQType = kQNe0 + 16, kQOff = kQType + 4;
  expect_error(variant("nested.gguf", [&](auto& b) { set32(b, kXsElem, 9); }), {"xs", "arrays of arrays"});
  expect_error(variant("count.gguf", [&](auto& b) { set64(b, kXsCount, uint64_t(1) << 61); }), {"xs", "does not fit"});
  expect_error(variant("ndims.gguf", [&](auto& b) { set32(b, kWDims, 5); }), {"'w'", "5 dimensions"});
  expect_error(variant("dim0.gguf", [&](auto& b) { set64(b, kWNe0, 0); }), {"'w'", "dimension 0"});
  expect_error(variant("align.gguf", [&](auto& b) { set64(b, kWOff, 4); }), {"'w'", "alignment"});
  expect_error(variant("past.gguf", [&](auto& b) { set64(b, kWOff, 1 << 20); }), {"'w'", "past the end"});
  expect_error(variant("blocks.gguf", [&](auto& b) { set64(b, kQNe0, 31); }), {"'q'", "whole 32-element blocks of Q8_0"});
  expect_error(variant("overlap.gguf", [&](auto& b) { set64(b, kQOff, 0); }), {"overlap"});
  expect_error(variant("dupname.gguf", [&](auto& b) { b[kQName] = 'w'; }), {"duplicate tensor name 'w'"});
  expect_error(variant("bool.gguf", [&](auto& b) { set32(b, kXsElem, 7); }), {"xs", "bool value"});
  {
    Bytes d;  // two entries named "k"
    d.num<uint32_t>(0x46554747).num<uint32_t>(3).num<uint64_t>(0).num<uint64_t>(2);
    d.str("k").num<uint32_t>(4).num<uint32_t>(1).str("k").num<uint32_t>(4).num<uint32_t>(2);
    expect_error(put("dupkey.gguf", d.b), {"dupkey.gguf", "duplicate metadata key 'k'"});
  }
  // An unknown tensor type is listed, and refused by name when asked for.
  const std::string iq = variant("iq4.gguf", [&](auto& b) { set32(b, kQType, 23); });
  const auto f = gguf::File::open(iq);
  EXPECT_FALSE(f->tensors()[1].supported);
  const TensorStore st = TensorStore::open(iq);
  try {
    (void)st.tensor("q");
    ADD_FAILURE() << "IQ4_XS handed out";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IQ4_XS"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos) << e.what();
  }
}

// A block_count beyond what the file could hold is refused before anything is sized by it (the
// GGUF fuzzer found hf_config allocating a 4 GiB per-layer list from one such file).
TEST_F(GgufTest, HostileLayerCountIsRefused) {
  for (const uint32_t layers : {0u, 3u, 1u << 30}) {
    const std::string p = path(fmt::format("layers{}.gguf", layers));
    {
      gguf::Writer w(p);
      w.set_string("general.architecture", "minimax-m2");
      w.set_u32("minimax-m2.embedding_length", 64);
      w.set_u32("minimax-m2.attention.head_count", 4);
      w.set_u32("minimax-m2.block_count", layers);
      w.add_tensor("token_embd.weight", DType::kF32, {8, 64});
      w.add_tensor("output_norm.weight", DType::kF32, {64});
      w.begin();
      const std::vector<uint8_t> zeros(8 * 64 * 4 + 64 * 4, 0);
      w.write(zeros.data(), zeros.size());
      w.finish();
    }
    const auto f = gguf::File::open(p);
    try {
      (void)gguf::hf_config(*f, {"token_embd.weight", "output.weight"});
      ADD_FAILURE() << layers << " layers accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("block_count"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
}

TEST_F(GgufTest, TruncatedAtEveryLengthAndMutatedBytesNeverCrash) {
  const std::vector<uint8_t> good = hand_file().b;
  for (size_t n = 0; n < good.size(); ++n) {
    const std::string p = put("trunc.gguf", std::vector<uint8_t>(good.begin(), good.begin() + n));
    try {
      const auto f = gguf::File::open(p);
      // Only a cut inside the final tensor's padding-free tail can be missed; none exists here.
      ADD_FAILURE() << "a file cut at " << n << " of " << good.size() << " bytes opened";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("trunc.gguf"), std::string::npos) << e.what();
    }
  }
  std::mt19937 rng(1234);
  int opened = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b = good;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) b[rng() % 160] = uint8_t(rng());  // the header region
    const std::string p = put("mut.gguf", b);
    try {
      const auto f = gguf::File::open(p);
      ++opened;
      for (const auto& t : f->tensors()) {
        if (t.supported) {
          ASSERT_LE(t.offset + t.size_bytes, b.size()) << t.name;
        }
      }
    } catch (const Error&) {
    }
  }
  EXPECT_GT(opened, 0);  // some mutations are harmless; the test exercises both branches
}

}  // namespace
}  // namespace mmx
