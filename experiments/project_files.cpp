// Source-tree files found at run time (see project_files.hpp).
#include "experiments/project_files.hpp"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "core/base/error.hpp"

extern char** environ;

namespace speclab::experiments {

namespace fs = std::filesystem;

std::optional<fs::path> find_project_file(const fs::path& relative,
                                          const std::function<bool(const fs::path&)>& accept) {
  std::error_code ec;
  const auto found = [&](const fs::path& candidate) {
    return fs::exists(candidate, ec) && (!accept || accept(candidate));
  };
  if (const char* source = std::getenv("SPECLAB_SOURCE"); source != nullptr && *source != '\0') {
    const fs::path file = fs::path(source) / relative;
    if (!fs::exists(file, ec)) {
      throw InvalidInput(
          fmt::format("SPECLAB_SOURCE is {}, which holds no {}; expected the speclab source tree",
                      source, relative.string()));
    }
    if (found(file)) return file;
  }
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  // An installed speclab: PREFIX/bin/speclab beside PREFIX/share/speclab (cmake/install.cmake).
  const fs::path installed = exe.parent_path().parent_path() / "share" / "speclab" / relative;
  if (found(installed)) return installed;
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (found(dir / relative)) return dir / relative;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

int run_helper(const std::vector<std::string>& arguments, std::string* captured) {
  std::vector<std::string> args = arguments;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (captured != nullptr) {
    if (::pipe(pipe_fds) != 0) throw IoError(fmt::format("cannot create a pipe for {}", args[0]));
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  }
  pid_t pid = 0;
  const int err = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (captured != nullptr) {
    ::close(pipe_fds[1]);
    if (err == 0) {
      char buffer[4096];
      ssize_t n = 0;
      while ((n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
        if (n > 0) captured->append(buffer, static_cast<size_t>(n));
      }
    }
    ::close(pipe_fds[0]);
  }
  if (err != 0) throw InvalidInput(fmt::format("cannot start {}: {}", args[0], std::strerror(err)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(fmt::format("waitpid on {} failed", args[0]));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::filesystem::path require_project_file(const std::filesystem::path& relative) {
  if (auto file = find_project_file(relative)) return *file;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  throw InvalidInput(fmt::format(
      "cannot find {} beside the executable {} (PREFIX/share/speclab/{} for an installed speclab) "
      "or above it; reinstall, or set SPECLAB_SOURCE to the speclab source tree",
      relative.string(), ec ? std::string("(unknown)") : exe.string(), relative.string()));
}

std::string require_python_for_helpers(std::string_view command, std::string_view packages) {
  const std::string python = python_for_helpers();
  if (::access(python.c_str(), X_OK) != 0) {
    throw InvalidInput(fmt::format(
        "{} is not an executable Python; {} needs Debian's python3 with {} (or set SPECLAB_PYTHON)",
        python, command, packages));
  }
  return python;
}

std::vector<std::string> python_module_command(std::string_view command, std::string_view packages,
                                               std::string_view module) {
  const std::filesystem::path package =
      require_project_file(std::filesystem::path("python") / "speclab" / "__init__.py")
          .parent_path()
          .parent_path();
  std::string python = require_python_for_helpers(command, packages);
  const char* old_path = std::getenv("PYTHONPATH");
  std::string path = package.string();
  if (old_path != nullptr && *old_path != '\0') path.append(":").append(old_path);
  if (setenv("PYTHONPATH", path.c_str(), 1) != 0) throw Error("cannot set PYTHONPATH");
  return {std::move(python), "-m", std::string(module)};
}

std::string python_for_helpers() {
  const char* python = std::getenv("SPECLAB_PYTHON");
  return python != nullptr && *python != '\0' ? python : "/usr/bin/python3";
}

}  // namespace speclab::experiments
