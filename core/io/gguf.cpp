// GGUF reader (core/io/gguf.hpp). The parser reads through a cursor that checks every length
// against the bytes left, caps counts by what the remaining bytes could hold (so no allocation
// exceeds a small multiple of the file size) and caps array nesting (so recursion is bounded).
#include "core/io/gguf.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/base/error.hpp"

namespace speclab {

namespace {

constexpr uint32_t kMaxDims = 4;   // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are rejected
constexpr uint64_t kMaxAlignment = 1 << 20;

int64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    default:
      return 0;
  }
}

bool is_integer(GgufValueType t) {
  return scalar_size(t) > 0 && t != GgufValueType::kBool && t != GgufValueType::kFloat32 &&
         t != GgufValueType::kFloat64;
}

// Sign-extends the raw little-endian bits of a scalar of type t.
int64_t signed_value(GgufValueType t, uint64_t bits) {
  switch (t) {
    case GgufValueType::kInt8:
      return static_cast<int8_t>(bits);
    case GgufValueType::kInt16:
      return static_cast<int16_t>(bits);
    case GgufValueType::kInt32:
      return static_cast<int32_t>(bits);
    default:
      return static_cast<int64_t>(bits);
  }
}

struct TypeRow {
  const char* name;
  GgmlTypeTraits traits;
};

// ggml's type_traits: {name, {block elements, block bytes}}; ids 4, 5 and 31-33 were removed.
constexpr TypeRow kGgmlTypes[] = {
    {"F32", {1, 4}},        {"F16", {1, 2}},       {"Q4_0", {32, 18}},     {"Q4_1", {32, 20}},
    {nullptr, {0, 0}},      {nullptr, {0, 0}},     {"Q5_0", {32, 22}},     {"Q5_1", {32, 24}},
    {"Q8_0", {32, 34}},     {"Q8_1", {32, 36}},    {"Q2_K", {256, 84}},    {"Q3_K", {256, 110}},
    {"Q4_K", {256, 144}},   {"Q5_K", {256, 176}},  {"Q6_K", {256, 210}},   {"Q8_K", {256, 292}},
    {"IQ2_XXS", {256, 66}}, {"IQ2_XS", {256, 74}}, {"IQ3_XXS", {256, 98}}, {"IQ1_S", {256, 50}},
    {"IQ4_NL", {32, 18}},   {"IQ3_S", {256, 110}}, {"IQ2_S", {256, 82}},   {"IQ4_XS", {256, 136}},
    {"I8", {1, 1}},         {"I16", {1, 2}},       {"I32", {1, 4}},        {"I64", {1, 8}},
    {"F64", {1, 8}},        {"IQ1_M", {256, 56}},  {"BF16", {1, 2}},       {nullptr, {0, 0}},
    {nullptr, {0, 0}},      {nullptr, {0, 0}},     {"TQ1_0", {256, 54}},   {"TQ2_0", {256, 66}},
};

const TypeRow* type_row(GgmlType type) {
  const auto id = static_cast<uint32_t>(type);
  if (id >= std::size(kGgmlTypes) || kGgmlTypes[id].name == nullptr) return nullptr;
  return &kGgmlTypes[id];
}

uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::string gguf_value_type_name(GgufValueType type) {
  static const char* const kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                       "int32",  "float32", "bool",   "string", "array",
                                       "uint64", "int64",   "float64"};
  const auto id = static_cast<uint32_t>(type);
  return id < std::size(kNames) ? kNames[id] : fmt::format("type {}", id);
}

std::string ggml_type_name(GgmlType type) {
  const TypeRow* row = type_row(type);
  return row ? row->name : fmt::format("type {}", static_cast<uint32_t>(type));
}

GgmlTypeTraits ggml_type_traits(GgmlType type) {
  const TypeRow* row = type_row(type);
  return row ? row->traits : GgmlTypeTraits{};
}

bool ggml_type_supported(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kQ8_0 ||
         type == GgmlType::kQ4_1;
}

// ---- values ----

