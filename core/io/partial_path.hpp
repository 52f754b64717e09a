// The write-then-rename convention of every file speclab produces: a writer fills PATH.partial
// and renames it onto PATH only when it is complete, so PATH is either absent or whole, and a
// killed run leaves only names that end in kPartialSuffix (which --resume and merge look for).
#pragma once

#include <filesystem>
#include <string_view>

namespace speclab {

inline constexpr std::string_view kPartialSuffix = ".partial";

/// PATH.partial: the name a file is written under until it is renamed onto `path`.
std::filesystem::path partial_path(const std::filesystem::path& path);

}  // namespace speclab
