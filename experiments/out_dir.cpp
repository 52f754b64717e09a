// Output directories (see out_dir.hpp).
#include "experiments/out_dir.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/base/error.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;

void prepare_out_dir(const fs::path& dir, std::string_view option, std::string_view what) {
  std::error_code ec;
  const bool in_the_way = fs::exists(dir, ec) && !fs::is_directory(dir, ec);
  if (!in_the_way) fs::create_directories(dir, ec);
  if (in_the_way || ec || !fs::is_directory(dir, ec)) {
    throw InvalidInput(
        fmt::format("{} {}: cannot create the {} ({}); choose another {}", option, dir.string(),
                    what, in_the_way || !ec ? "a file of that name exists" : ec.message(), option));
  }
  const fs::path probe = dir / fmt::format(".speclab-write-test-{}", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw InvalidInput(fmt::format("{} {}: the {} is not writable ({}); choose another {}", option,
                                   dir.string(), what, std::strerror(errno), option));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace speclab::experiments
