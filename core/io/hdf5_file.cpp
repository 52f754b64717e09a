// A thin RAII wrapper over the HDF5 1.10 C API (docs/hdf5.md). HDF5's own error
// printing is switched off; failures become speclab errors naming the file and the dataset.
#include "core/io/hdf5_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

// Under AddressSanitizer (the fuzz targets) a child's overread inside HDF5 is reported, not
// crashed on: read_variable_string's child then exits non-zero quietly, without the fuzzer's
// crash handler.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPECLAB_HDF5_CHILD_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SPECLAB_HDF5_CHILD_UNDER_ASAN 1
#endif
#ifdef SPECLAB_HDF5_CHILD_UNDER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"

namespace speclab {
namespace fs = std::filesystem;

namespace {

// HDF5's atexit handler closes every file still open at exit. A file whose flush or close failed
// (a full disk, a file-size limit) stays open inside the library, and closing it again at exit
// crashes HDF5 1.10 (a segfault in H5F__close_cb), turning a clean "exit 2" into SIGSEGV. Every
// file this wrapper owns is closed by its RAII handle, so the handler is not needed; it must be
// disabled before the library initialises, hence at static-initialisation time.
[[maybe_unused]] const bool kHdf5AtexitDisabled = [] {
  H5dont_atexit();
  return true;
}();

// The thread-safe HDF5 build keeps error-stack settings per thread, so each thread that calls in
// must switch the automatic printing off for itself.
void silence_hdf5_errors() {
  thread_local bool silenced = false;
  if (!silenced) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    silenced = true;
  }
}

herr_t collect_innermost(unsigned n, const H5E_error2_t* error, void* client) {
  auto* out = static_cast<std::string*>(client);
  if (n == 0 && error->desc != nullptr) *out = error->desc;
  return 0;
}

// " (HDF5: <innermost error description>)", or "" when the stack is empty; clears the stack.
std::string hdf5_detail() {
  std::string desc;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_innermost, &desc);
  H5Eclear2(H5E_DEFAULT);
  return desc.empty() ? std::string() : fmt::format(" (HDF5: {})", desc);
}

// ": <strerror(errno)>" when the last system call failed (ENOSPC, EFBIG), else "".
std::string system_detail() {
  return errno != 0 ? fmt::format(": {}", std::error_code(errno, std::generic_category()).message())
                    : std::string();
}

// File locking stays on, but a filesystem without flock (NFS, Lustre on a cluster) is not an
// error: the writer works on a private .partial file and readers only read.
Hdf5Handle file_access_properties() {
  Hdf5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (fapl.valid()) H5Pset_file_locking(fapl.get(), 1, 1);
  return fapl;
}

std::string describe_type(hid_t type) {
  const H5T_class_t type_class = H5Tget_class(type);
  const size_t bytes = H5Tget_size(type);
  switch (type_class) {
    case H5T_FLOAT:
      return fmt::format("float{}", 8 * bytes);
    case H5T_INTEGER:
      return fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", 8 * bytes);
    case H5T_STRING:
      return "string";
    case H5T_ENUM:
      return "enum (a bool?)";
    case H5T_COMPOUND:
      return "compound";
    default:
      return fmt::format("HDF5 type class {}", static_cast<int>(type_class));
  }
}

std::string with_hint(std::string_view hint) {
  return hint.empty() ? std::string() : fmt::format(" {}", hint);
}

void check_name(std::string_view name, const fs::path& file) {
  if (name.empty() || name.find('\0') != std::string_view::npos) {
    throw InvalidInput(fmt::format("{}: dataset or attribute name '{}' is empty or holds a NUL",
                                   file.string(), name));
  }
}

// The HDF5 side of an Hdf5Element: the little-endian type it is stored as, the native type it
// is read and written through, and its name in the reader's messages.
struct Hdf5Type {
  hid_t stored;
  hid_t native;
  const char* name;
};

template <Hdf5Element T>
Hdf5Type hdf5_type() {
  if constexpr (std::same_as<T, float>) {
    return {H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, "float32"};
  } else if constexpr (std::same_as<T, double>) {
    return {H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, "float64"};
  } else if constexpr (std::same_as<T, int32_t>) {
    return {H5T_STD_I32LE, H5T_NATIVE_INT32, "int32"};
  } else if constexpr (std::same_as<T, uint8_t>) {
    return {H5T_STD_U8LE, H5T_NATIVE_UINT8, "uint8"};
  } else if constexpr (std::same_as<T, int64_t>) {
    return {H5T_STD_I64LE, H5T_NATIVE_INT64, "int64"};
  } else {
    return {H5T_STD_U64LE, H5T_NATIVE_UINT64, "uint64"};
  }
}

// A dataset opened for reading with its type, dataspace and shape checked.
struct OpenDataset {
  Hdf5Handle dataset;
  Hdf5Handle type;
  std::vector<int64_t> shape;
  size_t count = 0;
};

enum class ElementKind { kFloat32, kFloatAny, kInteger };

// No filter speclab reads expands data more than deflate's bound of about 1032:1.
constexpr uint64_t kMaxExpansion = 1100;

