// Unit tests of core/io/hdf5_file (docs/hdf5.md): round trips, typed and
// shape-checked reads with messages naming file and dataset, and the write-to-.partial-then-rename
// protocol.
#include "core/io/hdf5_file.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"

namespace speclab {
namespace {
namespace fs = std::filesystem;

// A fresh directory per test under the build tree.
fs::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir = fs::path(SPECLAB_BINARY_DIR) / "test_tmp" / "hdf5_file" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Expects `statement` to throw E whose message contains every one of `parts`.
template <typename E, typename F>
void expect_error(F&& statement, std::initializer_list<std::string> parts) {
  try {
    statement();
    ADD_FAILURE() << "no exception thrown";
  } catch (const E& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message '" << e.what() << "' lacks '" << part << "'";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// Writes datasets and attributes of types the writer never produces (as h5py or other tools do),
// through the raw C API.
class RawFile {
 public:
  explicit RawFile(const fs::path& path)
      : file_(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) {}
  ~RawFile() { H5Fclose(file_); }

  template <typename T>
  void dataset(const char* name, hid_t type, const std::vector<hsize_t>& dims,
               const std::vector<T>& values, hid_t memory_type) {
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t dataset =
        H5Dcreate2(file_, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Dclose(dataset);
    H5Sclose(space);
  }

  template <typename T>
  void attribute(const char* name, hid_t type, const T& value, hid_t memory_type) {
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attribute = H5Acreate2(file_, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, memory_type, &value);
    H5Aclose(attribute);
    H5Sclose(space);
  }

  void fixed_string_attribute(const char* name, const std::string& value) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, value.size());
    H5Tset_strpad(type, H5T_STR_NULLPAD);
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attribute = H5Acreate2(file_, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(attribute, type, value.data());
    H5Aclose(attribute);
    H5Sclose(space);
    H5Tclose(type);
  }

 private:
  hid_t file_;
};

TEST(Hdf5File, RoundTripsDatasetsAndAttributes) {
  const fs::path path = test_dir() / "round_trip.h5";
  const std::vector<float> probs{0.1f, 0.2f, 0.7f, 1.0f, 0.0f, 0.0f};
  const std::vector<int32_t> tokens{-1, 0, 7, std::numeric_limits<int32_t>::max()};
  const std::vector<uint8_t> mask{0, 1, 1, 255};
  std::vector<float> big(1000 * 7);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
  {
    Hdf5Writer writer(path);
    writer.write("probs", probs, std::vector<int64_t>{2, 3});
    writer.write("tokens", tokens, std::vector<int64_t>{4});
    writer.write("group/mask", mask, std::vector<int64_t>{2, 2});
    writer.write("empty", std::span<const int32_t>{}, std::vector<int64_t>{3, 0});
    writer.write("big", big, std::vector<int64_t>{1000, 7}, {.deflate_level = 4});
    writer.write("big_chunked", big, std::vector<int64_t>{1000, 7},
                 {.deflate_level = 1, .chunk = {64, 7}});
    writer.write_attribute("schema", "speclab.test γ");
    writer.write_attribute<uint64_t>("seed", std::numeric_limits<uint64_t>::max());
    writer.write_attribute<int64_t>("offset", -42);
    writer.write_attribute<double>("leniency", 0.25);
    writer.write_attribute<double>("leniency", 0.5);  // replaces
    writer.commit();
  }
  ASSERT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(fs::path(path.string() + ".partial")));

  const Hdf5Reader reader(path);
  EXPECT_TRUE(reader.has_dataset("probs"));
  EXPECT_TRUE(reader.has_dataset("group/mask"));
  EXPECT_FALSE(reader.has_dataset("group"));  // a group, not a dataset
  EXPECT_FALSE(reader.has_dataset("nope"));
  EXPECT_FALSE(reader.has_dataset("nope/deeper"));

  const Hdf5Array<float> probs_in = reader.read<float>("probs", 2);
  EXPECT_EQ(probs_in.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(probs_in.values, probs);
  const Hdf5Array<int32_t> tokens_in = reader.read<int32_t>("tokens", 1);
  EXPECT_EQ(tokens_in.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(tokens_in.values, tokens);
  const Hdf5Array<uint8_t> mask_in = reader.read<uint8_t>("group/mask");
  EXPECT_EQ(mask_in.values, mask);
  const Hdf5Array<int32_t> empty_in = reader.read<int32_t>("empty", 2);
  EXPECT_EQ(empty_in.shape, (std::vector<int64_t>{3, 0}));
  EXPECT_TRUE(empty_in.values.empty());
  EXPECT_EQ(reader.read<float>("big").values, big);
  EXPECT_EQ(reader.read<float>("big_chunked").values, big);
  EXPECT_EQ(reader.dataset_shape("big"), (std::vector<int64_t>{1000, 7}));

  EXPECT_TRUE(reader.has_attribute("schema"));
  EXPECT_FALSE(reader.has_attribute("missing"));
  EXPECT_EQ(reader.read_string_attribute("schema"), "speclab.test γ");
  EXPECT_EQ(reader.read_attribute<uint64_t>("seed"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(reader.read_attribute<int64_t>("offset"), -42);
  EXPECT_EQ(reader.read_attribute<double>("leniency"), 0.5);
  expect_error<InvalidInput>([&] { reader.read_attribute<int64_t>("seed"); }, {"'seed'", "≤"});
  expect_error<InvalidInput>([&] { reader.read_attribute<uint64_t>("offset"); },
                             {"'offset'", "-42"});
  expect_error<InvalidInput>([&] { reader.read_string_attribute("seed"); },
                             {"'seed'", "uint64", "string"});
  expect_error<InvalidInput>([&] { reader.read_attribute<uint64_t>("missing"); },
                             {"round_trip.h5: root attribute 'missing' is missing"});
}

TEST(Hdf5File, ReadsIntegerAndStringTypesOtherToolsWrite) {
  const fs::path path = test_dir() / "foreign.h5";
  {
    RawFile raw(path);
    raw.dataset<int64_t>("tokens64", H5T_STD_I64LE, {3}, {1, -2, 3}, H5T_NATIVE_INT64);
    raw.dataset<int64_t>("too_big", H5T_STD_I64LE, {2}, {1, int64_t{1} << 40}, H5T_NATIVE_INT64);
    raw.dataset<uint16_t>("tokens_u16", H5T_STD_U16BE, {2}, {65535, 4}, H5T_NATIVE_UINT16);
    raw.dataset<double>("probs64", H5T_IEEE_F64LE, {2}, {0.5, 0.5}, H5T_NATIVE_DOUBLE);
    raw.attribute<int32_t>("step", H5T_STD_I32LE, 5, H5T_NATIVE_INT32);
    raw.attribute<int64_t>("negative", H5T_STD_I64LE, -1, H5T_NATIVE_INT64);
    raw.attribute<int64_t>("one", H5T_STD_I64LE, 1, H5T_NATIVE_INT64);
    raw.fixed_string_attribute("method", "token");
  }
  const Hdf5Reader reader(path);
  EXPECT_EQ(reader.read<int32_t>("tokens64").values, (std::vector<int32_t>{1, -2, 3}));
  EXPECT_EQ(reader.read<int32_t>("tokens_u16").values, (std::vector<int32_t>{65535, 4}));
  expect_error<InvalidInput>([&] { reader.read<int32_t>("too_big"); },
                             {"'too_big'", "element 1", "1099511627776"});
  expect_error<InvalidInput>([&] { reader.read<uint8_t>("tokens_u16"); }, {"65535", "[0, 255]"});
  expect_error<InvalidInput>([&] { reader.read<float>("probs64"); },
                             {"foreign.h5: dataset 'probs64' has dtype float64; expected float32"});
  EXPECT_EQ(reader.read_attribute<uint64_t>("step"), 5u);
  EXPECT_EQ(reader.read_attribute<double>("one"), 1.0);
  expect_error<InvalidInput>([&] { reader.read_attribute<uint64_t>("negative"); },
                             {"'negative' is -1; expected a value ≥ 0"});
  EXPECT_EQ(reader.read_string_attribute("method"), "token");
}

TEST(Hdf5File, MissingFileIsInvalidInput) {
  const fs::path path = test_dir() / "IN.h5";
  expect_error<InvalidInput>([&] { Hdf5Reader reader(path); }, {path.string() + ": no such file"});
}

TEST(Hdf5File, NonHdf5FileIsInvalidInput) {
  const fs::path path = test_dir() / "text.h5";
  write_bytes(path, "this is not HDF5\n");
  expect_error<InvalidInput>([&] { Hdf5Reader reader(path); },
                             {path.string() + ": not an HDF5 file"});
}

// A variable-length string lives in the file's global heap ("GCOL" collection: signature, version,
// 3 reserved bytes, the collection's 8-byte size, then per object a 2-byte index, 2-byte reference
// count, 4 reserved bytes and the 8-byte object size). An object size far beyond the collection
// makes HDF5 1.10.8's H5HG_read copy past its buffer: reading the attribute in-process crashes
// (h5py on the same file dies with SIGSEGV). speclab's reader must answer InvalidInput instead,
// and still read the undamaged file and the other attributes of the damaged one.
TEST(Hdf5File, DamagedStringHeapIsInvalidInputNotACrash) {
  const fs::path dir = test_dir();
  const fs::path path = dir / "strings.h5";
  {
    Hdf5Writer writer(path);
    writer.write_attribute("method", "token");
    writer.write_attribute<int64_t>("gamma", 3);
    writer.commit();
  }
  EXPECT_EQ(Hdf5Reader(path).read_string_attribute("method"), "token");
  std::string bytes = read_bytes(path);
  const size_t heap = bytes.find("GCOL");
  ASSERT_NE(heap, std::string::npos);
  ASSERT_EQ(bytes.substr(heap + 16, 2), std::string("\x01\x00", 2));  // object 1 follows
  const uint64_t huge = uint64_t{0x7fffffffff};
  for (int i = 0; i < 8; ++i) bytes[heap + 24 + i] = static_cast<char>((huge >> (8 * i)) & 0xff);
  const fs::path damaged = dir / "damaged.h5";
  write_bytes(damaged, bytes);
  const Hdf5Reader reader(damaged);
  EXPECT_EQ(reader.read_attribute<int64_t>("gamma"), 3);
  expect_error<InvalidInput>([&] { reader.read_string_attribute("method"); },
                             {damaged.string() + ": root attribute 'method' is damaged"});
}

TEST(Hdf5File, WrongDtypeIsRejected) {
  const fs::path path = test_dir() / "dtype.h5";
  {
    Hdf5Writer writer(path);
    writer.write("draft_tokens", std::vector<int32_t>{1, 2}, std::vector<int64_t>{1, 2});
    writer.write("probs_target", std::vector<float>{0.5f, 0.5f}, std::vector<int64_t>{1, 1, 2});
    writer.commit();
  }
  const Hdf5Reader reader(path);
  expect_error<InvalidInput>(
      [&] { reader.read<float>("draft_tokens", 3, "[B, γ+1, V]"); },
      {"dtype.h5: dataset 'draft_tokens' has dtype int32; expected float32"});
  // Floats are never truncated into token ids.
  expect_error<InvalidInput>([&] { reader.read<int32_t>("probs_target", 2, "[B, γ]"); },
                             {"dataset 'probs_target' has dtype float32", "integer"});
}

TEST(Hdf5File, WrongRankIsRejected) {
  const fs::path path = test_dir() / "IN.h5";
  {
    Hdf5Writer writer(path);
    writer.write("probs_target", std::vector<float>{0.5f, 0.5f}, std::vector<int64_t>{1, 2});
    writer.commit();
  }
  const Hdf5Reader reader(path);
  expect_error<InvalidInput>(
      [&] { reader.read<float>("probs_target", 3, "[B, γ+1, V]"); },
      {path.string() + ": dataset 'probs_target' has rank 2; expected rank 3 [B, γ+1, V]"});
}

TEST(Hdf5File, MissingDatasetIsRejected) {
  const fs::path path = test_dir() / "IN.h5";
  {
    Hdf5Writer writer(path);
    writer.commit();
  }
  const Hdf5Reader reader(path);
  expect_error<InvalidInput>([&] { reader.read<float>("probs_draft", 3, "[B, γ, V]"); },
                             {"dataset 'probs_draft' is missing; expected float32 [B, γ, V]"});
  expect_error<InvalidInput>([&] { reader.dataset_shape("probs_draft"); }, {"'probs_draft'"});
}

TEST(Hdf5File, UncommittedWriterLeavesNoFile) {
  const fs::path path = test_dir() / "OUT.h5";
  const fs::path partial = path.string() + ".partial";
  {
    Hdf5Writer writer(path);
    writer.write("x", std::vector<float>{1.0f}, std::vector<int64_t>{1});
    EXPECT_TRUE(fs::exists(partial));
    EXPECT_FALSE(fs::exists(path));
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(partial));
}

TEST(Hdf5File, ExistingFileIsUntouchedUntilCommit) {
  const fs::path path = test_dir() / "OUT.h5";
  const std::string old_bytes = "previous results, not HDF5";
  write_bytes(path, old_bytes);
  {
    Hdf5Writer writer(path);
    writer.write("x", std::vector<float>{1.0f}, std::vector<int64_t>{1});
    EXPECT_EQ(read_bytes(path), old_bytes);
  }
  EXPECT_EQ(read_bytes(path), old_bytes);
  {
    Hdf5Writer writer(path);
    writer.write("x", std::vector<float>{2.0f}, std::vector<int64_t>{1});
    writer.commit();
    EXPECT_TRUE(writer.committed());
  }
  EXPECT_EQ(Hdf5Reader(path).read<float>("x").values, std::vector<float>{2.0f});
  EXPECT_FALSE(fs::exists(path.string() + ".partial"));
}

TEST(Hdf5File, WriterRejectsBadUse) {
  const fs::path dir = test_dir();
  expect_error<InvalidInput>([&] { Hdf5Writer writer(dir / "no_such_dir" / "OUT.h5"); },
                             {"no_such_dir", "does not exist"});
  Hdf5Writer writer(dir / "OUT.h5");
  expect_error<InvalidInput>(
      [&] {
        writer.write("x", std::vector<float>{1.0f, 2.0f}, std::vector<int64_t>{3});
      },
      {"'x' has 2 values; shape [3] needs 3"});
  writer.write("x", std::vector<float>{1.0f}, std::vector<int64_t>{1});
  EXPECT_THROW(writer.write("x", std::vector<float>{1.0f}, std::vector<int64_t>{1}), Error);
  writer.commit();
  EXPECT_THROW(writer.write("y", std::vector<float>{1.0f}, std::vector<int64_t>{1}), Error);
  EXPECT_THROW(writer.commit(), Error);
}

TEST(Hdf5File, ExtendableDatasetsGrowByAppend) {
  const fs::path path = test_dir() / "log.h5";
  {
    Hdf5Writer writer(path);
    writer.create_extendable<int32_t>("steps/accepted", 4);
    writer.create_extendable<double>("steps/seconds", 4, 0);
    writer.create_extendable<uint64_t>("seeds");
    writer.append("steps/accepted", std::vector<int32_t>{1, 2, 3});
    writer.append("steps/accepted", std::vector<int32_t>{});
    writer.append("steps/accepted", std::vector<int32_t>{4, 5, 6, 7, 8});
    writer.append("steps/seconds", std::vector<double>{0.5});
    writer.append("seeds", std::vector<uint64_t>{UINT64_MAX});
    // Appending another element type or to a fixed dataset is a programming error.
    EXPECT_THROW(writer.append("steps/accepted", std::vector<double>{1.0}), Error);
    writer.write("fixed", std::vector<int64_t>{1, -2}, std::vector<int64_t>{2});
    EXPECT_THROW(writer.append("fixed", std::vector<int64_t>{3}), Error);
    EXPECT_THROW(writer.create_extendable<int32_t>("steps/accepted"), Error);
    EXPECT_THROW(writer.create_extendable<int32_t>("bad_chunk", 0), InvalidInput);
    writer.commit();
  }
  const Hdf5Reader reader(path);
  EXPECT_EQ(reader.read<int32_t>("steps/accepted", 1).values,
            (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(reader.read<double>("steps/seconds").values, std::vector<double>{0.5});
  EXPECT_EQ(reader.read<int64_t>("fixed").values, (std::vector<int64_t>{1, -2}));
  const Hdf5DatasetInfo info = reader.dataset_info("steps/accepted");
  EXPECT_EQ(info.shape, std::vector<int64_t>{8});
  EXPECT_EQ(info.dtype, "int32");
  EXPECT_TRUE(info.chunked);
  EXPECT_TRUE(info.deflate);
  EXPECT_TRUE(info.extendable);
  EXPECT_FALSE(reader.dataset_info("steps/seconds").deflate);
  const Hdf5DatasetInfo fixed = reader.dataset_info("fixed");
  EXPECT_FALSE(fixed.chunked || fixed.extendable);
  EXPECT_EQ(reader.dataset_names(),
            (std::vector<std::string>{"fixed", "seeds", "steps/accepted", "steps/seconds"}));
}

TEST(Hdf5File, ReadDoubleWidensFloatsAndRejectsIntegers) {
  const fs::path path = test_dir() / "d.h5";
  {
    Hdf5Writer writer(path);
    writer.write("f32", std::vector<float>{0.25f}, std::vector<int64_t>{1});
    writer.write("f64", std::vector<double>{0.1}, std::vector<int64_t>{1});
    writer.write("i32", std::vector<int32_t>{1}, std::vector<int64_t>{1});
    writer.commit();
  }
  const Hdf5Reader reader(path);
  EXPECT_EQ(reader.read<double>("f32").values, std::vector<double>{0.25});
  EXPECT_EQ(reader.read<double>("f64").values, std::vector<double>{0.1});
  expect_error<InvalidInput>([&] { reader.read<double>("i32"); },
                             {"'i32' has dtype int32; expected float32 or float64"});
  expect_error<InvalidInput>([&] { reader.read<int64_t>("f64"); }, {"'f64' has dtype float64"});
}

TEST(Hdf5File, TemplatesAgreeWithTheNamedForms) {
  const fs::path path = test_dir() / "t.h5";
  {
    Hdf5Writer writer(path);
    EXPECT_EQ(writer.partial_path(), partial_path(path));
    writer.write("mask", std::array<uint8_t, 2>{1, 0}, std::vector<int64_t>{2});
    writer.write_attribute<uint64_t>("big", UINT64_MAX);
    writer.write_attribute("half", 0.5);
    writer.write_attribute("name", "x");
    writer.commit();
  }
  const Hdf5Reader reader(path);
  EXPECT_EQ(reader.read<uint8_t>("mask").values, reader.read<uint8_t>("mask").values);
  EXPECT_EQ(reader.read_attribute<uint64_t>("big"), UINT64_MAX);
  expect_error<InvalidInput>(
      [&] { reader.read_attribute<int64_t>("big"); },
      {"'big' is 18446744073709551615; expected a value ≤ 9223372036854775807"});
  expect_error<InvalidInput>([&] { reader.read_attribute<double>("big"); },
                             {"expected a value ≤ 9223372036854775807"});
  EXPECT_EQ(reader.read_attribute<double>("half"), 0.5);
  expect_error<InvalidInput>([&] { reader.read_attribute<int64_t>("half"); },
                             {"'half' has type float64; expected an integer"});
  expect_error<InvalidInput>([&] { reader.read_attribute<uint64_t>("name"); },
                             {"'name' has type string; expected an unsigned integer (uint64)"});
  EXPECT_EQ(reader.read_string_attribute("name"), "x");
}

TEST(Hdf5File, ListsAttributesWithTheirKinds) {
  const fs::path path = test_dir() / "a.h5";
  {
    Hdf5Writer writer(path);
    writer.write_attribute("s", "text");
    writer.write_attribute<int64_t>("i", -1);
    writer.write_attribute<uint64_t>("u", 1);
    writer.write_attribute<double>("x", 0.5);
    writer.commit();
  }
  const Hdf5Reader reader(path);
  EXPECT_EQ(reader.attribute_names(), (std::vector<std::string>{"i", "s", "u", "x"}));
  EXPECT_EQ(reader.attribute_kind("s"), Hdf5AttributeKind::kString);
  EXPECT_EQ(reader.attribute_kind("i"), Hdf5AttributeKind::kSigned);
  EXPECT_EQ(reader.attribute_kind("u"), Hdf5AttributeKind::kUnsigned);
  EXPECT_EQ(reader.attribute_kind("x"), Hdf5AttributeKind::kFloat);
  EXPECT_THROW(reader.attribute_kind("missing"), InvalidInput);
}

// A chunked float32 dataset NAME of `dims` created but never written (its values would be the
// fill value), in a file of a few hundred bytes.
void write_unwritten_dataset(const fs::path& path, std::vector<hsize_t> dims) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  std::vector<hsize_t> chunk(dims.size(), 1);
  H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t set = H5Dcreate2(file, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  ASSERT_GE(set, 0);
  H5Dclose(set);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
}

// Found by tests/fuzz/verify_batch_fuzz: a few hundred bytes declaring 2^60 values made the
// reader allocate for them (std::length_error, an internal error) instead of refusing the file.
TEST(Hdf5File, UnwrittenDatasetIsRefusedBeforeAllocating) {
  const fs::path dir = test_dir();
  write_unwritten_dataset(dir / "f.h5", {hsize_t{1} << 20, hsize_t{1} << 20, hsize_t{1} << 20});
  const Hdf5Reader reader(dir / "f.h5");
  expect_error<InvalidInput>([&] { reader.read<float>("x"); },
                             {"f.h5: dataset 'x' of 1152921504606846976 values was never written"});
}

TEST(Hdf5File, ShapeWhoseProductOverflowsIsRefused) {
  const fs::path dir = test_dir();
  write_unwritten_dataset(dir / "f.h5", {hsize_t{1} << 40, hsize_t{1} << 40});
  const Hdf5Reader reader(dir / "f.h5");
  expect_error<InvalidInput>([&] { reader.read<float>("x"); },
                             {"dataset 'x' has 2 dimensions whose product exceeds 2^63"});
}

// Found by the fuzzer: HDF5 failing on a damaged part of a file it opened escaped as IoError (an
// internal error, exit 1). A damaged input is bad input.
TEST(Hdf5File, DamagedCompressedDataIsInvalidInput) {
  const fs::path dir = test_dir();
  const std::vector<float> values(4096, 0.25f);
  {
    Hdf5Writer writer(dir / "f.h5");
    writer.write("x", values, std::vector<int64_t>{4096}, {.deflate_level = 4});
    writer.commit();
  }
  // Overwrite the one compressed chunk with bytes that are no deflate stream.
  haddr_t address = 0;
  hsize_t size = 0;
  {
    const hid_t file = H5Fopen((dir / "f.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t set = H5Dopen2(file, "x", H5P_DEFAULT);
    const hsize_t origin[1] = {0};
    uint32_t mask = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(set, origin, &mask, &address, &size), 0);
    H5Dclose(set);
    H5Fclose(file);
  }
  std::string bytes = read_bytes(dir / "f.h5");
  ASSERT_LE(address + size, bytes.size());
  for (hsize_t i = 0; i < size; ++i) bytes[address + i] = '\xff';
  write_bytes(dir / "f.h5", bytes);
  const Hdf5Reader reader(dir / "f.h5");
  expect_error<InvalidInput>([&] { reader.read<float>("x"); }, {"f.h5: cannot read dataset 'x'"});
}

}  // namespace
}  // namespace speclab
