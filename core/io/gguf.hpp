// GGUF reader: the file format of ggml / llama.cpp (github.com/ggml-org/ggml docs/gguf.md), v3
// (v2 is read too: same layout). Header, typed metadata, tensor infos, memory-mapped tensor data
// and dequantisation of F32, F16, Q8_0 and Q4_1 to float. Every length in a file is checked
// against the bytes left before it is read, so a truncated or hostile file throws InvalidInput.
//
// Model files live in data/models/ (git-ignored, never committed); `speclab fetch-model
// smollm2-135m` downloads SmolLM2-135M-Instruct.Q4_1.gguf there (experiments/fetch_model.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

/// Type of a metadata value (gguf_type in ggml).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

/// "uint8", "string", "array", ...; "type N" for values outside the enumeration.
std::string gguf_value_type_name(GgufValueType type);

/// Type of a tensor's elements (ggml_type). Only some have dequantisation here; the others are
/// known by block size so a file holding them still opens and lists its tensors.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

/// "F32", "Q4_1", ...; "type N" for ids no ggml type has.
std::string ggml_type_name(GgmlType type);
/// Elements per block and bytes per block; {0, 0} for ids no ggml type has.
struct GgmlTypeTraits {
  int64_t block_elements = 0;
  int64_t block_bytes = 0;
};
GgmlTypeTraits ggml_type_traits(GgmlType type);
/// Whether dequantise_row() handles the type: F32, F16, Q8_0, Q4_1.
bool ggml_type_supported(GgmlType type);

/// One metadata value: a scalar, a string, or an array (of scalars, strings or arrays).
class GgufValue {
 public:
  GgufValueType type() const { return type_; }

  /// Any integer type, as int64 (throws for a uint64 above INT64_MAX and for non-integers).
  int64_t as_int() const;
  /// float32 or float64 (integers convert too).
  double as_float() const;
  bool as_bool() const;
  const std::string& as_string() const;

  /// Arrays: element type, number of elements, and element i as a value.
  GgufValueType element_type() const { return element_type_; }
  size_t size() const;
  GgufValue at(size_t i) const;
  /// The elements of an array of strings.
  const std::vector<std::string>& strings() const;

 private:
  friend class GgufParser;
  GgufValueType type_ = GgufValueType::kUint8;
  uint64_t bits_ = 0;  // scalar: its little-endian bytes, zero-extended
  std::string string_;
  GgufValueType element_type_ = GgufValueType::kUint8;
  size_t count_ = 0;                  // arrays
  std::vector<uint8_t> raw_;          // array of scalars: count_ × element size bytes
  std::vector<std::string> strings_;  // array of strings
  std::vector<GgufValue> items_;      // array of arrays
};

/// Where a tensor is, as read from the file. shape[0] is the row length (ggml's ne[0], the
/// contiguous dimension); a tensor has shape[1]·shape[2]·shape[3] rows.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  ///< 1 to 4 dimensions, innermost first
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;  ///< from the start of the data section; a multiple of the alignment
  int64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

/// A tensor's bytes inside the mapped file; valid while its GgufFile lives. `data` may be
/// unaligned (dequantisation copies through memcpy).
struct GgufTensor {
  const GgufTensorInfo* info = nullptr;
  const std::byte* data = nullptr;

  const std::string& name() const { return info->name; }
  GgmlType type() const { return info->type; }
  std::span<const int64_t> shape() const { return info->shape; }
  uint64_t n_bytes() const { return info->n_bytes; }
  int64_t n_elements() const { return info->n_elements; }
  int64_t row_length() const { return info->shape[0]; }
  int64_t n_rows() const { return info->shape[0] == 0 ? 0 : n_elements() / info->shape[0]; }

  /// Row `row` (0 ≤ row < n_rows()) as row_length() floats into `out` (that size). Throws
  /// InvalidInput naming the tensor and its type when the type is not supported.
  void dequantize_row(int64_t row, std::span<float> out) const;
  /// The whole tensor, rows one after another (n_elements() floats).
  std::vector<float> dequantize() const;
};

/// IEEE half (binary16) bits to float, subnormals, infinities and NaN included.
float fp16_to_float(uint16_t bits);
/// Dequantises n elements (a multiple of the type's block size) starting at `data`, to `out`.
/// Q8_0 block (34 bytes): fp16 scale d, 32 int8 q → d·q. Q4_1 block (20 bytes): fp16 d, fp16 m,
/// 16 bytes of nibbles → d·q + m, low nibbles are elements 0..15, high nibbles 16..31.
/// Throws InvalidInput for other types than F32, F16, Q8_0, Q4_1.
void dequantize(GgmlType type, const std::byte* data, int64_t n, float* out);

/// A parsed GGUF file. Movable, not copyable; the mapping is released on destruction.
class GgufFile {
 public:
  /// Maps and parses `path`. InvalidInput (naming the file, the offset and the field) for a
  /// missing, truncated or malformed file.
  static GgufFile open(const std::filesystem::path& path);
  /// Parses bytes the caller keeps alive for the lifetime of the result; `name` is used in
  /// error messages.
  static GgufFile from_memory(std::span<const std::byte> bytes, std::string name = "<memory>");

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  ///< start of the data section
  uint64_t file_size() const { return bytes_.size(); }

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  /// nullptr when the key is absent.
  const GgufValue* find(std::string_view key) const;
  /// The value; InvalidInput naming the file and key when absent or of the wrong type.
  const GgufValue& at(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::string get_string(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensor_infos() const { return tensors_; }
  bool has_tensor(std::string_view name) const;
  /// The tensor called `name`; InvalidInput naming the file when there is none.
  GgufTensor tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  friend class GgufParser;
  struct Mapping;
  std::unique_ptr<Mapping> mapping_;
  std::span<const std::byte> bytes_;
  std::string name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace speclab
