// The write-then-rename convention (see atomic_file.hpp).
#include "core/io/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/base/error.hpp"

namespace speclab {
namespace {

[[noreturn]] void fail_at(const std::filesystem::path& path, std::string_view what,
                          const std::filesystem::path& partial) {
  throw IoError(
      fmt::format("{}: {} '{}' ({})", path.string(), what, partial.string(), std::strerror(errno)));
}

void fsync_directory_of(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path().empty() ? "." : path.parent_path();
  const int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// The rename onto PATH and the directory's fsync, once the partial file's bytes are durable.
void rename_durably(const std::filesystem::path& path, const std::filesystem::path& partial) {
  if (std::rename(partial.c_str(), path.c_str()) != 0) fail_at(path, "cannot rename onto", partial);
  fsync_directory_of(path);
}

}  // namespace

std::filesystem::path partial_path(const std::filesystem::path& path) {
  std::filesystem::path partial = path;
  partial += kPartialSuffix;
  return partial;
}

void commit_partial(const std::filesystem::path& path) {
  const std::filesystem::path partial = partial_path(path);
  // A writer that closed the file (HDF5 does not fsync on close) reopens it to make it durable;
  // without this a crash after the rename could leave PATH empty.
  const int fd = ::open(partial.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_at(path, "cannot reopen to fsync", partial);
  const int synced = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (synced != 0) fail_at(path, "cannot fsync", partial);
  rename_durably(path, partial);
}

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), partial_(partial_path(path_)) {
  fd_ = ::open(partial_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot create");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(partial_.c_str());
}

void AtomicFile::write(std::string_view bytes) {
  const char* data = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write");
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("cannot fsync");
  const int status = ::close(fd_);
  fd_ = -1;
  if (status != 0) fail("cannot close");
  rename_durably(path_, partial_);
  committed_ = true;
}

void AtomicFile::fail(std::string_view what) const { fail_at(path_, what, partial_); }

}  // namespace speclab
