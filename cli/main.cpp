// speclab: the command-line entry point. Subcommands live in cli/cmd_*.cpp.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "core/base/error.hpp"
#include "core/base/suggest.hpp"
#include "experiments/build_info.hpp"

namespace speclab::cli {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

namespace {
bool g_quiet = false;
}  // namespace

bool quiet() { return g_quiet; }

void require_results_directory(const std::string& results) {
  std::error_code ec;
  if (!std::filesystem::is_directory(results, ec)) {
    throw InvalidInput(fmt::format(
        "results directory {} does not exist; run e.g. `speclab run "
        "experiments/configs/quickstart.toml` first, or pass the --out directory of a run",
        results));
  }
}

void document_exit_statuses(CLI::App& command, std::initializer_list<ExitMeaning> specific) {
  std::map<int, std::string> meanings = {
      {0, "done"},
      {1, std::string(kInternalError)},
      {2,
       "bad input or usage: a bad option or config, a missing or unreadable input, an "
       "unwritable output; the message names what was wrong and where, and nothing already "
       "written is lost"}};
  for (const ExitMeaning& m : specific) meanings[m.code] = std::string(m.meaning);
  std::string footer = "Exit status:";
  for (const auto& [code, meaning] : meanings) footer += fmt::format("\n  {}  {}", code, meaning);
  command.footer(footer);
}

namespace {
// -q/--quiet on every command that parses its own options (conformance passes its arguments to
// Python, whose parser has its own --quiet).
void add_quiet_flags(CLI::App& app) {
  for (CLI::App* command : app.get_subcommands({})) {
    if (command->get_subcommands({}).empty()) {
      if (!command->get_prefix_command()) {
        command->add_flag("-q,--quiet", g_quiet,
                          "print no progress and no human-readable report (errors and warnings "
                          "still go to stderr; --json and the files written are unchanged)");
      }
    } else {
      add_quiet_flags(*command);
    }
  }
}
}  // namespace
}  // namespace speclab::cli

namespace {

// CLI11 answers a misspelt command with "A subcommand is required", naming neither the word nor
// the commands; the first word that is not an option is checked here instead.
bool refuse_unknown_command(int argc, char** argv,
                            const std::vector<speclab::cli::CommandEntry>& registry) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const auto& entry : registry) names.push_back(entry.name);
  if (std::find(names.begin(), names.end(), word) != names.end()) return false;
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  std::fprintf(stderr,
               "speclab: error: unknown command '%s'%s; the commands are %s (speclab --help)\n",
               word.c_str(), speclab::did_you_mean(word, names).c_str(), list.c_str());
  return true;
}

// OpenMP threads that find no work spin before they sleep (libgomp: 300,000 turns by default,
// for ever under OMP_WAIT_POLICY=active). On a machine shared with other processes the spinning
// threads take the cores the working ones need: `speclab bench verify --contend 2` measured the
// V1 fast path at 16-28 ms per batch against 0.44 ms with passive waiting (docs/benchmarks.md).
// libgomp reads its settings once, when it is loaded, so speclab sets OMP_WAIT_POLICY=passive
// and starts itself again before any work, unless the user chose a policy or a spin count.
void wait_passively_unless_told(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: then run with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  wait_passively_unless_told(argv);
  CLI::App app{
      "speclab: simulation and verification of speculative decoding.\n"
      "Run `speclab demo` for a small experiment that writes HDF5 and prints a summary."};
  app.require_subcommand(1);
  auto& registry = speclab::cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& entry : registry) entry.setup(app);
  speclab::cli::add_quiet_flags(app);
  const auto& build = speclab::experiments::build_info();
  app.set_version_flag("--version", "speclab " + build.version + " (git " + build.git_commit + ")",
                       "print the version and the git commit the binary was built from");
  if (refuse_unknown_command(argc, argv, registry)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const speclab::cli::ExitStatus& status) {
    return status.code;
  } catch (const speclab::InvalidInput& e) {
    std::fprintf(stderr, "speclab: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "speclab: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
