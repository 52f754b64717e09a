// Where speclab's own data files (data/models, data/workloads, data/corpus) are found: under the
// source tree speclab was built from, as an absolute path, whatever the working directory.
#pragma once

#include <filesystem>
#include <string_view>

namespace speclab {

/// `relative` (e.g. "data/models") under the source tree's root, as an absolute path. The root is
/// the build's SPECLAB_SOURCE_DIR definition, not `__FILE__`: a compiler launcher (ccache with a
/// base directory) may rewrite source paths to relative ones, and `__FILE__` with them.
std::filesystem::path source_tree_path(std::string_view relative);

}  // namespace speclab
