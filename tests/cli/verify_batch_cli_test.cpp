// `speclab verify-batch` (cli/cmd_verify_batch.cpp): its HDF5 output equals
// speclab::verify_chain (or verify_match for the match verifiers) on the same inputs, and bad input
// (docs/verifiers.md "Bad input") exits 2 with a message naming the dataset while OUT.h5 is neither
// created nor changed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/io/hdf5_file.hpp"
#include "core/verify/verify_chain.hpp"
#include "core/verify/verify_match.hpp"
#include "tests/support/cli_run.hpp"

namespace speclab {
namespace {
namespace fs = std::filesystem;

fs::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const fs::path dir =
      fs::path(SPECLAB_BINARY_DIR) / "test_tmp" / "verify_batch_cli" / info->name();
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

using testing::CliRun;

// Paths live under the build tree and are single-quoted for the shell.
CliRun run_verify_batch(const fs::path& in, const fs::path& out) {
  return testing::run_cli("verify-batch --in '" + in.string() + "' --out '" + out.string() + "'");
}

// A batch with random rows (fixed seed), draft tokens drawn from the draft rows, ragged n_draft.
struct Input {
  int64_t batch = 4;
  int64_t gamma = 3;
  int64_t vocab = 8;
  std::vector<float> probs_target;
  std::vector<float> probs_draft;
  std::vector<int32_t> draft_tokens;
  std::vector<int32_t> n_draft;
  std::string method = "token";
  std::optional<double> leniency;
  uint64_t seed = 1234;
  std::optional<uint64_t> step = 7;
  std::vector<int64_t> positions;  ///< the match verifiers' output positions; empty: absent
  std::optional<std::string> sampling;
  std::optional<std::vector<int64_t>> positions_shape;

