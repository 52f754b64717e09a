// A thin RAII wrapper over the HDF5 1.10 C API for the result files of docs/hdf5.md:
// typed, shape-checked reads that throw speclab errors naming the file and dataset, and a
// writer that writes NAME.partial and renames it onto NAME only on commit().
#pragma once

#include <hdf5.h>

#include <concepts>
#include <cstdint>
#include <filesystem>
#include <map>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

/// Owns one HDF5 identifier and closes it with the matching H5?close function.
class Hdf5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Hdf5Handle() = default;
  Hdf5Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hdf5Handle(Hdf5Handle&& other) noexcept;
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept;
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  ~Hdf5Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset();
  /// Closes now and reports whether HDF5 succeeded (the destructor cannot).
  bool close();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

/// A dataset read into memory: row-major values and the shape.
template <typename T>
struct Hdf5Array {
  std::vector<int64_t> shape;
  std::vector<T> values;
};

/// Any rank is accepted when a read passes this as expected_rank.
inline constexpr int kAnyRank = -1;

/// "[4, 3, 10]".
std::string format_shape(std::span<const int64_t> shape);

/// How a dataset is stored, for inspection and tests.
struct Hdf5DatasetInfo {
  std::vector<int64_t> shape;
  std::string dtype;  ///< "int32", "float64", "string", ...
  bool chunked = false;
  bool deflate = false;     ///< has the deflate filter
  bool extendable = false;  ///< some dimension has an unlimited maximum
};

/// The type of a root attribute, as read_attribute<T> and read_string_attribute see it.
enum class Hdf5AttributeKind { kString, kSigned, kUnsigned, kFloat, kOther };

/// The element types of datasets, each stored as one HDF5 type (hdf5_type<T> in hdf5_file.cpp,
/// where every member template below is instantiated for the types its concept admits).
template <typename T>
concept Hdf5Element =
    std::same_as<T, float> || std::same_as<T, double> || std::same_as<T, int32_t> ||
    std::same_as<T, uint8_t> || std::same_as<T, int64_t> || std::same_as<T, uint64_t>;

/// The element types a dataset is read as: integers are read through int64, so not uint64.
template <typename T>
concept Hdf5ReadElement = Hdf5Element<T> && !std::same_as<T, uint64_t>;

/// The numeric types of root attributes (strings have their own functions).
template <typename T>
concept Hdf5AttributeScalar =
    std::same_as<T, int64_t> || std::same_as<T, uint64_t> || std::same_as<T, double>;

/// Values a dataset is written from: a contiguous range of an Hdf5Element (std::span,
/// std::vector, std::array, a C array).
template <typename R>
concept Hdf5Values = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    Hdf5Element<std::ranges::range_value_t<R>>;

/// An existing HDF5 file opened read-only. Every error names the file (as given) and the dataset
/// or attribute, and is InvalidInput: a file HDF5 opens but cannot read (truncated, corrupt,
/// hostile) is bad input to the command that reads it.
class Hdf5Reader {
 public:
  /// Throws InvalidInput "PATH: no such file" or "PATH: not an HDF5 file".
  explicit Hdf5Reader(std::filesystem::path path);

  const std::filesystem::path& path() const { return path_; }

  bool has_dataset(std::string_view name) const;
  /// Throws InvalidInput when the dataset is missing.
  std::vector<int64_t> dataset_shape(std::string_view name) const;

  /// Reads a dataset as T, checking its type and, with expected_rank ≥ 0, its rank; dims_hint
  /// (e.g. "[B, γ+1, V]") goes into the message: "IN.h5: dataset 'probs_target' has rank 2;
  /// expected rank 3 [B, γ+1, V]". float reads float32 only (float64 is rejected rather than
  /// silently narrowed); double reads float32 or float64 (widening is exact); an integer T reads
  /// any integer dataset, rejecting floats and values outside T's range.
  template <Hdf5ReadElement T>
  Hdf5Array<T> read(std::string_view name, int expected_rank = kAnyRank,
                    std::string_view dims_hint = {}) const;

  /// Every dataset in the file, as full paths without the leading '/' ("steps/accepted"), sorted.
  std::vector<std::string> dataset_names() const;
  /// Shape, type and storage of a dataset; throws InvalidInput when it is missing.
  Hdf5DatasetInfo dataset_info(std::string_view name) const;
  /// Names of the root group's links (datasets, groups, ...), sorted: unlike dataset_names() it
  /// opens no object, so a damaged object cannot stop the listing.
  std::vector<std::string> root_names() const;
  /// Names of the root group's attributes, sorted.
  std::vector<std::string> attribute_names() const;
  /// Throws InvalidInput when the attribute is missing.
  Hdf5AttributeKind attribute_kind(std::string_view name) const;