int64_t GgufValue::as_int() const {
  if (!is_integer(type_)) {
    throw InvalidInput(
        fmt::format("GGUF value is {}; expected an integer", gguf_value_type_name(type_)));
  }
  if (type_ == GgufValueType::kUint64 &&
      bits_ > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw InvalidInput(fmt::format("GGUF uint64 value {} does not fit in int64", bits_));
  }
  return signed_value(type_, bits_);
}

double GgufValue::as_float() const {
  if (type_ == GgufValueType::kFloat32) {
    return std::bit_cast<float>(static_cast<uint32_t>(bits_));
  }
  if (type_ == GgufValueType::kFloat64) return std::bit_cast<double>(bits_);
  if (type_ == GgufValueType::kUint64) return static_cast<double>(bits_);
  if (is_integer(type_)) return static_cast<double>(signed_value(type_, bits_));
  throw InvalidInput(
      fmt::format("GGUF value is {}; expected a number", gguf_value_type_name(type_)));
}

bool GgufValue::as_bool() const {
  if (type_ != GgufValueType::kBool) {
    throw InvalidInput(fmt::format("GGUF value is {}; expected bool", gguf_value_type_name(type_)));
  }
  return bits_ != 0;
}

const std::string& GgufValue::as_string() const {
  if (type_ != GgufValueType::kString) {
    throw InvalidInput(
        fmt::format("GGUF value is {}; expected string", gguf_value_type_name(type_)));
  }
  return string_;
}

size_t GgufValue::size() const {
  if (type_ != GgufValueType::kArray) {
    throw InvalidInput(
        fmt::format("GGUF value is {}; expected array", gguf_value_type_name(type_)));
  }
  return count_;
}

GgufValue GgufValue::at(size_t i) const {
  if (i >= size()) {
    throw InvalidInput(fmt::format("GGUF array index {} out of range (size {})", i, count_));
  }
  if (element_type_ == GgufValueType::kString) {
    GgufValue v;
    v.type_ = GgufValueType::kString;
    v.string_ = strings_[i];
    return v;
  }
  if (element_type_ == GgufValueType::kArray) return items_[i];
  GgufValue v;
  v.type_ = element_type_;
  const auto n = static_cast<size_t>(scalar_size(element_type_));
  std::memcpy(&v.bits_, raw_.data() + i * n, n);  // little-endian host (x86-64, aarch64)
  return v;
}

const std::vector<std::string>& GgufValue::strings() const {
  if (type_ != GgufValueType::kArray || element_type_ != GgufValueType::kString) {
    throw InvalidInput(
        fmt::format("GGUF value is {}{}; expected array of string", gguf_value_type_name(type_),
                    type_ == GgufValueType::kArray ? " of " + gguf_value_type_name(element_type_)
                                                   : std::string()));
  }
  return strings_;
}

// ---- dequantisation ----

float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // 112 = 127 - 15
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: value = mantissa · 2^-24; normalise it.
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

void dequantize(GgmlType type, const std::byte* data, int64_t n, float* out) {
  const GgmlTypeTraits traits = ggml_type_traits(type);
  if (!ggml_type_supported(type) || n % traits.block_elements != 0) {
    throw InvalidInput(fmt::format(
        "dequantize: type {} with {} elements; supported are F32, F16, Q8_0, Q4_1 in whole blocks",
        ggml_type_name(type), n));
  }
  const int64_t n_blocks = n / traits.block_elements;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const std::byte* block = data + b * traits.block_bytes;
    float* y = out + b * traits.block_elements;
    switch (type) {
      case GgmlType::kF32:
        std::memcpy(y, block, sizeof(float));
        break;
      case GgmlType::kF16:
        *y = fp16_to_float(load_u16(block));
        break;
      case GgmlType::kQ8_0: {
        const float d = fp16_to_float(load_u16(block));
        for (int j = 0; j < 32; ++j)
          y[j] = d * static_cast<float>(static_cast<int8_t>(block[2 + j]));
        break;
      }
      case GgmlType::kQ4_1: {
        const float d = fp16_to_float(load_u16(block));
        const float m = fp16_to_float(load_u16(block + 2));
        for (int j = 0; j < 16; ++j) {
          const auto q = static_cast<uint8_t>(block[4 + j]);
          y[j] = d * static_cast<float>(q & 0x0f) + m;
          y[j + 16] = d * static_cast<float>(q >> 4) + m;
        }
        break;
      }
      default:
        break;  // unreachable: checked above
    }
  }
}