  // Overrides for bad-input tests.
  std::optional<std::vector<int64_t>> probs_target_shape;
  std::optional<std::vector<int64_t>> draft_tokens_shape;
  bool write_probs_draft = true;
  std::vector<std::pair<std::string, double>> extra_attributes;  // e.g. a misspelt "lenency"
  std::vector<std::string> extra_datasets;                       // int32 [B], e.g. "n_drafts"
};

std::vector<float> random_rows(int64_t rows, int64_t vocab, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> values(rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    float sum = 0.0f;
    for (int64_t t = 0; t < vocab; ++t) {
      // Some exact zeros, as top-k leaves them.
      const float w = uniform(rng);
      values[r * vocab + t] = w < 0.2f ? 0.0f : w;
      sum += values[r * vocab + t];
    }
    if (sum == 0.0f) values[r * vocab] = sum = 1.0f;
    for (int64_t t = 0; t < vocab; ++t) values[r * vocab + t] /= sum;
  }
  return values;
}

Input make_input(uint64_t rng_seed = 99) {
  Input input;
  std::mt19937_64 rng(rng_seed);
  const int64_t b = input.batch, g = input.gamma, v = input.vocab;
  input.probs_target = random_rows(b * (g + 1), v, rng);
  input.probs_draft = random_rows(b * g, v, rng);
  input.draft_tokens.resize(b * g);
  for (int64_t row = 0; row < b * g; ++row) {
    std::discrete_distribution<int32_t> draw(input.probs_draft.begin() + row * v,
                                             input.probs_draft.begin() + (row + 1) * v);
    input.draft_tokens[row] = draw(rng);
  }
  input.n_draft = {3, 2, 0, 3};
  return input;
}

void write_input(const fs::path& path, const Input& input) {
  const int64_t b = input.batch, g = input.gamma, v = input.vocab;
  Hdf5Writer writer(path);
  writer.write("probs_target", input.probs_target,
               input.probs_target_shape.value_or(std::vector<int64_t>{b, g + 1, v}));
  if (input.write_probs_draft) {
    writer.write("probs_draft", input.probs_draft, std::vector<int64_t>{b, g, v});
  }
  writer.write("draft_tokens", input.draft_tokens,
               input.draft_tokens_shape.value_or(std::vector<int64_t>{b, g}));
  if (!input.n_draft.empty()) writer.write("n_draft", input.n_draft, std::vector<int64_t>{b});
  if (!input.positions.empty()) {
    writer.write("positions", input.positions,
                 input.positions_shape.value_or(std::vector<int64_t>{b}));
  }
  writer.write_attribute("method", input.method);
  if (input.sampling) writer.write_attribute("sampling", *input.sampling);
  writer.write_attribute<uint64_t>("seed", input.seed);
  if (input.leniency) writer.write_attribute<double>("leniency", *input.leniency);
  if (input.step) writer.write_attribute<uint64_t>("step", *input.step);
  for (const auto& [name, value] : input.extra_attributes) {
    writer.write_attribute<double>(name, value);
  }
  for (const std::string& name : input.extra_datasets) {
    writer.write(name, std::vector<int32_t>(b, 1), std::vector<int64_t>{b});
  }
  writer.commit();
}

ChainResult expected_result(const Input& input) {
  ChainBatch batch;
  batch.batch = input.batch;
  batch.gamma = input.gamma;
  batch.vocab = input.vocab;
  batch.probs_target = input.probs_target;
  if (input.write_probs_draft) batch.probs_draft = input.probs_draft;
  batch.draft_tokens = input.draft_tokens;
  batch.n_draft = input.n_draft;
  batch.positions = input.positions;
  if (input.method == "coupled" || input.method == "sampled-match") {
    const bool coupled = input.method == "coupled";
    const TokenSampling sampling =
        input.sampling ? parse_token_sampling(*input.sampling, "sampling")
                       : (coupled ? TokenSampling::kGumbel : TokenSampling::kInverseCdf);
    return verify_match(
        batch, MatchParams{.method = coupled ? MatchMethod::kCoupled : MatchMethod::kSampledMatch,
                           .sampling = sampling,
                           .seed = input.seed});
  }
  ChainParams params;
  params.method = parse_chain_method(input.method);
  params.leniency = input.leniency.value_or(1.0);
  params.seed = input.seed;
  params.step = static_cast<uint32_t>(input.step.value_or(0));
  return verify_chain(batch, params);
}

void expect_output_matches(const fs::path& out, const Input& input) {
  const ChainResult expected = expected_result(input);
  const int64_t b = input.batch, g = input.gamma;
  const Hdf5Reader reader(out);
  const Hdf5Array<int32_t> emitted = reader.read<int32_t>("emitted_tokens", 2);
  EXPECT_EQ(emitted.shape, (std::vector<int64_t>{b, g + 1}));
  EXPECT_EQ(emitted.values, expected.emitted_tokens);
  const Hdf5Array<int32_t> n_accepted = reader.read<int32_t>("n_accepted", 1);
  EXPECT_EQ(n_accepted.shape, (std::vector<int64_t>{b}));
  EXPECT_EQ(n_accepted.values, expected.n_accepted);
  const Hdf5Array<uint8_t> mask = reader.read<uint8_t>("accept_mask", 2);
  EXPECT_EQ(mask.shape, (std::vector<int64_t>{b, g}));
  EXPECT_EQ(mask.values, expected.accept_mask);
  const Hdf5Array<uint8_t> fallback = reader.read<uint8_t>("residual_fallback", 1);
  EXPECT_EQ(fallback.values, expected.residual_fallback);

  EXPECT_EQ(reader.read_string_attribute("schema"), "speclab.verify_batch");
  EXPECT_EQ(reader.read_attribute<int64_t>("schema_version"), 1);
  EXPECT_EQ(reader.read_string_attribute("method"), input.method);
  EXPECT_EQ(reader.read_attribute<double>("leniency"), input.leniency.value_or(1.0));
  EXPECT_EQ(reader.read_attribute<uint64_t>("seed"), input.seed);
  EXPECT_EQ(reader.read_attribute<uint64_t>("step"), input.step.value_or(0));
  EXPECT_EQ(reader.read_attribute<int64_t>("lossy"), expected.lossy ? 1 : 0);
  EXPECT_EQ(reader.read_attribute<int64_t>("residual_fallbacks"), expected.residual_fallbacks);
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
}

// Runs a bad input and checks exit status 2, the message, and that OUT.h5 was not created.
void expect_rejected(const Input& input, std::initializer_list<std::string> parts) {
  const fs::path dir = test_dir();
  write_input(dir / "IN.h5", input);
  const CliRun run = run_verify_batch(dir / "IN.h5", dir / "OUT.h5");
  EXPECT_EQ(run.status, 2) << run.output;
  for (const std::string& part : parts) {
    EXPECT_TRUE(contains(run.output, part)) << "'" << run.output << "' lacks '" << part << "'";
  }
  EXPECT_FALSE(fs::exists(dir / "OUT.h5"));
  EXPECT_FALSE(fs::exists(dir / "OUT.h5.partial"));
}

TEST(VerifyBatchCli, OutputEqualsVerifyChainForEveryMethod) {
  const fs::path dir = test_dir();
  for (const char* method : {"token", "lenient", "greedy"}) {
    SCOPED_TRACE(method);
    Input input = make_input();
    input.method = method;
    if (input.method == "lenient") input.leniency = 0.5;
    if (input.method == "greedy") input.write_probs_draft = false;
    const fs::path in = dir / (std::string(method) + "_in.h5");
    const fs::path out = dir / (std::string(method) + "_out.h5");
    write_input(in, input);
    const CliRun run = run_verify_batch(in, out);
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_TRUE(contains(run.output, "B = 4")) << run.output;
    EXPECT_TRUE(contains(run.output, out.string())) << run.output;
    expect_output_matches(out, input);
  }
}

// The match verifiers (docs/verifiers.md V8): probs_draft is optional, the noise is addressed by
// each request's output position (the dataset 'positions'), and sampled-match takes plain
// decoding's rule from the attribute 'sampling'.
Input match_input(const char* method, std::optional<std::string> sampling) {
  Input input = make_input();
  input.method = method;
  input.sampling = std::move(sampling);
  input.step.reset();
  input.positions = {0, 17, 5, 4'000'000'000};
  return input;
}

TEST(VerifyBatchCli, OutputEqualsVerifyMatchForBothMatchMethods) {
  const fs::path dir = test_dir();
  struct Case {
    const char* name;
    const char* method;
    std::optional<std::string> sampling;
    const char* written_sampling;
  };
  const Case cases[] = {{"coupled", "coupled", std::nullopt, "gumbel"},
                        {"coupled_gumbel", "coupled", "gumbel", "gumbel"},
                        {"sampled", "sampled-match", std::nullopt, "inverse-cdf"},
                        {"sampled_gumbel", "sampled-match", "gumbel", "gumbel"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Input input = match_input(c.method, c.sampling);
    // Request 0 drafts the target's own tokens, so that drafts are accepted as well as rejected:
    // each round copies the tokens emitted up to the first mismatch, which depend on the rows and
    // positions only.
    for (int64_t round = 0; round < input.gamma; ++round) {
      const ChainResult result = expected_result(input);
      for (int64_t i = 0; i <= result.n_accepted[0] && i < input.gamma; ++i) {
        input.draft_tokens[i] = result.emitted_tokens[i];
      }
    }
    const fs::path in = dir / (std::string(c.name) + "_in.h5");
    const fs::path out = dir / (std::string(c.name) + "_out.h5");
    write_input(in, input);
    const CliRun run = run_verify_batch(in, out);
    ASSERT_EQ(run.status, 0) << run.output;
    EXPECT_TRUE(contains(run.output, std::string("method ") + c.method)) << run.output;
    EXPECT_TRUE(contains(run.output, std::string("sampling ") + c.written_sampling)) << run.output;
    expect_output_matches(out, input);
    const Hdf5Reader reader(out);
    EXPECT_EQ(reader.read_string_attribute("sampling"), c.written_sampling);
    EXPECT_EQ(reader.read<int32_t>("n_accepted", 1).values[0], input.n_draft[0]);

    // probs_draft is never read: absent, the tokens are the same.
    input.write_probs_draft = false;
    const fs::path no_draft = dir / (std::string(c.name) + "_no_draft.h5");
    write_input(in, input);
    ASSERT_EQ(run_verify_batch(in, no_draft).status, 0);
    EXPECT_EQ(Hdf5Reader(no_draft).read<int32_t>("emitted_tokens", 2).values,
              expected_result(input).emitted_tokens);
  }
}

TEST(VerifyBatchCli, MatchNoiseFollowsThePositions) {
  // The same batch one output position later (or with positions absent: 0) gives other tokens,
  // each equal to verify_match's for those positions.
  const fs::path dir = test_dir();
  Input input = match_input("coupled", std::nullopt);
  input.n_draft = {3, 3, 3, 3};
  std::vector<std::vector<int32_t>> outputs;
  for (const std::vector<int64_t>& positions :
       {std::vector<int64_t>{0, 17, 5, 9}, std::vector<int64_t>{1, 18, 6, 10},
        std::vector<int64_t>{}}) {
    input.positions = positions;
    const fs::path in = dir / ("in" + std::to_string(outputs.size()) + ".h5");
    const fs::path out = dir / ("out" + std::to_string(outputs.size()) + ".h5");
    write_input(in, input);
    const CliRun run = run_verify_batch(in, out);
    ASSERT_EQ(run.status, 0) << run.output;
    expect_output_matches(out, input);
    outputs.push_back(Hdf5Reader(out).read<int32_t>("emitted_tokens", 2).values);
  }
  EXPECT_NE(outputs[0], outputs[1]);
  EXPECT_NE(outputs[0], outputs[2]);
}

TEST(VerifyBatchCli, BadPositionsExit2NamingThem) {
  {
    Input input = match_input("coupled", std::nullopt);
    input.positions[2] = -3;
    expect_rejected(input, {"IN.h5: ", "dataset 'positions' holds -3 for request 2", "≥ 0"});
  }
  {
    Input input = match_input("sampled-match", std::nullopt);
    input.positions.push_back(0);
    input.positions_shape = std::vector<int64_t>{5};
    expect_rejected(input, {"dataset 'positions' has shape [5]; expected [B] = [4]"});
  }
  {
    Input input = match_input("coupled", std::nullopt);
    input.positions_shape = std::vector<int64_t>{2, 2};
    expect_rejected(input, {"dataset 'positions' has rank 2"});
  }
  {
    // Request 0 drafts 3 tokens: its positions reach 2^32 − 1 + 3.
    Input input = match_input("coupled", std::nullopt);
    input.positions[0] = (int64_t{1} << 32) - 1;
    expect_rejected(input, {"IN.h5: ", "positions[0] (request 0) is 4294967295", "2^32"});
  }
  {
    Input input = make_input();
    input.positions = {0, 1, 2, 3};
    expect_rejected(input, {"dataset 'positions' given with method \"token\"", "coupled"});
  }
}

TEST(VerifyBatchCli, MatchAttributesAreChecked) {
  {
    // The step is not part of the match verifiers' noise: a nonzero one is refused, naming
    // positions, rather than ignored.
    Input input = match_input("coupled", std::nullopt);
    input.step = 3;
    expect_rejected(input, {"root attribute 'step' is 3 with method \"coupled\"", "positions"});
  }
  {
    Input input = match_input("coupled", "inverse-cdf");
    expect_rejected(input, {"root attribute 'sampling' is \"inverse-cdf\" with method "
                            "\"coupled\""});
  }
  {
    Input input = match_input("sampled-match", "gumbel-max");
    expect_rejected(input, {"root attribute 'sampling' is \"gumbel-max\"", "inverse-cdf"});
  }
  {
    Input input = make_input();
    input.sampling = "gumbel";
    expect_rejected(input, {"root attribute 'sampling'", "with method \"token\""});
  }
  {
    Input input = match_input("sampled-match", std::nullopt);
    input.leniency = 0.5;
    expect_rejected(input, {"root attribute 'leniency' is 0.5 with method \"sampled-match\""});
  }
  {
    Input input = match_input("coupld", std::nullopt);
    expect_rejected(input, {"did you mean \"coupled\"", "sampled-match"});
  }
  {
    // Target rows are checked whole for the match verifiers too.
    Input input = match_input("sampled-match", std::nullopt);
    input.probs_target[(1 * (input.gamma + 1) + 2) * input.vocab] =
        std::numeric_limits<float>::quiet_NaN();
    expect_rejected(input, {"IN.h5: ", "probs_target", "request 1", "position 3"});
  }
}

TEST(VerifyBatchCli, StepDefaultsToZeroAndNDraftToGamma) {
  const fs::path dir = test_dir();
  Input input = make_input(7);
  input.step.reset();
  input.n_draft.clear();
  write_input(dir / "IN.h5", input);
  const CliRun run = run_verify_batch(dir / "IN.h5", dir / "OUT.h5");
  ASSERT_EQ(run.status, 0) << run.output;
  expect_output_matches(dir / "OUT.h5", input);
}

TEST(VerifyBatchCli, MissingInputFileExits2) {
  const fs::path dir = test_dir();
  const CliRun run = run_verify_batch(dir / "IN.h5", dir / "OUT.h5");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_TRUE(contains(run.output, (dir / "IN.h5").string() + ": no such file")) << run.output;
  EXPECT_FALSE(fs::exists(dir / "OUT.h5"));
}

TEST(VerifyBatchCli, WrongRankExits2) {
  Input input = make_input();
  input.probs_target_shape = std::vector<int64_t>{input.batch * (input.gamma + 1), input.vocab};
  expect_rejected(input, {"dataset 'probs_target' has rank 2; expected rank 3 [B, γ+1, V]"});
}

TEST(VerifyBatchCli, MismatchedBatchExits2) {
  // draft_tokens has B = 5 where probs_target has B = 4: both datasets and shapes are named.
  Input input = make_input();
  input.draft_tokens.resize(5 * input.gamma, 0);
  input.draft_tokens_shape = std::vector<int64_t>{5, input.gamma};
  expect_rejected(input, {"dataset 'draft_tokens' has shape [5, 3]; expected [B, γ] = [4, 3]",
                          "'probs_target' shape [4, 4, 8]"});
}

TEST(VerifyBatchCli, NanInProbsTargetExits2) {
  // Request 1 uses n_draft = 2 drafts, so its rows are positions 1..3; NaN at position 2.
  Input input = make_input();
  const int64_t row = 1 * (input.gamma + 1) + 1;
  input.probs_target[row * input.vocab + 3] = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(input, {"IN.h5: ", "probs_target", "request 1", "position 2"});
}

TEST(VerifyBatchCli, UnknownMethodExits2) {
  Input input = make_input();
  input.method = "speculative";
  expect_rejected(input, {"method", "speculative", "token", "greedy", "lenient"});
}

TEST(VerifyBatchCli, MissingProbsDraftExits2ForTokenMethod) {
  Input input = make_input();
  input.write_probs_draft = false;
  expect_rejected(input, {"dataset 'probs_draft' is missing"});
}

TEST(VerifyBatchCli, TokenIdOutOfRangeExits2) {
  Input input = make_input();
  input.draft_tokens[0] = static_cast<int32_t>(input.vocab);
  expect_rejected(input, {"draft_tokens", "request 0", "position 1"});
}

TEST(VerifyBatchCli, FailedRunLeavesExistingOutputByteIdentical) {
  const fs::path dir = test_dir();
  const Input good = make_input();
  write_input(dir / "good.h5", good);
  const CliRun first = run_verify_batch(dir / "good.h5", dir / "OUT.h5");
  ASSERT_EQ(first.status, 0) << first.output;
  const std::string before = read_bytes(dir / "OUT.h5");
  ASSERT_FALSE(before.empty());

  Input bad = make_input();
  bad.probs_target[5] = std::numeric_limits<float>::quiet_NaN();
  write_input(dir / "bad.h5", bad);
  const CliRun second = run_verify_batch(dir / "bad.h5", dir / "OUT.h5");
  EXPECT_EQ(second.status, 2) << second.output;
  EXPECT_EQ(read_bytes(dir / "OUT.h5"), before);
  EXPECT_FALSE(fs::exists(dir / "OUT.h5.partial"));
}

TEST(VerifyBatchCli, UnwritableOutputExits2) {
  // /proc takes no new file, whoever runs the test (root included).
  const fs::path dir = test_dir();
  write_input(dir / "IN.h5", make_input());
  const CliRun run = run_verify_batch(dir / "IN.h5", "/proc/OUT.h5");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_TRUE(contains(run.output, "/proc/OUT.h5: cannot create '/proc/OUT.h5.partial'"))
      << run.output;
  EXPECT_TRUE(contains(run.output, "choose a writable path")) << run.output;
}

TEST(VerifyBatchCli, MisspeltAttributeIsRefusedWithASuggestion) {
  // "lenency" used to be ignored, running method "lenient" at leniency 1.
  Input input = make_input();
  input.method = "lenient";
  input.extra_attributes = {{"lenency", 0.5}};
  expect_rejected(input, {"IN.h5: unknown root attribute(s) 'lenency' (did you mean "
                          "\"leniency\"?); expected only method, seed, leniency, step"});
}

// A run file (or any speclab file) passed as the input is named for what it is, not answered with
// a list of its dozens of attributes as "unknown".
TEST(VerifyBatchCli, AnotherSpeclabFileIsNamedForWhatItIs) {
  const fs::path dir = test_dir();
  {
    Hdf5Writer run(dir / "run.h5");
    run.write_attribute("schema", "speclab.run");
    run.write_attribute<int64_t>("schema_version", 3);
    run.write_attribute<double>("speedup", 1.5);
    const std::vector<int32_t> accepted = {1, 2};
    const int64_t shape[] = {2};
    run.write("steps/accepted", std::span<const int32_t>(accepted), shape);
    run.commit();
  }
  const CliRun run = run_verify_batch(dir / "run.h5", dir / "OUT.h5");
  EXPECT_EQ(run.status, 2) << run.output;
  EXPECT_TRUE(contains(run.output,
                       "run.h5: this is a \"speclab.run\" file, not a verify-batch "
                       "input; expected a file with only the datasets probs_target"))
      << run.output;
  EXPECT_FALSE(contains(run.output, "unknown")) << run.output;
  EXPECT_FALSE(fs::exists(dir / "OUT.h5"));
}

TEST(VerifyBatchCli, MisspeltDatasetIsRefusedWithASuggestion) {
  Input input = make_input();
  input.n_draft.clear();
  input.extra_datasets = {"n_drafts"};
  expect_rejected(input, {"unknown dataset(s) 'n_drafts' (did you mean \"n_draft\"?)"});
}

TEST(VerifyBatchCli, OutputNamingTheInputIsRefusedAndTheInputKept) {
  const fs::path dir = test_dir();
  write_input(dir / "IN.h5", make_input());
  const std::string before = read_bytes(dir / "IN.h5");
  fs::create_directories(dir / "sub");
  fs::create_symlink(dir / "IN.h5", dir / "link.h5");
  fs::create_hard_link(dir / "IN.h5", dir / "hard.h5");
  // The same path, another spelling of it, a symbolic and a hard link.
  for (const fs::path& out :
       {dir / "IN.h5", dir / "sub" / ".." / "IN.h5", dir / "link.h5", dir / "hard.h5"}) {
    SCOPED_TRACE(out);
    const CliRun run = run_verify_batch(dir / "IN.h5", out);
    EXPECT_EQ(run.status, 2) << run.output;
    EXPECT_TRUE(contains(run.output, "is the input file")) << run.output;
    EXPECT_EQ(read_bytes(dir / "IN.h5"), before);
  }
}

}  // namespace
}  // namespace speclab