// A dataset's values must be stored in the file, written: values that would come from elsewhere
// (an external file, a virtual mapping), from the fill value (never written), or that the file
// is too small to hold, are refused before anything is allocated for them, so that a small
// damaged or hostile file cannot make the reader allocate without bound.
void check_storage(const std::string& file_name, const OpenDataset& open, std::string_view name) {
  if (open.count == 0) return;
  const hid_t dataset = open.dataset.get();
  const Hdf5Handle dcpl(H5Dget_create_plist(dataset), H5Pclose);
  if (!dcpl.valid()) {
    throw InvalidInput(fmt::format("{}: cannot read the storage of dataset '{}'{}", file_name, name,
                                   hdf5_detail()));
  }
  if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL || H5Pget_external_count(dcpl.get()) > 0) {
    throw InvalidInput(fmt::format(
        "{}: dataset '{}' keeps its values outside the file (a virtual or external dataset); "
        "expected them stored in the file",
        file_name, name));
  }
  // H5Dget_space_status cannot tell: it calls a compressed dataset "partly allocated".
  const uint64_t stored = H5Dget_storage_size(dataset);
  if (stored == 0) {
    throw InvalidInput(
        fmt::format("{}: dataset '{}' of {} values was never written; expected its values stored",
                    file_name, name, open.count));
  }
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(file_name, ec);
  const uint64_t element = H5Tget_size(open.type.get());
  const bool too_large = element == 0 || open.count > UINT64_MAX / element ||
                         open.count * element / kMaxExpansion > std::min(stored, file_size);
  if (!ec && (stored > file_size || too_large)) {
    throw InvalidInput(fmt::format(
        "{}: dataset '{}' declares {} values of {} bytes but the file of {} bytes stores {} bytes "
        "of them; the file is damaged",
        file_name, name, open.count, element, file_size, stored));
  }
}

OpenDataset open_dataset(const Hdf5Reader& reader, hid_t file, std::string_view name,
                         ElementKind kind, std::string_view expected_type, int expected_rank,
                         std::string_view dims_hint) {
  const std::string file_name = reader.path().string();
  if (!reader.has_dataset(name)) {
    throw InvalidInput(fmt::format("{}: dataset '{}' is missing; expected {}{}", file_name, name,
                                   expected_type, with_hint(dims_hint)));
  }
  const std::string c_name(name);
  OpenDataset open;
  open.dataset = Hdf5Handle(H5Dopen2(file, c_name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!open.dataset.valid()) {
    throw InvalidInput(
        fmt::format("{}: cannot open dataset '{}'{}", file_name, name, hdf5_detail()));
  }
  Hdf5Handle space(H5Dget_space(open.dataset.get()), H5Sclose);
  open.type = Hdf5Handle(H5Dget_type(open.dataset.get()), H5Tclose);
  if (!space.valid() || !open.type.valid()) {
    throw InvalidInput(fmt::format("{}: cannot read the dataspace or type of dataset '{}'{}",
                                   file_name, name, hdf5_detail()));
  }
  // The type first: a dataset of the wrong kind (token ids given as probabilities) is the more
  // telling mistake, whatever its rank.
  const H5T_class_t type_class = H5Tget_class(open.type.get());
  const bool type_ok = kind == ElementKind::kFloat32
                           ? type_class == H5T_FLOAT && H5Tget_size(open.type.get()) == 4
                       : kind == ElementKind::kFloatAny
                           ? type_class == H5T_FLOAT && H5Tget_size(open.type.get()) <= 8
                           : type_class == H5T_INTEGER;
  if (!type_ok) {
    throw InvalidInput(fmt::format("{}: dataset '{}' has dtype {}; expected {}{}", file_name, name,
                                   describe_type(open.type.get()), expected_type,
                                   with_hint(dims_hint)));
  }
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) {
    throw InvalidInput(
        fmt::format("{}: cannot read the rank of dataset '{}'{}", file_name, name, hdf5_detail()));
  }
  if (expected_rank != kAnyRank && rank != expected_rank) {
    throw InvalidInput(fmt::format("{}: dataset '{}' has rank {}; expected rank {}{}", file_name,
                                   name, rank, expected_rank, with_hint(dims_hint)));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0) {
    throw InvalidInput(
        fmt::format("{}: cannot read the shape of dataset '{}'{}", file_name, name, hdf5_detail()));
  }
  // The element count as a product that must fit int64, so that no later size computation over
  // the shape can overflow.
  uint64_t count = 1;
  for (const hsize_t d : dims) {
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (d != 0 && count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / d)) {
      throw InvalidInput(
          fmt::format("{}: dataset '{}' has {} dimensions whose product exceeds "
                      "2^63; the file is damaged",
                      file_name, name, rank));
    }
    count *= d;
  }
  open.shape.assign(dims.begin(), dims.end());
  open.count = static_cast<size_t>(count);
  check_storage(file_name, open, name);
  return open;
}

// Integers of any width and sign are read as int64 (HDF5 converts) and then narrowed with a range
// check, because HDF5's own narrowing clamps silently.
template <typename T>
Hdf5Array<T> read_integer(const Hdf5Reader& reader, hid_t file, std::string_view name,
                          std::string_view expected_type, int expected_rank,
                          std::string_view dims_hint) {
  OpenDataset open = open_dataset(reader, file, name, ElementKind::kInteger, expected_type,
                                  expected_rank, dims_hint);
  std::vector<int64_t> wide(open.count);
  if (open.count > 0 && H5Dread(open.dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                wide.data()) < 0) {
    throw InvalidInput(
        fmt::format("{}: cannot read dataset '{}'{}", reader.path().string(), name, hdf5_detail()));
  }
  Hdf5Array<T> array{std::move(open.shape), std::vector<T>(open.count)};
  for (size_t i = 0; i < wide.size(); ++i) {
    if (wide[i] < std::numeric_limits<T>::min() || wide[i] > std::numeric_limits<T>::max()) {
      throw InvalidInput(fmt::format(
          "{}: dataset '{}' element {} (flat index) is {}; expected a value in [{}, {}] ({})",
          reader.path().string(), name, i, wide[i], std::numeric_limits<T>::min(),
          std::numeric_limits<T>::max(), expected_type));
    }
    array.values[i] = static_cast<T>(wide[i]);
  }
  return array;
}

