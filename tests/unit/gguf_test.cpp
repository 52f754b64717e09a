// GGUF reader (core/io/gguf.hpp): files written byte by byte here, every metadata type, tensors of
// each supported type dequantised against values derived by hand, and truncated or hostile files
// (each must throw InvalidInput, never crash). GgufModel.* read the real SmolLM2 file when
// `speclab fetch-model smollm2-135m` has put it in data/models/.
#include "core/io/gguf.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using testing::error_of;
using T = GgufValueType;

// Appends little-endian GGUF fields.
struct Writer {
  std::vector<std::byte> bytes;

  template <class V>
  Writer& put(V v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
    return *this;
  }
  Writer& u32(uint32_t v) { return put(v); }
  Writer& u64(uint64_t v) { return put(v); }
  Writer& str(std::string_view s) {
    u64(s.size());
    for (char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Writer& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    str_raw("GGUF");
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  Writer& str_raw(std::string_view s) {
    for (char c : s) bytes.push_back(static_cast<std::byte>(c));
    return *this;
  }
  Writer& key(std::string_view k, T type) { return str(k).u32(static_cast<uint32_t>(type)); }
  Writer& tensor(std::string_view name, std::vector<uint64_t> shape, GgmlType type,
                 uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) u64(d);
    return u32(static_cast<uint32_t>(type)).u64(offset);
  }
  Writer& pad(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(std::byte{0});
    return *this;
  }
  Writer& raw_bytes(std::initializer_list<int> v) {
    for (int b : v) bytes.push_back(static_cast<std::byte>(b));
    return *this;
  }
};

GgufFile parse(const std::vector<std::byte>& bytes) {
  return GgufFile::from_memory(bytes, "test.gguf");
}

// The data section of small_file(), alignment 64:
//   offset   0  "f32"  [2, 2] F32: 1.5, -2, 0.25, 1e6
//   offset  64  "f16"  [4] F16 bits 0x3C00, 0xC000, 0x3800, 0x0001 = 1, -2, 0.5, 2^-24 (subnormal)
//   offset 128  "q8"   [32, 2] Q8_0, 2 blocks of 34 bytes
//        row 0: d = 0x3800 = 0.5, q_j = j - 16  → y_j = 0.5·(j - 16)
//        row 1: d = 0x4000 = 2,   q_0 = -128, q_1 = 127, others 0 → -256, 254, 0, ...
//   offset 256  "q4"   [32] Q4_1, 1 block of 20 bytes: d = 0x3800 = 0.5, m = 0xBC00 = -1,
//        byte j = j | (15 - j) << 4 → y_j = 0.5·j - 1 (low nibbles, j < 16),
//        y_{16+j} = 0.5·(15 - j) - 1 (high nibbles). The file ends with this block.
std::vector<std::byte> small_file() {
  Writer w;
  w.header(4, 1).key("general.alignment", T::kUint32).u32(64);
  w.tensor("f32", {2, 2}, GgmlType::kF32, 0);
  w.tensor("f16", {4}, GgmlType::kF16, 64);
  w.tensor("q8", {32, 2}, GgmlType::kQ8_0, 128);
  w.tensor("q4", {32}, GgmlType::kQ4_1, 256);
  w.pad(64);
  w.put(1.5f).put(-2.0f).put(0.25f).put(1e6f).pad(64);
  w.put<uint16_t>(0x3C00).put<uint16_t>(0xC000).put<uint16_t>(0x3800).put<uint16_t>(0x0001);
  w.pad(64);
  w.put<uint16_t>(0x3800);
  for (int j = 0; j < 32; ++j) w.put(static_cast<int8_t>(j - 16));
  w.put<uint16_t>(0x4000).put(int8_t{-128}).put(int8_t{127});
  for (int j = 2; j < 32; ++j) w.put(int8_t{0});
  w.pad(64);
  w.put<uint16_t>(0x3800).put<uint16_t>(0xBC00);
  for (int j = 0; j < 16; ++j) w.put(static_cast<uint8_t>(j | (15 - j) << 4));
  return w.bytes;
}

TEST(Gguf, ReadsEveryMetadataType) {
  Writer w;
  w.header(0, 16);
  w.key("u8", T::kUint8).put(uint8_t{200});
  w.key("i8", T::kInt8).put(int8_t{-100});
  w.key("u16", T::kUint16).put(uint16_t{60000});
  w.key("i16", T::kInt16).put(int16_t{-30000});
  w.key("u32", T::kUint32).put(uint32_t{4000000000u});
  w.key("i32", T::kInt32).put(int32_t{-2000000000});
  w.key("f32", T::kFloat32).put(0.125f);
  w.key("bool", T::kBool).put(uint8_t{1});
  w.key("str", T::kString).str("llama");
  w.key("u64", T::kUint64).put(uint64_t{1} << 40);
  w.key("i64", T::kInt64).put(int64_t{-(int64_t{1} << 40)});
  w.key("f64", T::kFloat64).put(-2.5);
  w.key("big", T::kUint64).put(std::numeric_limits<uint64_t>::max());
  w.key("ints", T::kArray).u32(static_cast<uint32_t>(T::kInt16)).u64(3);
  w.put(int16_t{-1}).put(int16_t{2}).put(int16_t{-3});
  w.key("strs", T::kArray).u32(static_cast<uint32_t>(T::kString)).u64(2).str("a").str("");
  // [[1, 2], [], [[true]]]: arrays of arrays, the last of a different element type and depth.
  w.key("nested", T::kArray).u32(static_cast<uint32_t>(T::kArray)).u64(3);
  w.u32(static_cast<uint32_t>(T::kUint32)).u64(2).u32(1).u32(2);
  w.u32(static_cast<uint32_t>(T::kFloat64)).u64(0);
  w.u32(static_cast<uint32_t>(T::kArray)).u64(1).u32(static_cast<uint32_t>(T::kBool)).u64(1);
  w.put(uint8_t{1});
  const GgufFile f = parse(w.bytes);

  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.metadata().size(), 16u);
  EXPECT_EQ(f.get_int("u8"), 200);
  EXPECT_EQ(f.get_int("i8"), -100);
  EXPECT_EQ(f.get_int("u16"), 60000);
  EXPECT_EQ(f.get_int("i16"), -30000);
  EXPECT_EQ(f.get_int("u32"), 4000000000);
  EXPECT_EQ(f.get_int("i32"), -2000000000);
  EXPECT_EQ(f.get_float("f32"), 0.125);
  EXPECT_TRUE(f.at("bool").as_bool());
  EXPECT_EQ(f.get_string("str"), "llama");
  EXPECT_EQ(f.get_int("u64"), int64_t{1} << 40);
  EXPECT_EQ(f.get_int("i64"), -(int64_t{1} << 40));
  EXPECT_EQ(f.get_float("f64"), -2.5);
  EXPECT_EQ(f.at("f64").type(), T::kFloat64);
  EXPECT_NE(error_of([&] { f.get_int("big"); }).find("does not fit"), std::string::npos);

