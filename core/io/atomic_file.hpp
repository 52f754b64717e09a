// The write-then-rename convention of every file speclab produces, written once: a writer fills
// PATH.partial and gives it its name only when it is complete — fsync, rename onto PATH, fsync of
// the directory — so PATH is either absent or whole, even after a crash, and a killed run leaves
// only names that end in kPartialSuffix (which --resume and merge look for). The HDF5 writer,
// the results writer and fetch-model all commit through commit_partial.
#pragma once

#include <filesystem>
#include <string_view>

namespace speclab {

inline constexpr std::string_view kPartialSuffix = ".partial";

/// PATH.partial: the name a file is written under until it is renamed onto `path`.
std::filesystem::path partial_path(const std::filesystem::path& path);

/// Gives a complete, closed PATH.partial its name durably: fsyncs it, renames it onto `path` and
/// fsyncs the directory (a filesystem that refuses to fsync a directory is harmless). Throws
/// IoError naming `path`, the step that failed, the partial file and the system's reason; the
/// partial file is then left for the caller to remove.
void commit_partial(const std::filesystem::path& path);

/// A file written as bytes under PATH.partial (created or truncated, mode 0644). commit() makes it
/// PATH by commit_partial; destroyed uncommitted, it removes the partial file, so nothing
/// half-written ever carries the final name. Errors: IoError naming the path and the reason.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);
  void commit();

 private:
  [[noreturn]] void fail(std::string_view what) const;
  std::filesystem::path path_;
  std::filesystem::path partial_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace speclab