// An attribute of the root group holding exactly one value.
struct OpenAttribute {
  Hdf5Handle attribute;
  Hdf5Handle type;
};

OpenAttribute open_attribute(const Hdf5Reader& reader, hid_t file, std::string_view name) {
  const std::string file_name = reader.path().string();
  if (!reader.has_attribute(name)) {
    throw InvalidInput(fmt::format("{}: root attribute '{}' is missing", file_name, name));
  }
  const std::string c_name(name);
  OpenAttribute open;
  open.attribute = Hdf5Handle(H5Aopen(file, c_name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!open.attribute.valid()) {
    throw InvalidInput(
        fmt::format("{}: cannot open root attribute '{}'{}", file_name, name, hdf5_detail()));
  }
  open.type = Hdf5Handle(H5Aget_type(open.attribute.get()), H5Tclose);
  Hdf5Handle space(H5Aget_space(open.attribute.get()), H5Sclose);
  if (!open.type.valid() || !space.valid()) {
    throw InvalidInput(fmt::format("{}: cannot read the type of root attribute '{}'{}", file_name,
                                   name, hdf5_detail()));
  }
  const hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (points != 1) {
    throw InvalidInput(fmt::format("{}: root attribute '{}' holds {} values; expected a scalar",
                                   file_name, name, points));
  }
  return open;
}

void read_attribute_value(const Hdf5Reader& reader, const OpenAttribute& open,
                          std::string_view name, hid_t memory_type, void* out) {
  if (H5Aread(open.attribute.get(), memory_type, out) < 0) {
    throw InvalidInput(fmt::format("{}: cannot read root attribute '{}'{}", reader.path().string(),
                                   name, hdf5_detail()));
  }
}

// HDF5 1.10 reads a variable-length string through the file's global heap, and on a damaged file
// its reader can crash or loop there (H5HG_read under H5Aread; tests/fuzz/verify_batch_fuzz.cpp
// finds such files). The read therefore runs in a forked child that sends the text back through
// a pipe, under an alarm: a damaged heap is an InvalidInput naming the file and the attribute,
// never a crash or a hang of the process that reads it. The child only reads; the parent's HDF5
// state is untouched. (speclab reads files only while no other thread of it is inside HDF5: a
// child forked while another thread held HDF5's lock would wait for it until the alarm.)
constexpr unsigned kStringReadSeconds = 10;

std::string read_variable_string(const Hdf5Reader& reader, const OpenAttribute& open,
                                 std::string_view name, hid_t memory_type) {
  const std::string where = fmt::format("{}: root attribute '{}'", reader.path().string(), name);
  int fds[2];
  if (::pipe(fds) != 0) throw IoError(fmt::format("{}: cannot create a pipe", where));
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw IoError(fmt::format("{}: cannot fork to read it ({})", where, std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
#ifdef SPECLAB_HDF5_CHILD_UNDER_ASAN
    __sanitizer_set_death_callback(nullptr);
    if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, STDERR_FILENO);
#endif
    ::signal(SIGALRM, SIG_DFL);
    ::alarm(kStringReadSeconds);
    char* text = nullptr;
    const bool ok = H5Aread(open.attribute.get(), memory_type, &text) >= 0;
    // One status byte, then the text or HDF5's account of the error.
    std::string reply(1, ok ? '0' : '1');
    reply += ok ? std::string(text != nullptr ? text : "") : hdf5_detail();
    for (size_t done = 0; done < reply.size();) {
      const ssize_t n = ::write(fds[1], reply.data() + done, reply.size() - done);
      if (n <= 0 && errno != EINTR) ::_exit(4);
      if (n > 0) done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string reply;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      reply.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !reply.empty()) {
    if (reply[0] == '0') return reply.substr(1);
    throw InvalidInput(fmt::format("{}: cannot read root attribute '{}'{}", reader.path().string(),
                                   name, reply.substr(1)));
  }
  const std::string how =
      WIFSIGNALED(status)
          ? (WTERMSIG(status) == SIGALRM
                 ? fmt::format("did not finish within {} s", kStringReadSeconds)
                 : fmt::format("crashed ({})", strsignal(WTERMSIG(status))))
          : fmt::format("failed (status {})", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  throw InvalidInput(fmt::format(
      "{} is damaged: the HDF5 library's read of this variable-length string {}", where, how));
}

// An integer attribute's value as Range, or InvalidInput saying which bound it passes.
template <typename Range, typename Value>
Range attribute_in_range(const Hdf5Reader& reader, std::string_view name, Value value) {
  if (std::cmp_less(value, std::numeric_limits<Range>::min())) {
    throw InvalidInput(fmt::format("{}: root attribute '{}' is {}; expected a value ≥ {}",
                                   reader.path().string(), name, value,
                                   std::numeric_limits<Range>::min()));
  }
  if (std::cmp_greater(value, std::numeric_limits<Range>::max())) {
    throw InvalidInput(fmt::format("{}: root attribute '{}' is {}; expected a value ≤ {}",
                                   reader.path().string(), name, value,
                                   std::numeric_limits<Range>::max()));
  }
  return static_cast<Range>(value);
}

}  // namespace

Hdf5Handle::Hdf5Handle(Hdf5Handle&& other) noexcept
    : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}

Hdf5Handle& Hdf5Handle::operator=(Hdf5Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    closer_ = other.closer_;
  }
  return *this;
}

void Hdf5Handle::reset() { close(); }

bool Hdf5Handle::close() {
  if (id_ < 0) return true;
  const herr_t status = closer_ != nullptr ? closer_(id_) : 0;
  id_ = H5I_INVALID_HID;
  return status >= 0;
}