  const GgufValue& ints = f.at("ints");
  ASSERT_EQ(ints.size(), 3u);
  EXPECT_EQ(ints.element_type(), T::kInt16);
  EXPECT_EQ(ints.at(0).as_int(), -1);
  EXPECT_EQ(ints.at(1).as_int(), 2);
  EXPECT_EQ(ints.at(2).as_int(), -3);
  EXPECT_EQ(f.at("strs").strings(), (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(f.at("strs").at(0).as_string(), "a");

  const GgufValue& nested = f.at("nested");
  ASSERT_EQ(nested.size(), 3u);
  EXPECT_EQ(nested.at(0).element_type(), T::kUint32);
  EXPECT_EQ(nested.at(0).at(1).as_int(), 2);
  EXPECT_EQ(nested.at(1).size(), 0u);
  EXPECT_EQ(nested.at(1).element_type(), T::kFloat64);
  EXPECT_TRUE(nested.at(2).at(0).at(0).as_bool());

  // Wrong-type and missing lookups name the file and the key.
  const std::string wrong = error_of([&] { f.get_string("u8"); });
  EXPECT_NE(wrong.find("test.gguf: metadata 'u8'"), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("uint8"), std::string::npos) << wrong;
  const std::string missing = error_of([&] { f.get_int("absent"); });
  EXPECT_NE(missing.find("'absent' is missing"), std::string::npos) << missing;
  EXPECT_NE(error_of([&] { ints.at(3); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { f.at("u8").size(); }).find("expected array"), std::string::npos);
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_TRUE(f.tensor_infos().empty());
}

TEST(Gguf, AcceptsVersion2) {
  Writer w;
  w.header(0, 1, 2).key("general.architecture", T::kString).str("llama");
  EXPECT_EQ(parse(w.bytes).version(), 2u);
}

TEST(Gguf, ReadsTensorsAtTheAlignment) {
  const std::vector<std::byte> bytes = small_file();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.data_offset() + 256 + 20, bytes.size());
  ASSERT_EQ(f.tensor_infos().size(), 4u);
  const GgufTensorInfo& q8 = f.tensor_infos()[2];
  EXPECT_EQ(q8.name, "q8");
  EXPECT_EQ(q8.shape, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(q8.type, GgmlType::kQ8_0);
  EXPECT_EQ(q8.offset, 128u);
  EXPECT_EQ(q8.n_bytes, 68u);

  const GgufTensor t = f.tensor("q8");
  EXPECT_EQ(t.data, bytes.data() + f.data_offset() + 128);
  EXPECT_EQ(t.n_rows(), 2);
  EXPECT_EQ(t.row_length(), 32);
  EXPECT_TRUE(f.has_tensor("q4"));
  EXPECT_FALSE(f.has_tensor("q5"));
  const std::string missing = error_of([&] { f.tensor("q5"); });
  EXPECT_NE(missing.find("no tensor named 'q5'"), std::string::npos) << missing;
}

TEST(Gguf, DefaultAlignmentIs32) {
  Writer w;
  w.header(1, 0).tensor("x", {1}, GgmlType::kF32, 0).pad(32).put(3.0f);
  const GgufFile f = parse(w.bytes);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.tensor("x").dequantize(), std::vector<float>{3.0f});
}

TEST(Gguf, DequantisesF32AndF16) {
  const std::vector<std::byte> bytes = small_file();
  const GgufFile f = parse(bytes);
  EXPECT_EQ(f.tensor("f32").dequantize(), (std::vector<float>{1.5f, -2.0f, 0.25f, 1e6f}));
  std::vector<float> row(2);
  f.tensor("f32").dequantize_row(1, row);
  EXPECT_EQ(row, (std::vector<float>{0.25f, 1e6f}));
  EXPECT_EQ(f.tensor("f16").dequantize(),
            (std::vector<float>{1.0f, -2.0f, 0.5f, std::ldexp(1.0f, -24)}));
  EXPECT_NE(error_of([&] { f.tensor("f32").dequantize_row(2, row); }).find("row 2"),
            std::string::npos);
}

TEST(Gguf, ConvertsHalfPrecisionEdgeCases) {
  EXPECT_EQ(fp16_to_float(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(fp16_to_float(0x8000)));
  EXPECT_EQ(fp16_to_float(0x7BFF), 65504.0f);                  // largest finite
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(fp16_to_float(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(fp16_to_float(0x3555), 1365.0f / 4096.0f);         // 0x155 · 2^-10 · 2^-2 + 2^-2
  EXPECT_EQ(fp16_to_float(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_float(0x7E00)));
}

TEST(Gguf, DequantisesQ8_0) {
  const std::vector<std::byte> bytes = small_file();
  const GgufFile f = parse(bytes);
  const GgufTensor t = f.tensor("q8");  // a view: valid while f lives
  std::vector<float> row(32);
  t.dequantize_row(0, row);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(row[j], 0.5f * static_cast<float>(j - 16)) << j;
  t.dequantize_row(1, row);
  EXPECT_EQ(row[0], -256.0f);
  EXPECT_EQ(row[1], 254.0f);
  for (int j = 2; j < 32; ++j) EXPECT_EQ(row[j], 0.0f) << j;
}

TEST(Gguf, DequantisesQ4_1) {
  const std::vector<std::byte> bytes = small_file();
  const std::vector<float> y = parse(bytes).tensor("q4").dequantize();
  ASSERT_EQ(y.size(), 32u);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j) - 1.0f) << j;
    EXPECT_EQ(y[16 + j], 0.5f * static_cast<float>(15 - j) - 1.0f) << j;
  }
}

TEST(Gguf, OpensAFileFromDiskThroughMmap) {
  const auto path = std::filesystem::path(SPECLAB_BINARY_DIR) / "gguf_test_small.gguf";
  const std::vector<std::byte> bytes = small_file();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.file_size(), bytes.size());
  GgufFile moved = std::move(f);
  EXPECT_EQ(moved.tensor("q8").dequantize()[0], -8.0f);
  std::filesystem::remove(path);
  const std::string missing = error_of([&] { GgufFile::open(path); });
  EXPECT_NE(missing.find("cannot open GGUF file"), std::string::npos) << missing;
  const std::string dir = error_of([&] { GgufFile::open(SPECLAB_BINARY_DIR); });
  EXPECT_NE(dir.find("not a regular file"), std::string::npos) << dir;
}

TEST(Gguf, EveryTruncationThrowsInvalidInput) {
  const std::vector<std::byte> bytes = small_file();
  for (size_t n = 0; n < bytes.size(); ++n) {
    // A copy of exactly n bytes, so reading past it is an error under sanitizers too.
    const std::vector<std::byte> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    const std::string message = error_of([&] { parse(prefix); });
    EXPECT_NE(message.find("test.gguf: at byte"), std::string::npos) << n << ": " << message;
  }
}

TEST(Gguf, RejectsBadMagicAndVersion) {
  Writer w;
  w.str_raw("GGML").u32(3).u64(0).u64(0);
  EXPECT_NE(error_of([&] { parse(w.bytes); }).find("not a GGUF file"), std::string::npos);
  Writer v;
  v.header(0, 0, 1);
  const std::string message = error_of([&] { parse(v.bytes); });
  EXPECT_NE(message.find("at byte 4: version is 1"), std::string::npos) << message;
}

TEST(Gguf, RejectsHugeCounts) {
  const uint64_t huge = uint64_t{1} << 62;
  Writer kv;
  kv.header(0, huge);
  EXPECT_NE(error_of([&] { parse(kv.bytes); }).find("metadata count"), std::string::npos);
  Writer tensors;
  tensors.header(huge, 0);
  EXPECT_NE(error_of([&] { parse(tensors.bytes); }).find("tensor count"), std::string::npos);
  Writer string;
  string.header(0, 1).key("s", T::kString).u64(std::numeric_limits<uint64_t>::max());
  const std::string s = error_of([&] { parse(string.bytes); });
  EXPECT_NE(s.find("metadata 's' needs 18446744073709551615 bytes"), std::string::npos) << s;
  Writer array;
  array.header(0, 1).key("a", T::kArray).u32(static_cast<uint32_t>(T::kUint64)).u64(huge);
  const std::string a = error_of([&] { parse(array.bytes); });
  EXPECT_NE(a.find("at byte 41: metadata 'a' element count"), std::string::npos) << a;
  Writer dims;
  dims.header(1, 0).tensor("t", {huge, huge}, GgmlType::kF32, 0);
  EXPECT_NE(error_of([&] { parse(dims.bytes); }).find("overflows"), std::string::npos);
  // 2^62 floats would be 2^64 bytes, which wraps to 0 if unchecked (found by the fuzzer).
  Writer wraps;
  wraps.header(1, 0).tensor("t", {huge, 1}, GgmlType::kF32, 0).pad(32);
  EXPECT_NE(error_of([&] { parse(wraps.bytes); }).find("more bytes than the file holds"),
            std::string::npos);
  Writer ndims;
  ndims.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, GgmlType::kF32, 0);
  EXPECT_NE(error_of([&] { parse(ndims.bytes); }).find("5 dimensions"), std::string::npos);
}

