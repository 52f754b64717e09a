// What the speclab binary was built from: the project version and the git commit of the source
// tree at build time (`speclab --version`, and the `speclab_version` and `git_commit` attributes of
// every result file, docs/hdf5.md).
#pragma once

#include <string>

namespace speclab::experiments {

struct BuildInfo {
  std::string version;  ///< CMake's PROJECT_VERSION, e.g. "0.1.0"
  std::string
      git_commit;  ///< 40 hex digits, "-dirty" appended for uncommitted changes, or "unknown"
};

const BuildInfo& build_info();

}  // namespace speclab::experiments