void GgufTensor::dequantize_row(int64_t row, std::span<float> out) const {
  if (!ggml_type_supported(type())) {
    throw InvalidInput(
        fmt::format("tensor '{}' has type {}; dequantisation supports F32, F16, Q8_0 and Q4_1",
                    name(), ggml_type_name(type())));
  }
  if (row < 0 || row >= n_rows() || out.size() != static_cast<size_t>(row_length())) {
    throw InvalidInput(
        fmt::format("tensor '{}': row {} into {} floats; expected 0 ≤ row < {} and {} floats",
                    name(), row, out.size(), n_rows(), row_length()));
  }
  const GgmlTypeTraits traits = ggml_type_traits(type());
  const int64_t row_bytes = row_length() / traits.block_elements * traits.block_bytes;
  speclab::dequantize(type(), data + row * row_bytes, row_length(), out.data());
}

std::vector<float> GgufTensor::dequantize() const {
  std::vector<float> out(static_cast<size_t>(n_elements()));
  for (int64_t r = 0; r < n_rows(); ++r) {
    dequantize_row(r, std::span<float>(out).subspan(r * row_length(), row_length()));
  }
  return out;
}

// ---- file ----

struct GgufFile::Mapping {
  void* address = nullptr;
  size_t length = 0;
  ~Mapping() {
    if (address != nullptr) munmap(address, length);
  }
};

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : file_(file), bytes_(file.bytes_) {}

  void parse() {
    if (bytes_.size() < 4 || std::memcmp(bytes_.data(), "GGUF", 4) != 0) {
      fail(0, "magic: expected \"GGUF\" (not a GGUF file)");
    }
    pos_ = 4;
    file_.version_ = read<uint32_t>("version");
    if (file_.version_ != 2 && file_.version_ != 3) {
      fail(4, fmt::format("version is {}; expected 3 (or 2)", file_.version_));
    }
    const uint64_t n_tensors = read<uint64_t>("tensor count");
    const uint64_t n_kv = read<uint64_t>("metadata count");
    // A key-value pair takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
    check_count(n_kv, 13, 16, "metadata count");
    for (uint64_t i = 0; i < n_kv; ++i) {
      const size_t at = pos_;
      std::string key = read_string(fmt::format("metadata {} key", i));
      const std::string field = fmt::format("metadata '{}'", key);
      GgufValue value = read_value(read_type(field + " type"), field, 0);
      if (!file_.metadata_.emplace(std::move(key), std::move(value)).second) {
        fail(at, field + " appears twice");
      }
    }
    check_count(n_tensors, 32, 8, "tensor count");
    if (const GgufValue* a = file_.find("general.alignment")) {
      if (a->type() != GgufValueType::kUint32 || a->bits_ == 0 || !std::has_single_bit(a->bits_) ||
          a->bits_ > kMaxAlignment) {
        fail(0, fmt::format("metadata 'general.alignment' is {} {}; expected a uint32 power of "
                            "two ≤ {}",
                            gguf_value_type_name(a->type()), a->bits_, kMaxAlignment));
      }
      file_.alignment_ = a->bits_;
    }
    file_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) read_tensor_info(i);

    const uint64_t data_offset = round_up(pos_, file_.alignment_);
    if (!file_.tensors_.empty() && data_offset > bytes_.size()) {
      fail(pos_, fmt::format("data section at {} lies past the end", data_offset));
    }
    file_.data_offset_ = data_offset;
    const uint64_t data_size = bytes_.size() - std::min<uint64_t>(data_offset, bytes_.size());
    for (size_t i = 0; i < file_.tensors_.size(); ++i) {
      const GgufTensorInfo& t = file_.tensors_[i];
      if (t.offset % file_.alignment_ != 0) {
        fail(data_offset, fmt::format("tensor '{}' offset {} is not a multiple of the alignment {}",
                                      t.name, t.offset, file_.alignment_));
      }
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        fail(data_offset + std::min(t.offset, data_size),
             fmt::format("tensor '{}' ({} bytes at data offset {}) extends past the end of the "
                         "file ({} data bytes); the file is truncated",
                         t.name, t.n_bytes, t.offset, data_size));
      }
      if (!file_.tensor_index_.emplace(t.name, i).second) {
        fail(data_offset, fmt::format("tensor '{}' appears twice", t.name));
      }
    }
  }

 private:
  [[noreturn]] void fail(size_t offset, const std::string& what) const {
    throw InvalidInput(fmt::format("{}: at byte {}: {}", file_.name_, offset, what));
  }

  size_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, const std::string& field) const {
    if (n > remaining()) {
      fail(pos_, fmt::format("truncated: {} needs {} bytes, {} left", field, n, remaining()));
    }
  }

  // Rejects a count (read at `at`) whose elements, at least `min_bytes` each, could not fit in
  // the bytes left: so no allocation grows past a small multiple of the file size.
  void check_count(uint64_t count, uint64_t min_bytes, size_t at, const std::string& field) const {
    if (count > remaining() / min_bytes) {
      fail(at, fmt::format("{} is {}; the {} bytes left hold at most {}", field, count, remaining(),
                           remaining() / min_bytes));
    }
  }

  template <class T>
  T read(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& field) {
    const uint64_t n = read<uint64_t>(field + " length");
    need(n, field);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  GgufValueType read_type(const std::string& field) {
    const size_t at = pos_;
    const auto t = read<uint32_t>(field);
    if (t > static_cast<uint32_t>(GgufValueType::kFloat64)) {
      fail(at, fmt::format("{} is {}; expected 0..12", field, t));
    }
    return static_cast<GgufValueType>(t);
  }

  GgufValue read_value(GgufValueType type, const std::string& field, int depth) {
    GgufValue v;
    v.type_ = type;
    if (type == GgufValueType::kString) {
      v.string_ = read_string(field);
    } else if (type != GgufValueType::kArray) {
      const auto n = static_cast<size_t>(scalar_size(type));
      need(n, field);
      std::memcpy(&v.bits_, bytes_.data() + pos_, n);
      pos_ += n;
    } else {
      if (depth >= kMaxArrayDepth) {
        fail(pos_, fmt::format("{}: arrays nested deeper than {}", field, kMaxArrayDepth));
      }
      v.element_type_ = read_type(field + " element type");
      const size_t count_at = pos_;
      const uint64_t count = read<uint64_t>(field + " element count");
      const uint64_t min_bytes = v.element_type_ == GgufValueType::kString ? 8
                                 : v.element_type_ == GgufValueType::kArray
                                     ? 12
                                     : scalar_size(v.element_type_);
      check_count(count, min_bytes, count_at, field + " element count");
      v.count_ = count;
      if (v.element_type_ == GgufValueType::kString) {
        v.strings_.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          v.strings_.push_back(read_string(fmt::format("{}[{}]", field, i)));
        }
      } else if (v.element_type_ == GgufValueType::kArray) {
        v.items_.reserve(count);
        for (uint64_t i = 0; i < count; ++i) {
          const std::string item = fmt::format("{}[{}]", field, i);
          v.items_.push_back(read_value(GgufValueType::kArray, item, depth + 1));
        }
      } else {
        const uint64_t n = count * min_bytes;
        v.raw_.assign(reinterpret_cast<const uint8_t*>(bytes_.data() + pos_),
                      reinterpret_cast<const uint8_t*>(bytes_.data() + pos_ + n));
        pos_ += n;
      }
    }
    return v;
  }

  void read_tensor_info(uint64_t i) {
    GgufTensorInfo t;
    t.name = read_string(fmt::format("tensor {} name", i));
    const std::string field = fmt::format("tensor '{}'", t.name);
    const size_t dims_at = pos_;
    const auto n_dims = read<uint32_t>(field + " dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail(dims_at, fmt::format("{} has {} dimensions; expected 1..{}", field, n_dims, kMaxDims));
    }
    t.n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t at = pos_;
      const auto ne = read<uint64_t>(fmt::format("{} dimension {}", field, d));
      // Cap each dimension and the product at 2^62 elements so byte sizes cannot overflow.
      constexpr uint64_t kMax = uint64_t{1} << 62;
      if (ne > kMax || (ne != 0 && static_cast<uint64_t>(t.n_elements) > kMax / ne)) {
        fail(at, fmt::format("{} dimension {} is {}; the element count overflows", field, d, ne));
      }
      t.shape.push_back(static_cast<int64_t>(ne));
      t.n_elements *= static_cast<int64_t>(ne);
    }
    const size_t type_at = pos_;
    t.type = static_cast<GgmlType>(read<uint32_t>(field + " type"));
    const GgmlTypeTraits traits = ggml_type_traits(t.type);
    if (traits.block_elements == 0) {
      fail(type_at,
           fmt::format("{} has unknown ggml type {}", field, static_cast<uint32_t>(t.type)));
    }
    if (t.shape[0] % traits.block_elements != 0) {
      fail(dims_at, fmt::format("{} of type {} has rows of {} elements; expected a multiple of {}",
                                field, ggml_type_name(t.type), t.shape[0], traits.block_elements));
    }
    // A tensor cannot hold more bytes than the file (this also keeps the product from
    // overflowing).
    const auto n_blocks = static_cast<uint64_t>(t.n_elements / traits.block_elements);
    const auto block_bytes = static_cast<uint64_t>(traits.block_bytes);
    if (n_blocks > bytes_.size() / block_bytes) {
      fail(dims_at, fmt::format("{} has {} elements of type {}: more bytes than the file holds",
                                field, t.n_elements, ggml_type_name(t.type)));
    }
    t.n_bytes = n_blocks * block_bytes;
    t.offset = read<uint64_t>(field + " offset");
    file_.tensors_.push_back(std::move(t));
  }

  static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

  GgufFile& file_;
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
};

