// Source-tree files found at run time (see project_files.hpp).
#include "experiments/project_files.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "core/base/error.hpp"

namespace speclab::experiments {

namespace fs = std::filesystem;

std::optional<fs::path> find_project_file(const fs::path& relative) {
  if (const char* source = std::getenv("SPECLAB_SOURCE"); source != nullptr && *source != '\0') {
    const fs::path file = fs::path(source) / relative;
    if (!fs::exists(file)) {
      throw InvalidInput(
          fmt::format("SPECLAB_SOURCE is {}, which holds no {}; expected the speclab source tree",
                      source, relative.string()));
    }
    return file;
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  // An installed speclab: PREFIX/bin/speclab beside PREFIX/share/speclab (cmake/install.cmake).
  const fs::path installed = exe.parent_path().parent_path() / "share" / "speclab" / relative;
  if (fs::exists(installed, ec)) return installed;
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / relative)) return dir / relative;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

std::string python_for_helpers() {
  const char* python = std::getenv("SPECLAB_PYTHON");
  return python != nullptr && *python != '\0' ? python : "/usr/bin/python3";
}

}  // namespace speclab::experiments
