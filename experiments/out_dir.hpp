// Output directories of the commands that write several files (`speclab run --out`, `demo
// --out`, `verify --out` over several points): created and proven writable before any work, so
// that a bad path fails at once with exit status 2 rather than after the work, or as an internal
// error.
#pragma once

#include <filesystem>
#include <string_view>

namespace speclab::experiments {

/// Creates `dir` (and its parents) and writes and removes a probe file in it. Throws
/// InvalidInput "OPTION DIR: cannot create the WHAT (REASON); choose another OPTION" when it
/// cannot be made (a file is in the way, no permission) or is not writable.
void prepare_out_dir(const std::filesystem::path& dir, std::string_view option,
                     std::string_view what);

}  // namespace speclab::experiments