TEST(Gguf, RejectsDeepNesting) {
  Writer w;
  w.header(0, 1).key("deep", T::kArray);
  for (int i = 0; i < 1000; ++i) w.u32(static_cast<uint32_t>(T::kArray)).u64(1);
  EXPECT_NE(error_of([&] { parse(w.bytes); }).find("nested deeper"), std::string::npos);
}

TEST(Gguf, RejectsMalformedFields) {
  Writer type;
  type.header(0, 1).key("k", static_cast<T>(13)).u32(0);
  EXPECT_NE(error_of([&] { parse(type.bytes); }).find("type is 13"), std::string::npos);
  Writer twice;
  twice.header(0, 2).key("k", T::kUint8).put(uint8_t{1}).key("k", T::kUint8).put(uint8_t{2});
  EXPECT_NE(error_of([&] { parse(twice.bytes); }).find("appears twice"), std::string::npos);
  Writer alignment;
  alignment.header(0, 1).key("general.alignment", T::kUint32).u32(24);
  EXPECT_NE(error_of([&] { parse(alignment.bytes); }).find("power of two"), std::string::npos);
  Writer misaligned;
  misaligned.header(1, 0).tensor("t", {1}, GgmlType::kF32, 4).pad(32).put(0.0f).put(0.0f);
  EXPECT_NE(error_of([&] { parse(misaligned.bytes); }).find("not a multiple of the alignment"),
            std::string::npos);
  Writer blocks;
  blocks.header(1, 0).tensor("t", {16}, GgmlType::kQ4_1, 0).pad(32);
  EXPECT_NE(error_of([&] { parse(blocks.bytes); }).find("multiple of 32"), std::string::npos);
  Writer past;
  past.header(1, 0).tensor("t", {8}, GgmlType::kF32, 0).pad(32).put(0.0f);
  const std::string p = error_of([&] { parse(past.bytes); });
  EXPECT_NE(p.find("tensor 't' (32 bytes at data offset 0) extends past the end"),
            std::string::npos)
      << p;
}