std::string format_shape(std::span<const int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// ---------------------------------------------------------------------------------------------
// Reader

Hdf5Reader::Hdf5Reader(fs::path path) : path_(std::move(path)) {
  silence_hdf5_errors();
  const std::string name = path_.string();
  std::error_code ec;
  const fs::file_status status = fs::status(path_, ec);
  if (!fs::exists(status)) throw InvalidInput(fmt::format("{}: no such file", name));
  if (fs::is_directory(status)) {
    throw InvalidInput(fmt::format("{}: is a directory; expected an HDF5 file", name));
  }
  const htri_t is_hdf5 = H5Fis_hdf5(name.c_str());
  if (is_hdf5 == 0) throw InvalidInput(fmt::format("{}: not an HDF5 file", name));
  if (is_hdf5 < 0) {
    throw InvalidInput(fmt::format("{}: cannot be read{}", name, hdf5_detail()));
  }
  const Hdf5Handle fapl = file_access_properties();
  file_ = Hdf5Handle(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.valid() ? fapl.get() : H5P_DEFAULT),
                     H5Fclose);
  if (!file_.valid()) {
    throw InvalidInput(fmt::format("{}: cannot be opened as HDF5{}", name, hdf5_detail()));
  }
}

bool Hdf5Reader::has_dataset(std::string_view name) const {
  silence_hdf5_errors();
  check_name(name, path_);
  // H5Lexists fails (rather than answering no) when an intermediate group is missing, so each
  // prefix of a path is checked in turn.
  const std::string c_name(name);
  for (size_t slash = c_name.find('/', 1);; slash = c_name.find('/', slash + 1)) {
    const std::string prefix = c_name.substr(0, slash);
    if (H5Lexists(file_.get(), prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (slash == std::string::npos) break;
  }
  Hdf5Handle object(H5Oopen(file_.get(), c_name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!object.valid()) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  return H5Iget_type(object.get()) == H5I_DATASET;
}

std::vector<int64_t> Hdf5Reader::dataset_shape(std::string_view name) const {
  if (!has_dataset(name)) {
    throw InvalidInput(fmt::format("{}: dataset '{}' is missing", path_.string(), name));
  }
  const std::string c_name(name);
  Hdf5Handle dataset(H5Dopen2(file_.get(), c_name.c_str(), H5P_DEFAULT), H5Dclose);
  Hdf5Handle space(dataset.valid() ? H5Dget_space(dataset.get()) : H5I_INVALID_HID, H5Sclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) {
    throw InvalidInput(fmt::format("{}: cannot read the shape of dataset '{}'{}", path_.string(),
                                   name, hdf5_detail()));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

template <Hdf5ReadElement T>
Hdf5Array<T> Hdf5Reader::read(std::string_view name, int expected_rank,
                              std::string_view dims_hint) const {
  silence_hdf5_errors();
  const Hdf5Type type = hdf5_type<T>();
  if constexpr (std::is_integral_v<T>) {
    return read_integer<T>(*this, file_.get(), name, fmt::format("an integer type ({})", type.name),
                           expected_rank, dims_hint);
  } else {
    constexpr bool kFloat32 = std::same_as<T, float>;
    OpenDataset open = open_dataset(
        *this, file_.get(), name, kFloat32 ? ElementKind::kFloat32 : ElementKind::kFloatAny,
        kFloat32 ? "float32" : "float32 or float64", expected_rank, dims_hint);
    Hdf5Array<T> array{std::move(open.shape), std::vector<T>(open.count)};
    if (open.count > 0 && H5Dread(open.dataset.get(), type.native, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                  array.values.data()) < 0) {
      throw InvalidInput(
          fmt::format("{}: cannot read dataset '{}'{}", path_.string(), name, hdf5_detail()));
    }
    return array;
  }
}

namespace {

herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* client) {
  if (info->type == H5O_TYPE_DATASET)
    static_cast<std::vector<std::string>*>(client)->push_back(name);
  return 0;
}

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* client) {
  static_cast<std::vector<std::string>*>(client)->push_back(name);
  return 0;
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* client) {
  static_cast<std::vector<std::string>*>(client)->push_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> Hdf5Reader::dataset_names() const {
  silence_hdf5_errors();
  std::vector<std::string> names;
  if (H5Ovisit2(file_.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names, H5O_INFO_BASIC) <
      0) {
    throw InvalidInput(fmt::format("{}: cannot list datasets{}", path_.string(), hdf5_detail()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Hdf5DatasetInfo Hdf5Reader::dataset_info(std::string_view name) const {
  silence_hdf5_errors();
  if (!has_dataset(name)) {
    throw InvalidInput(fmt::format("{}: dataset '{}' is missing", path_.string(), name));
  }
  const std::string c_name(name);
  Hdf5Handle dataset(H5Dopen2(file_.get(), c_name.c_str(), H5P_DEFAULT), H5Dclose);
  Hdf5Handle space(dataset.valid() ? H5Dget_space(dataset.get()) : H5I_INVALID_HID, H5Sclose);
  Hdf5Handle type(dataset.valid() ? H5Dget_type(dataset.get()) : H5I_INVALID_HID, H5Tclose);
  Hdf5Handle dcpl(dataset.valid() ? H5Dget_create_plist(dataset.get()) : H5I_INVALID_HID, H5Pclose);
  const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0 || !type.valid() || !dcpl.valid()) {
    throw InvalidInput(fmt::format("{}: cannot read the layout of dataset '{}'{}", path_.string(),
                                   name, hdf5_detail()));
  }
  std::vector<hsize_t> dims(static_cast<size_t>(rank)), max_dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), max_dims.data());
  Hdf5DatasetInfo info;
  info.shape.assign(dims.begin(), dims.end());
  info.dtype = describe_type(type.get());
  info.chunked = H5Pget_layout(dcpl.get()) == H5D_CHUNKED;
  const int n_filters = H5Pget_nfilters(dcpl.get());
  for (int f = 0; f < n_filters; ++f) {
    unsigned flags = 0, config = 0;
    size_t n_values = 0;
    if (H5Pget_filter2(dcpl.get(), static_cast<unsigned>(f), &flags, &n_values, nullptr, 0, nullptr,
                       &config) == H5Z_FILTER_DEFLATE) {
      info.deflate = true;
    }
  }
  info.extendable =
      std::any_of(max_dims.begin(), max_dims.end(), [](hsize_t d) { return d == H5S_UNLIMITED; });
  return info;
}

namespace {

// The names an HDF5 iteration over the root group reports, sorted; `iterate(names)` runs it and
// returns its status.
template <typename Iterate>
std::vector<std::string> sorted_names(const fs::path& path, std::string_view what,
                                      Iterate iterate) {
  silence_hdf5_errors();
  std::vector<std::string> names;
  if (iterate(names) < 0) {
    throw InvalidInput(fmt::format("{}: cannot list {}{}", path.string(), what, hdf5_detail()));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> Hdf5Reader::root_names() const {
  return sorted_names(path_, "the root group", [&](std::vector<std::string>& names) {
    hsize_t index = 0;
    return H5Literate(file_.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_link, &names);
  });
}

std::vector<std::string> Hdf5Reader::attribute_names() const {
  return sorted_names(path_, "root attributes", [&](std::vector<std::string>& names) {
    hsize_t index = 0;
    return H5Aiterate2(file_.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute, &names);
  });
}

Hdf5AttributeKind Hdf5Reader::attribute_kind(std::string_view name) const {
  silence_hdf5_errors();
  const OpenAttribute open = open_attribute(*this, file_.get(), name);
  switch (H5Tget_class(open.type.get())) {
    case H5T_STRING:
      return Hdf5AttributeKind::kString;
    case H5T_INTEGER:
      return H5Tget_sign(open.type.get()) == H5T_SGN_NONE ? Hdf5AttributeKind::kUnsigned
                                                          : Hdf5AttributeKind::kSigned;
    case H5T_FLOAT:
      return Hdf5AttributeKind::kFloat;
    default:
      return Hdf5AttributeKind::kOther;
  }
}

bool Hdf5Reader::has_attribute(std::string_view name) const {
  silence_hdf5_errors();
  check_name(name, path_);
  const std::string c_name(name);
  const htri_t exists = H5Aexists(file_.get(), c_name.c_str());
  if (exists < 0) H5Eclear2(H5E_DEFAULT);
  return exists > 0;
}

std::string Hdf5Reader::read_string_attribute(std::string_view name) const {
  const OpenAttribute open = open_attribute(*this, file_.get(), name);
  const hid_t type = open.type.get();
  if (H5Tget_class(type) != H5T_STRING) {
    throw InvalidInput(fmt::format("{}: root attribute '{}' has type {}; expected a string",
                                   path_.string(), name, describe_type(type)));
  }
  if (H5Tis_variable_str(type) > 0) {
    Hdf5Handle memory_type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory_type.get(), H5T_VARIABLE);
    H5Tset_cset(memory_type.get(), H5Tget_cset(type));
    return read_variable_string(*this, open, name, memory_type.get());
  }
  const size_t size = H5Tget_size(type);
  std::string value(size, '\0');
  Hdf5Handle memory_type(H5Tcopy(type), H5Tclose);
  read_attribute_value(*this, open, name, memory_type.get(), value.data());
  value.resize(std::min(value.find('\0'), value.size()));
  if (H5Tget_strpad(type) == H5T_STR_SPACEPAD) {
    value.erase(value.find_last_not_of(' ') + 1);
  }
  return value;
}

template <Hdf5AttributeScalar T>
T Hdf5Reader::read_attribute(std::string_view name) const {
  const OpenAttribute open = open_attribute(*this, file_.get(), name);
  const hid_t type = open.type.get();
  const H5T_class_t type_class = H5Tget_class(type);
  if constexpr (std::floating_point<T>) {
    if (type_class == H5T_FLOAT) {
      double value = 0.0;
      read_attribute_value(*this, open, name, H5T_NATIVE_DOUBLE, &value);
      return value;
    }
  }
  if (type_class != H5T_INTEGER) {
    const char* expected = std::floating_point<T>      ? "a number"
                           : std::same_as<T, uint64_t> ? "an unsigned integer (uint64)"
                                                       : "an integer";
    throw InvalidInput(fmt::format("{}: root attribute '{}' has type {}; expected {}",
                                   path_.string(), name, describe_type(type), expected));
  }
  // An integer is read in its own signedness and must fit T (int64 for a double: h5py stores a
  // Python int, e.g. `leniency = 1`, as int64).
  using Range = std::conditional_t<std::floating_point<T>, int64_t, T>;
  if (H5Tget_sign(type) == H5T_SGN_NONE) {
    uint64_t value = 0;
    read_attribute_value(*this, open, name, H5T_NATIVE_UINT64, &value);
    return static_cast<T>(attribute_in_range<Range>(*this, name, value));
  }
  int64_t value = 0;
  read_attribute_value(*this, open, name, H5T_NATIVE_INT64, &value);
  return static_cast<T>(attribute_in_range<Range>(*this, name, value));
}

// ---------------------------------------------------------------------------------------------
// Writer

Hdf5Writer::Hdf5Writer(fs::path path) : path_(std::move(path)) {
  silence_hdf5_errors();
  const std::string name = path_.string();
  if (path_.empty()) throw InvalidInput("output path is empty; expected a file name");
  std::error_code ec;
  const fs::path parent = path_.parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    throw InvalidInput(
        fmt::format("{}: directory '{}' does not exist; create it first", name, parent.string()));
  }
  if (fs::is_directory(path_, ec)) {
    throw InvalidInput(fmt::format("{}: is a directory; expected a file name", name));
  }
  const Hdf5Handle fapl = file_access_properties();
  const std::string partial = partial_path().string();
  errno = 0;
  file_ = Hdf5Handle(H5Fcreate(partial.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT,
                               fapl.valid() ? fapl.get() : H5P_DEFAULT),
                     H5Fclose);
  if (!file_.valid()) {
    // The place the caller named cannot take a file (no permission, a read-only or full
    // filesystem): bad input to the command, which exits 2, not an internal failure.
    throw InvalidInput(fmt::format("{}: cannot create '{}'{}{}; choose a writable path", name,
                                   partial, system_detail(), hdf5_detail()));
  }
}

Hdf5Writer::~Hdf5Writer() {
  if (committed_) return;
  file_.reset();
  std::error_code ec;
  fs::remove(partial_path(), ec);
}

fs::path Hdf5Writer::partial_path() const { return speclab::partial_path(path_); }

void Hdf5Writer::check_open(std::string_view what) const {
  if (committed_ || !file_.valid()) {
    throw Error(fmt::format("{}: cannot write {} after commit()", path_.string(), what));
  }
}

template <Hdf5Element T>
void Hdf5Writer::write_values(std::string_view name, std::span<const T> values,
                              std::span<const int64_t> shape, const Hdf5WriteOptions& options) {
  const Hdf5Type type = hdf5_type<T>();
  write_dataset(name, type.stored, type.native, values.data(), values.size(), shape, options);
}

template <Hdf5Element T>
void Hdf5Writer::create_extendable(std::string_view name, int64_t chunk, int deflate_level) {
  const Hdf5Type type = hdf5_type<T>();
  create_extendable_dataset(name, type.stored, type.native, chunk, deflate_level);
}

template <Hdf5Element T>
void Hdf5Writer::append_values(std::string_view name, std::span<const T> values) {
  append_dataset(name, hdf5_type<T>().native, values.data(), values.size());
}

void Hdf5Writer::create_extendable_dataset(std::string_view name, hid_t file_type,
                                           hid_t memory_type, int64_t chunk, int deflate_level) {
  silence_hdf5_errors();
  check_name(name, path_);
  check_open(fmt::format("dataset '{}'", name));
  const std::string file_name = path_.string();
  if (chunk < 1) {
    throw InvalidInput(
        fmt::format("{}: dataset '{}' chunk is {}; expected ≥ 1", file_name, name, chunk));
  }
  if (deflate_level < 0 || deflate_level > 9) {
    throw InvalidInput(fmt::format("{}: dataset '{}' deflate_level = {}; expected 0..9", file_name,
                                   name, deflate_level));
  }
  const std::string c_name(name);
  if (H5Lexists(file_.get(), c_name.c_str(), H5P_DEFAULT) > 0) {
    throw Error(fmt::format("{}: dataset '{}' is written twice", file_name, name));
  }
  H5Eclear2(H5E_DEFAULT);
  const hsize_t dims[1] = {0}, max_dims[1] = {H5S_UNLIMITED};
  const hsize_t chunk_dims[1] = {static_cast<hsize_t>(chunk)};
  Hdf5Handle space(H5Screate_simple(1, dims, max_dims), H5Sclose);
  Hdf5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  Hdf5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!space.valid() || !dcpl.valid() || !lcpl.valid() ||
      H5Pset_chunk(dcpl.get(), 1, chunk_dims) < 0 ||
      (deflate_level > 0 && H5Pset_deflate(dcpl.get(), static_cast<unsigned>(deflate_level)) < 0)) {
    throw IoError(fmt::format("{}: cannot prepare dataset '{}'{}", file_name, name, hdf5_detail()));
  }
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Hdf5Handle dataset(H5Dcreate2(file_.get(), c_name.c_str(), file_type, space.get(), lcpl.get(),
                                dcpl.get(), H5P_DEFAULT),
                     H5Dclose);
  if (!dataset.valid() || !dataset.close()) {
    throw IoError(fmt::format("{}: cannot create dataset '{}'{}", file_name, name, hdf5_detail()));
  }
  extendable_types_.emplace(c_name, memory_type);
}

void Hdf5Writer::append_dataset(std::string_view name, hid_t memory_type, const void* data,
                                size_t count) {
  silence_hdf5_errors();
  check_open(fmt::format("dataset '{}'", name));
  const std::string file_name = path_.string();
  const auto it = extendable_types_.find(name);
  if (it == extendable_types_.end()) {
    throw Error(fmt::format("{}: dataset '{}' was not made by create_extendable(); cannot append",
                            file_name, name));
  }
  if (H5Tequal(it->second, memory_type) <= 0) {
    throw Error(
        fmt::format("{}: dataset '{}' appended with another element type than it was "
                    "created with",
                    file_name, name));
  }
  if (count == 0) return;
  errno = 0;
  const std::string c_name(name);
  Hdf5Handle dataset(H5Dopen2(file_.get(), c_name.c_str(), H5P_DEFAULT), H5Dclose);
  Hdf5Handle old_space(dataset.valid() ? H5Dget_space(dataset.get()) : H5I_INVALID_HID, H5Sclose);
  hsize_t old_size = 0;
  if (!old_space.valid() || H5Sget_simple_extent_dims(old_space.get(), &old_size, nullptr) != 1) {
    throw IoError(
        fmt::format("{}: cannot open dataset '{}' to append{}", file_name, name, hdf5_detail()));
  }
  const hsize_t start[1] = {old_size}, n[1] = {count}, new_size[1] = {old_size + count};
  if (H5Dset_extent(dataset.get(), new_size) < 0) {
    throw IoError(fmt::format("{}: cannot extend dataset '{}' to {} elements{}", file_name, name,
                              new_size[0], hdf5_detail()));
  }
  Hdf5Handle file_space(H5Dget_space(dataset.get()), H5Sclose);
  Hdf5Handle memory_space(H5Screate_simple(1, n, nullptr), H5Sclose);
  if (!file_space.valid() || !memory_space.valid() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, n, nullptr) < 0 ||
      H5Dwrite(dataset.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT,
               data) < 0 ||
      !dataset.close()) {
    throw IoError(fmt::format("{}: cannot append {} values to dataset '{}'{}{}", file_name, count,
                              name, system_detail(), hdf5_detail()));
  }
}

namespace {

void check_value_count(const std::string& file_name, std::string_view name, size_t count,
                       std::span<const int64_t> shape) {
  size_t expected_count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) {
      throw InvalidInput(fmt::format("{}: dataset '{}' has shape {}; expected dimensions ≥ 0",
                                     file_name, name, format_shape(shape)));
    }
    expected_count *= static_cast<size_t>(dim);
  }
  if (expected_count != count) {
    throw InvalidInput(fmt::format("{}: dataset '{}' has {} values; shape {} needs {}", file_name,
                                   name, count, format_shape(shape), expected_count));
  }
}

// The chunk of a compressed dataset of shape `dims`: options.chunk clipped to dims, or about
// 1 MiB of whole rows along dimension 0.
std::vector<hsize_t> chunk_shape(const std::string& file_name, std::string_view name,
                                 const std::vector<hsize_t>& dims, hid_t file_type,
                                 const Hdf5WriteOptions& options) {
  std::vector<hsize_t> chunk(dims.size());
  if (options.chunk.empty()) {
    const size_t element = H5Tget_size(file_type);
    size_t row = element;
    for (size_t d = 1; d < dims.size(); ++d) row *= dims[d];
    const hsize_t rows = std::max<hsize_t>(1, (size_t{1} << 20) / std::max<size_t>(row, 1));
    chunk.assign(dims.begin(), dims.end());
    chunk[0] = std::min(dims[0], rows);
    return chunk;
  }
  if (options.chunk.size() != dims.size()) {
    throw InvalidInput(fmt::format("{}: dataset '{}' chunk {} has rank {}; expected rank {}",
                                   file_name, name, format_shape(options.chunk),
                                   options.chunk.size(), dims.size()));
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (options.chunk[d] <= 0) {
      throw InvalidInput(fmt::format("{}: dataset '{}' chunk {}; expected dimensions > 0",
                                     file_name, name, format_shape(options.chunk)));
    }
    chunk[d] = std::min(dims[d], static_cast<hsize_t>(options.chunk[d]));
  }
  return chunk;
}

void set_chunked_deflate(hid_t dcpl, const std::string& file_name, std::string_view name,
                         const std::vector<hsize_t>& dims, hid_t file_type,
                         const Hdf5WriteOptions& options) {
  if (options.deflate_level > 9) {
    throw InvalidInput(fmt::format("{}: dataset '{}' deflate_level = {}; expected 0..9", file_name,
                                   name, options.deflate_level));
  }
  const std::vector<hsize_t> chunk = chunk_shape(file_name, name, dims, file_type, options);
  if (H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data()) < 0 ||
      H5Pset_deflate(dcpl, static_cast<unsigned>(options.deflate_level)) < 0) {
    throw IoError(fmt::format("{}: cannot set chunking/deflate for dataset '{}'{}", file_name, name,
                              hdf5_detail()));
  }
}

}  // namespace

void Hdf5Writer::write_dataset(std::string_view name, hid_t file_type, hid_t memory_type,
                               const void* data, size_t count, std::span<const int64_t> shape,
                               const Hdf5WriteOptions& options) {
  silence_hdf5_errors();
  check_name(name, path_);
  check_open(fmt::format("dataset '{}'", name));
  const std::string file_name = path_.string();
  check_value_count(file_name, name, count, shape);
  const std::string c_name(name);
  if (H5Lexists(file_.get(), c_name.c_str(), H5P_DEFAULT) > 0) {
    throw Error(fmt::format("{}: dataset '{}' is written twice", file_name, name));
  }
  H5Eclear2(H5E_DEFAULT);

  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  Hdf5Handle space(shape.empty()
                       ? H5Screate(H5S_SCALAR)
                       : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                   H5Sclose);
  Hdf5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  Hdf5Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!space.valid() || !dcpl.valid() || !lcpl.valid()) {
    throw IoError(fmt::format("{}: cannot prepare dataset '{}'{}", file_name, name, hdf5_detail()));
  }
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  // Chunks must have non-zero extent, so an empty dataset is stored contiguous.
  if (options.deflate_level > 0 && count > 0 && !shape.empty()) {
    set_chunked_deflate(dcpl.get(), file_name, name, dims, file_type, options);
  }
  errno = 0;
  Hdf5Handle dataset(H5Dcreate2(file_.get(), c_name.c_str(), file_type, space.get(), lcpl.get(),
                                dcpl.get(), H5P_DEFAULT),
                     H5Dclose);
  if (!dataset.valid()) {
    throw IoError(fmt::format("{}: cannot create dataset '{}'{}{}", file_name, name,
                              system_detail(), hdf5_detail()));
  }
  if (count > 0 && H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    throw IoError(fmt::format("{}: cannot write dataset '{}'{}{}", file_name, name, system_detail(),
                              hdf5_detail()));
  }
  if (!dataset.close()) {
    throw IoError(fmt::format("{}: cannot close dataset '{}'{}{}", file_name, name, system_detail(),
                              hdf5_detail()));
  }
}

void Hdf5Writer::write_attribute_value(std::string_view name, hid_t file_type, hid_t memory_type,
                                       const void* data) {
  silence_hdf5_errors();
  check_name(name, path_);
  check_open(fmt::format("root attribute '{}'", name));
  const std::string file_name = path_.string();
  const std::string c_name(name);
  if (H5Aexists(file_.get(), c_name.c_str()) > 0) H5Adelete(file_.get(), c_name.c_str());
  Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Hdf5Handle attribute(
      H5Acreate2(file_.get(), c_name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
      H5Aclose);
  if (!attribute.valid() || H5Awrite(attribute.get(), memory_type, data) < 0 ||
      !attribute.close()) {
    throw IoError(
        fmt::format("{}: cannot write root attribute '{}'{}", file_name, name, hdf5_detail()));
  }
}

void Hdf5Writer::write_attribute(std::string_view name, std::string_view value) {
  // Variable-length UTF-8, which h5py reads back as str rather than bytes.
  Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const std::string text(value);
  const char* pointer = text.c_str();
  write_attribute_value(name, type.get(), type.get(), &pointer);
}

template <Hdf5AttributeScalar T>
void Hdf5Writer::write_attribute(std::string_view name, T value) {
  const Hdf5Type type = hdf5_type<T>();
  write_attribute_value(name, type.stored, type.native, &value);
}

void Hdf5Writer::describe(std::string_view dataset, std::string_view units,
                          std::string_view description) {
  silence_hdf5_errors();
  check_name(dataset, path_);
  check_open(fmt::format("dataset '{}'", dataset));
  Hdf5Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const std::string object(dataset);
  for (const auto& [name, value] :
       {std::pair{"units", units}, std::pair{"description", description}}) {
    const std::string text(value);
    const char* pointer = text.c_str();
    if (H5Aexists_by_name(file_.get(), object.c_str(), name, H5P_DEFAULT) > 0) {
      H5Adelete_by_name(file_.get(), object.c_str(), name, H5P_DEFAULT);
    }
    Hdf5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
    Hdf5Handle attribute(H5Acreate_by_name(file_.get(), object.c_str(), name, type.get(),
                                           space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                         H5Aclose);
    if (!attribute.valid() || H5Awrite(attribute.get(), type.get(), &pointer) < 0 ||
        !attribute.close()) {
      throw IoError(fmt::format("{}: cannot write attribute '{}' of dataset '{}'{}", path_.string(),
                                name, dataset, hdf5_detail()));
    }
  }
}

void Hdf5Writer::commit() {
  silence_hdf5_errors();
  check_open("the file");
  const std::string name = path_.string();
  const std::string partial = partial_path().string();
  auto fail = [&](const std::string& what) {
    const std::string message =
        fmt::format("{}: {} ({}){}", name, what,
                    std::error_code(errno, std::generic_category()).message(), hdf5_detail());
    file_.reset();
    std::error_code ignored;
    fs::remove(partial_path(), ignored);
    throw IoError(message);
  };
  errno = 0;
  if (H5Fflush(file_.get(), H5F_SCOPE_GLOBAL) < 0) fail(fmt::format("cannot flush '{}'", partial));
  if (!file_.close()) fail(fmt::format("cannot close '{}'", partial));
  try {
    commit_partial(path_);
  } catch (const IoError&) {
    std::error_code ignored;
    fs::remove(partial_path(), ignored);
    throw;
  }
  committed_ = true;
}

// The member templates of the header, for every type its concepts admit.
#define SPECLAB_HDF5_ELEMENT(T)                                                                 \
  template void Hdf5Writer::write_values<T>(std::string_view, std::span<const T>,               \
                                            std::span<const int64_t>, const Hdf5WriteOptions&); \
  template void Hdf5Writer::create_extendable<T>(std::string_view, int64_t, int);               \
  template void Hdf5Writer::append_values<T>(std::string_view, std::span<const T>);
#define SPECLAB_HDF5_READ(T) \
  template Hdf5Array<T> Hdf5Reader::read<T>(std::string_view, int, std::string_view) const;
#define SPECLAB_HDF5_ATTRIBUTE(T)                                   \
  template T Hdf5Reader::read_attribute<T>(std::string_view) const; \
  template void Hdf5Writer::write_attribute<T>(std::string_view, T);

SPECLAB_HDF5_ELEMENT(float)
SPECLAB_HDF5_ELEMENT(double)
SPECLAB_HDF5_ELEMENT(int32_t)
SPECLAB_HDF5_ELEMENT(uint8_t)
SPECLAB_HDF5_ELEMENT(int64_t)
SPECLAB_HDF5_ELEMENT(uint64_t)
SPECLAB_HDF5_READ(float)
SPECLAB_HDF5_READ(double)
SPECLAB_HDF5_READ(int32_t)
SPECLAB_HDF5_READ(uint8_t)
SPECLAB_HDF5_READ(int64_t)
SPECLAB_HDF5_ATTRIBUTE(int64_t)
SPECLAB_HDF5_ATTRIBUTE(uint64_t)
SPECLAB_HDF5_ATTRIBUTE(double)

}  // namespace speclab
