// Files of the speclab source tree that the executable runs at run time (the plotting module, the
// peer scripts) and the Python that runs them.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace speclab::experiments {

/// Where a file (or folder) RELATIVE of the project is: $SPECLAB_SOURCE/RELATIVE when
/// SPECLAB_SOURCE is set (InvalidInput if nothing is there); else, for an installed speclab
/// (PREFIX/bin/speclab), PREFIX/share/speclab/RELATIVE; else RELATIVE under the first directory
/// above the executable that holds it (build/bin/speclab -> build/RELATIVE, then the source tree);
/// nullopt when none does. With `accept`, a candidate that exists counts only when
/// accept(candidate) holds, and the search goes on past one that does not (SPECLAB_SOURCE's
/// included), e.g. to find build outputs.
std::optional<std::filesystem::path> find_project_file(
    const std::filesystem::path& relative,
    const std::function<bool(const std::filesystem::path&)>& accept = {});

/// find_project_file(RELATIVE) or InvalidInput naming the executable and every place it looked.
std::filesystem::path require_project_file(const std::filesystem::path& relative);

/// $SPECLAB_PYTHON, else Debian's /usr/bin/python3 (the interpreter that sees python3-h5py,
/// python3-matplotlib and python3-torch).
std::string python_for_helpers();

/// python_for_helpers(), or InvalidInput when it is not executable, saying that `command` needs
/// it with `packages` (e.g. "python3-matplotlib").
std::string require_python_for_helpers(std::string_view command, std::string_view packages);

/// The start of a command that runs `module` of the speclab Python package (e.g. "speclab.plot",
/// which needs no compiled extension): {python, "-m", module}, with the package's folder (found
/// as find_project_file finds python/speclab; installed: PREFIX/share/speclab/python) put first on
/// PYTHONPATH. Throws InvalidInput as require_project_file and require_python_for_helpers do.
std::vector<std::string> python_module_command(std::string_view command, std::string_view packages,
                                               std::string_view module);

/// Runs ARGV (argv[0] the program's path, no shell) and waits for it: its exit status, or 128 +
/// the signal that ended it. With `captured` its standard output goes there instead of speclab's.
/// Throws InvalidInput when it cannot be started (naming the program and the reason).
int run_helper(const std::vector<std::string>& argv, std::string* captured = nullptr);

}  // namespace speclab::experiments
