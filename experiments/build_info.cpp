// What the binary was built from (see build_info.hpp). The commit comes from a header that the
// build rewrites whenever the source tree's commit changes (cmake/build_info.cmake), so it names
// the code that runs, not whatever the checkout holds when it runs.
#include "experiments/build_info.hpp"

#if __has_include("speclab_build_info.hpp")
#include "speclab_build_info.hpp"
#endif
#ifndef SPECLAB_GIT_COMMIT
#define SPECLAB_GIT_COMMIT "unknown"
#endif
// The project version; the build defines it from CMake's PROJECT_VERSION.
#ifndef SPECLAB_VERSION
#define SPECLAB_VERSION "0.1.0"
#endif

namespace speclab::experiments {

const BuildInfo& build_info() {
  static const BuildInfo info{SPECLAB_VERSION, SPECLAB_GIT_COMMIT};
  return info;
}

}  // namespace speclab::experiments