  /// Attributes of the root group. An integer T accepts any integer type whose value fits;
  /// double accepts floats and integers (h5py stores a Python int as int64); read_string
  /// accepts fixed and variable length.
  bool has_attribute(std::string_view name) const;
  std::string read_string_attribute(std::string_view name) const;
  template <Hdf5AttributeScalar T>
  T read_attribute(std::string_view name) const;

 private:
  std::filesystem::path path_;
  Hdf5Handle file_;
};

/// How a dataset is stored.
struct Hdf5WriteOptions {
  int deflate_level = 0;       ///< 0: contiguous, uncompressed; 1..9: chunked + deflate
  std::vector<int64_t> chunk;  ///< chunk shape when compressing; empty: about 1 MiB along dim 0
};

/// A new HDF5 file written as PATH.partial. commit() flushes, closes, fsyncs and renames it onto
/// PATH; until then an existing PATH is untouched, and destroying an uncommitted writer removes
/// PATH.partial, so a crash or an error never leaves a half-written file under the real name.
class Hdf5Writer {
 public:
  /// Creates (truncating) PATH.partial. Throws InvalidInput when the directory does not exist or
  /// the file cannot be created there (permissions, a read-only filesystem), naming the reason.
  explicit Hdf5Writer(std::filesystem::path path);
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;
  ~Hdf5Writer();

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path partial_path() const;

  /// Writes a dataset of the given shape (Π shape = the number of values), stored as the values'
  /// element type. Names may contain '/'; intermediate groups are created.
  template <Hdf5Values Values>
  void write(std::string_view name, const Values& values, std::span<const int64_t> shape,
             const Hdf5WriteOptions& options = {}) {
    write_values(name, std::span(std::ranges::data(values), std::ranges::size(values)), shape,
                 options);
  }

  /// Creates an empty 1-D dataset of unlimited length, chunked (`chunk` elements per chunk) and
  /// deflate-compressed (level 1..9; 0 stores chunks uncompressed), to be grown with append():
  /// step logs whose length is known only at the end. T is the element type of the later appends.
  template <Hdf5Element T>
  void create_extendable(std::string_view name, int64_t chunk = 4096, int deflate_level = 4);
  /// Appends values to a dataset made by create_extendable<T> with the same T.
  template <Hdf5Values Values>
  void append(std::string_view name, const Values& values) {
    append_values(name, std::span(std::ranges::data(values), std::ranges::size(values)));
  }

  /// Root attributes; an existing attribute of the same name is replaced. Strings are stored as
  /// variable-length UTF-8.
  void write_attribute(std::string_view name, std::string_view value);
  template <Hdf5AttributeScalar T>
  void write_attribute(std::string_view name, T value);

  /// The string attributes `units` and `description` of the existing dataset NAME (replaced when
  /// present), so that a file explains itself to whoever opens it.
  void describe(std::string_view dataset, std::string_view units, std::string_view description);

  /// Makes the file appear under PATH, atomically. Throws IoError on failure (PATH.partial is
  /// then removed and PATH is untouched). No writes are allowed afterwards.
  void commit();
  bool committed() const { return committed_; }

 private:
  template <Hdf5Element T>
  void write_values(std::string_view name, std::span<const T> values,
                    std::span<const int64_t> shape, const Hdf5WriteOptions& options);
  template <Hdf5Element T>
  void append_values(std::string_view name, std::span<const T> values);
  void write_dataset(std::string_view name, hid_t file_type, hid_t memory_type, const void* data,
                     size_t count, std::span<const int64_t> shape, const Hdf5WriteOptions& options);
  void write_attribute_value(std::string_view name, hid_t file_type, hid_t memory_type,
                             const void* data);
  void check_open(std::string_view what) const;
  void create_extendable_dataset(std::string_view name, hid_t file_type, hid_t memory_type,
                                 int64_t chunk, int deflate_level);
  void append_dataset(std::string_view name, hid_t memory_type, const void* data, size_t count);

  std::filesystem::path path_;
  Hdf5Handle file_;
  bool committed_ = false;
  std::map<std::string, hid_t, std::less<>> extendable_types_;  ///< name -> memory type
};

}  // namespace speclab
