// The name of a file being written (see partial_path.hpp).
#include "core/io/partial_path.hpp"

namespace speclab {

std::filesystem::path partial_path(const std::filesystem::path& path) {
  std::filesystem::path partial = path;
  partial += kPartialSuffix;
  return partial;
}

}  // namespace speclab
