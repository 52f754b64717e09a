#include "core/base/source_tree.hpp"

#ifndef SPECLAB_SOURCE_DIR
#error "SPECLAB_SOURCE_DIR (the source tree's absolute root) is set by core/CMakeLists.txt"
#endif

namespace speclab {

std::filesystem::path source_tree_path(std::string_view relative) {
  return std::filesystem::path(SPECLAB_SOURCE_DIR) / relative;
}

}  // namespace speclab