TEST(Gguf, UnsupportedTypesAreClearErrors) {
  // Q6_K (256 elements in 210 bytes) opens and can be listed, but not dequantised.
  Writer w;
  w.header(1, 0).tensor("blk.0.ffn_down.weight", {256}, GgmlType::kQ6_K, 0).pad(32);
  for (int i = 0; i < 210; ++i) w.put(uint8_t{0});
  const GgufFile f = parse(w.bytes);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").n_bytes(), 210u);
  const std::string message = error_of([&] { f.tensor("blk.0.ffn_down.weight").dequantize(); });
  EXPECT_NE(message.find("tensor 'blk.0.ffn_down.weight' has type Q6_K"), std::string::npos)
      << message;
  Writer unknown;
  unknown.header(1, 0).tensor("t", {1}, static_cast<GgmlType>(99), 0);
  const std::string u = error_of([&] { parse(unknown.bytes); });
  EXPECT_NE(u.find("tensor 't' has unknown ggml type 99"), std::string::npos) << u;
}

// ---- the real model ----

const std::filesystem::path kModelDir = std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models";
const std::filesystem::path kModel = kModelDir / "SmolLM2-135M-Instruct.Q4_1.gguf";

#define SPECLAB_REQUIRE_MODEL()                                                              \
  if (!std::filesystem::exists(kModel)) {                                                    \
    GTEST_SKIP() << kModel.string()                                                          \
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)"; \
  }