GgufFile GgufFile::from_memory(std::span<const std::byte> bytes, std::string name) {
  GgufFile file;
  file.bytes_ = bytes;
  file.name_ = std::move(name);
  GgufParser(file).parse();
  return file;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InvalidInput(fmt::format("{}: cannot open GGUF file: {}", name, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InvalidInput(fmt::format("{}: not a regular file", name));
  }
  GgufFile file;
  file.name_ = name;
  file.mapping_ = std::make_unique<Mapping>();
  const auto size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    void* address = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      const int error = errno;
      ::close(fd);
      throw IoError(
          fmt::format("{}: mmap of {} bytes failed: {}", name, size, std::strerror(error)));
    }
    file.mapping_->address = address;
    file.mapping_->length = size;
    file.bytes_ = {static_cast<const std::byte*>(address), size};
  }
  ::close(fd);
  GgufParser(file).parse();
  return file;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::at(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) throw InvalidInput(fmt::format("{}: metadata key '{}' is missing", name_, key));
  return *v;
}

int64_t GgufFile::get_int(std::string_view key) const {
  try {
    return at(key).as_int();
  } catch (const InvalidInput& e) {
    if (find(key) == nullptr) throw;
    throw InvalidInput(fmt::format("{}: metadata '{}': {}", name_, key, e.what()));
  }
}

double GgufFile::get_float(std::string_view key) const {
  try {
    return at(key).as_float();
  } catch (const InvalidInput& e) {
    if (find(key) == nullptr) throw;
    throw InvalidInput(fmt::format("{}: metadata '{}': {}", name_, key, e.what()));
  }
}

std::string GgufFile::get_string(std::string_view key) const {
  try {
    return at(key).as_string();
  } catch (const InvalidInput& e) {
    if (find(key) == nullptr) throw;
    throw InvalidInput(fmt::format("{}: metadata '{}': {}", name_, key, e.what()));
  }
}

bool GgufFile::has_tensor(std::string_view name) const {
  return tensor_index_.find(name) != tensor_index_.end();
}

GgufTensor GgufFile::tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) {
    throw InvalidInput(fmt::format("{}: no tensor named '{}'", name_, name));
  }
  const GgufTensorInfo& info = tensors_[it->second];
  // Checked at parse time; checked again so a view can never point outside the mapping.
  if (data_offset_ + info.offset + info.n_bytes > bytes_.size()) {
    throw InvalidInput(fmt::format("{}: tensor '{}' lies outside the file", name_, name));
  }
  return {&info, bytes_.data() + data_offset_ + info.offset};
}

}  // namespace speclab