TEST(GgufModel, ReadsSmolLM2Header) {
  SPECLAB_REQUIRE_MODEL();
  const GgufFile f = GgufFile::open(kModel);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 30);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 576);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(f.at("tokenizer.ggml.tokens").strings().size(), 49152u);
  EXPECT_EQ(f.at("tokenizer.ggml.tokens").strings()[1], "<|im_start|>");
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(f.alignment(), 32u);
}

TEST(GgufModel, EveryTensorIsSupportedAndInsideTheFile) {
  SPECLAB_REQUIRE_MODEL();
  const GgufFile f = GgufFile::open(kModel);
  EXPECT_EQ(f.tensor_infos().size(), 272u);  // 30 blocks × 9 + embedding + output norm
  for (const GgufTensorInfo& info : f.tensor_infos()) {
    EXPECT_TRUE(ggml_type_supported(info.type)) << info.name << " " << ggml_type_name(info.type);
    EXPECT_LE(f.data_offset() + info.offset + info.n_bytes, f.file_size()) << info.name;
  }
  const GgufTensor embedding = f.tensor("token_embd.weight");
  EXPECT_EQ(embedding.type(), GgmlType::kQ8_0);
  EXPECT_EQ(embedding.row_length(), 576);
  EXPECT_EQ(embedding.n_rows(), 49152);
  std::vector<float> row(576);
  embedding.dequantize_row(49151, row);
  for (float x : row) ASSERT_TRUE(std::isfinite(x) && std::abs(x) < 100.0f) << x;
  const GgufTensor q = f.tensor("blk.29.attn_q.weight");
  EXPECT_EQ(q.type(), GgmlType::kQ4_1);
  q.dequantize_row(575, row);
  for (float x : row) ASSERT_TRUE(std::isfinite(x) && std::abs(x) < 100.0f) << x;
}

TEST(GgufModel, FetchModelKeepsAVerifiedFile) {
  SPECLAB_REQUIRE_MODEL();
  const testing::CliRun run =
      testing::run_cli("fetch-model smollm2-135m --dir '" + kModelDir.string() + "'");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("already present and verified"), std::string::npos) << run.output;
}

TEST(Gguf, FetchModelRejectsAnUnknownModel) {
  const testing::CliRun run = testing::run_cli("fetch-model gpt-5");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_NE(run.output.find("unknown model 'gpt-5'; known: smollm2-135m"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace speclab
