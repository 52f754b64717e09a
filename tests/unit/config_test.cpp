// Unit tests of experiments/config (docs/architecture.md "experiments/"): the schema's defaults,
// typed reads, ranges and cross-field checks, every error at once as FILE:LINE:COLUMN with "did you
// mean" suggestions, and --set overrides that keep their TOML types.
#include "experiments/config.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/sweep.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab::experiments {
namespace {

using speclab::testing::fresh_test_dir;
using speclab::testing::invalid_input_message;
using speclab::testing::write_text;
using ::testing::HasSubstr;
using ::testing::Not;

Sweep load(const std::string& text, std::vector<std::string> sets = {}) {
  const auto path = write_text(fresh_test_dir() / "c.toml", text);
  return load_sweep(path, sets);
}

std::string error_of(const std::string& text, std::vector<std::string> sets = {}) {
  return invalid_input_message([&] { load(text, sets); });
}

TEST(Config, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("gamma", "gamma"), 0u);
  EXPECT_EQ(edit_distance("gama", "gamma"), 1u);
  EXPECT_EQ(edit_distance("gamma", "gamme"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
}

TEST(Config, DidYouMeanSuggestsOnlyCloseCandidates) {
  const std::vector<std::string> keys = {"decode.gamma", "decode.batch_size", "seed"};
  EXPECT_EQ(did_you_mean("decode.gama", keys), " (did you mean \"decode.gamma\"?)");
  EXPECT_EQ(did_you_mean("gamma", keys), " (did you mean \"decode.gamma\"?)");
  EXPECT_EQ(did_you_mean("sampling.gamma", keys), " (did you mean \"decode.gamma\"?)");
  EXPECT_EQ(did_you_mean("completely_unrelated", keys), "");
  EXPECT_EQ(did_you_mean("temperature", {"draft.temperature", "sampling.temperature"}),
            " (did you mean \"draft.temperature\" or \"sampling.temperature\"?)");
  EXPECT_EQ(did_you_mean("seed", keys), "");  // an exact match needs no suggestion
}

TEST(Config, DefaultsFillEveryKey) {
  const Sweep sweep = load("[target]\nmodel = \"lsm-tiny-target\"\n");
  ASSERT_EQ(sweep.points.size(), 1u);
  const RunSettings& s = sweep.points[0].settings;
  EXPECT_EQ(s.name, "c");  // the file's stem
  EXPECT_EQ(s.decode.seed, 0u);
  EXPECT_FALSE(s.speculative());
  EXPECT_EQ(s.verifier(), "token");
  EXPECT_EQ(s.decode.sampling.temperature, 1.0);
  EXPECT_EQ(s.decode.gamma, 4);
  EXPECT_EQ(s.batch_size, 1);
  EXPECT_EQ(s.sequences, 1);
  EXPECT_EQ(s.decode.max_new_tokens, 64);
  EXPECT_EQ(s.prompt_source, PromptSource::kRandom);
  EXPECT_THAT(sweep.points[0].config_toml, HasSubstr("max_new_tokens = 64"));
  EXPECT_THAT(sweep.points[0].config_toml, Not(HasSubstr("[draft]")));
}

TEST(Config, DraftSamplingDefaultsToTheTargetsAndCanDiffer) {
  const Sweep sweep = load(R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
top_k = 3
[sampling]
temperature = 0.5
top_p = 0.9
)");
  const RunSettings& s = sweep.points[0].settings;
  EXPECT_EQ(s.decode.draft_sampling.temperature, 0.5);
  EXPECT_EQ(s.decode.draft_sampling.top_p, 0.9);
  EXPECT_EQ(s.decode.draft_sampling.top_k, 3);
  EXPECT_EQ(s.decode.sampling.top_k, 0);
}

TEST(Config, ReportsEveryErrorAtOnceWithFileLineAndColumn) {
  const std::string message = error_of(R"(seed = -1
[target]
model = "lsm-targt"
[sampling]
top_p = 1.5
top_k = "ten"
[decode]
gama = 4
)");
  EXPECT_THAT(message, HasSubstr("c.toml: 5 errors:"));
  EXPECT_THAT(message, HasSubstr("c.toml:1:8: seed is -1; expected an integer in [0, "));
  EXPECT_THAT(message, HasSubstr("c.toml:3:9: target.model is \"lsm-targt\"; expected a model "
                                 "name (did you mean \"lsm-target\"?)"));
  EXPECT_THAT(message, HasSubstr("c.toml:5:9: sampling.top_p is 1.5; expected a number in (0, 1]"));
  EXPECT_THAT(message,
              HasSubstr("c.toml:6:9: sampling.top_k is \"ten\" (a string); expected an integer"));
  EXPECT_THAT(message, HasSubstr("c.toml:8:8: unknown key decode.gama (did you mean "
                                 "\"decode.gamma\"?)"));
  // In file order.
  EXPECT_LT(message.find("c.toml:1:8"), message.find("c.toml:8:8"));
}

TEST(Config, UnknownTopLevelKeysAndTablesAreRejectedWithSuggestions) {
  const std::string message = error_of(R"(nmae = "x"
[target]
model = "lsm-tiny-target"
[sampler]
temperature = 1.0
)");
  EXPECT_THAT(message, HasSubstr("unknown key nmae (did you mean \"name\"?)"));
  EXPECT_THAT(message, HasSubstr("unknown key sampler (did you mean \"sampling\"?)"));
}

TEST(Config, MissingTargetIsAnError) {
  EXPECT_THAT(error_of("seed = 1\n"), HasSubstr("target.model is missing"));
}

// The tiny target with a draft of that name.
std::string tiny_target_with_draft(std::string_view draft) {
  return fmt::format("[target]\nmodel = \"lsm-tiny-target\"\n[draft]\nmodel = \"{}\"\n", draft);
}

TEST(Config, DraftAndTargetMustShareTheVocabulary) {
  const std::string message = error_of(tiny_target_with_draft("ngram-2"));
  EXPECT_THAT(message, HasSubstr("c.toml:4:9: draft.model \"ngram-2\" has vocabulary size 256 but "
                                 "target.model \"lsm-tiny-target\" has 16"));
}

// tli, slem and slrs take a draft of another vocabulary only where a map joins the two by their
// bytes: never a LinearSoftmax model, whose ids are synthetic.
TEST(Config, DraftsOfAnotherVocabularyNeedVocabulariesThatSpellText) {
  const std::string base = tiny_target_with_draft("ngram-2");
  EXPECT_THAT(error_of(base + "[verifier]\nmethod = \"tli\"\n"),
              HasSubstr("model \"lsm-tiny-target\" has synthetic token ids that spell no text"));
  // Two byte-level models share one vocabulary: every rule is allowed, as V1 or sampled-match.
  EXPECT_NO_THROW(load(R"([target]
model = "ngram-4"
[draft]
model = "ngram-2"
[verifier]
method = "slrs"
)"));
}

TEST(Config, CrossFieldConstraints) {
  EXPECT_THAT(error_of(R"([target]
model = "lsm-tiny-target"
[decode]
batch_size = 8
sequences = 4
)"),
              HasSubstr("decode.batch_size is 8 but decode.sequences is 4"));
  EXPECT_THAT(error_of(R"([target]
model = "lsm-tiny-target"
[decode]
baseline = true
)"),
              HasSubstr("decode.baseline = true needs a [draft]"));
  EXPECT_THAT(error_of(R"([target]
model = "lsm-tiny-target"
[decode]
prompt_source = "corpus"
)"),
              HasSubstr("corpus prompts are bytes"));
  EXPECT_THAT(error_of(R"([target]
model = "lsm-tiny-target"
[draft]
temperature = 0.5
)"),
              HasSubstr("draft.temperature is set but draft.model is missing"));
}

TEST(Config, RangesOfSamplingAndVerifierParameters) {
  const std::string message = error_of(R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[verifier]
method = "lenient"
leniency = 0
[sampling]
temperature = -1
top_p = 0
min_p = 2
[decode]
gamma = 0
)");
  EXPECT_THAT(message, HasSubstr("verifier.leniency is 0; expected a number in (0, 1]"));
  EXPECT_THAT(message, HasSubstr("sampling.temperature is -1; expected a finite number ≥ 0"));
  EXPECT_THAT(message, HasSubstr("sampling.top_p is 0; expected a number in (0, 1]"));
  EXPECT_THAT(message, HasSubstr("sampling.min_p is 2; expected a number in [0, 1]"));
  EXPECT_THAT(message, HasSubstr("decode.gamma is 0; expected an integer in [1, 256]"));
}

TEST(Config, InvalidTomlNamesTheLine) {
  const std::string message = error_of("[target\nmodel = 1\n");
  EXPECT_THAT(message, HasSubstr("c.toml:1:"));
  EXPECT_THAT(message, HasSubstr("not valid TOML"));
}

TEST(Config, MissingFileIsInvalidInput) {
  const auto dir = fresh_test_dir();
  EXPECT_THAT(invalid_input_message([&] { load_sweep(dir / "none.toml"); }),
              HasSubstr("none.toml: no such file"));
}

TEST(Config, SetValuesParseAsTomlAndKeepTheirTypes) {
  const std::string base = "[target]\nmodel = \"lsm-tiny-target\"\n";
  const Sweep sweep = load(base, {"decode.max_new_tokens=7", "sampling.temperature=0",
                                  "target.model=lsm-tiny-target", "name=\"x y\""});
  const RunSettings& s = sweep.points[0].settings;
  EXPECT_EQ(s.decode.max_new_tokens, 7);
  EXPECT_EQ(s.decode.sampling.temperature, 0.0);  // an integer is accepted for a number
  EXPECT_EQ(s.name, "x y");
  // A string where an integer belongs stays a string and is reported.
  EXPECT_THAT(error_of(base, {"decode.gamma=\"4\""}),
              HasSubstr("--set decode.gamma=\"4\": decode.gamma is \"4\" (a string); expected an "
                        "integer"));
}

TEST(Config, ConflictingOrUnknownSetsAreErrors) {
  const std::string base =
      "[target]\nmodel = \"lsm-tiny-target\"\n[sweep]\ndecode.gamma = [1, 2]\n";
  const std::string message = error_of(base, {"decode.sequences=2", "decode.sequences=3",
                                              "decode.sequnces=1", "novalue", "decode.gamma=4"});
  EXPECT_THAT(message, HasSubstr("--set decode.sequences=3: conflicts with --set "
                                 "decode.sequences=2"));
  EXPECT_THAT(message, HasSubstr("--set decode.sequnces=1: unknown key decode.sequnces (did you "
                                 "mean \"decode.sequences\"?)"));
  EXPECT_THAT(message, HasSubstr("--set novalue: expected --set KEY=VALUE"));
  EXPECT_THAT(message, HasSubstr("--set decode.gamma=4: decode.gamma is swept at "));
  EXPECT_THAT(message, HasSubstr("use --set sweep.decode.gamma=[4]"));
  // The same value twice is not a conflict.
  EXPECT_EQ(load(base, {"seed=3", "seed=3"}).points[0].settings.decode.seed, 3u);
}

TEST(Config, ResolvedTomlIsCompleteAndParsesBack) {
  const Sweep sweep = load(R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
)");
  const toml::table table = toml::parse(sweep.points[0].config_toml);
  std::vector<std::string> keys;
  for (const auto& [key, node] : flatten_table(table)) keys.push_back(key);
  for (const KeySpec& spec : config_keys()) {
    if (spec.key == "decode.branches") continue;  // tree verifiers only
    EXPECT_NE(std::find(keys.begin(), keys.end(), spec.key), keys.end()) << spec.key;
  }
}

// The resolved config writes each float as the shortest text that reads back as the same double
// (0.3, not toml++'s 0.29999999999999999), and reads back as the table it was written from; the
// point ids keep hashing toml++'s text, so that the ids of existing results stay valid.
TEST(Config, ResolvedTomlWritesFloatsAsShortestRoundTrips) {
  const Sweep sweep = load(R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[sampling]
temperature = 0.7
top_p = 0.9
[verifier]
method = "tree-iid"
[decode]
branches = [2, 1]
)");
  const SweepPoint& point = sweep.points[0];
  EXPECT_THAT(point.config_toml, HasSubstr("temperature = 0.7\n"));
  EXPECT_THAT(point.config_toml, HasSubstr("top_p = 0.9\n"));
  EXPECT_THAT(point.config_toml, HasSubstr("typical_delta = 0.3\n"));
  EXPECT_THAT(point.config_toml, HasSubstr("leniency = 1.0\n"));  // still a TOML float
  EXPECT_THAT(point.config_toml, HasSubstr("branches = [ 2, 1 ]\n"));
  EXPECT_THAT(point.config_toml, Not(HasSubstr("99999")));
  std::ostringstream written;
  written << toml::toml_formatter{settings_to_toml(point.settings)};
  std::ostringstream reread;
  reread << toml::toml_formatter{toml::parse(point.config_toml)};
  EXPECT_EQ(reread.str(), written.str());
  EXPECT_THAT(point.id, ::testing::EndsWith(fmt::format(
                            "{:012x}", fnv1a64(settings_id_text(point.settings)) >> 16)));
}

TEST(Config, BatchSeedsDifferPerBatchAndAreDeterministic) {
  EXPECT_EQ(batch_seed(7, 0), batch_seed(7, 0));
  EXPECT_NE(batch_seed(7, 0), batch_seed(7, 1));
  EXPECT_NE(batch_seed(7, 0), batch_seed(8, 0));
}

TEST(Config, VerifierMethodAcceptsEveryDecodeVerifier) {
  for (const std::string& method : verifier_names()) {
    const Sweep sweep = load(R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[decode]
branches = [2, 2]
)",
                             {"verifier.method=" + method});
    EXPECT_EQ(sweep.points[0].settings.verifier(), method);
    const DecodeConfig config = decode_config(sweep.points[0].settings, 0);
    EXPECT_EQ(verifier_name(config.verifier), method);
  }
}

TEST(Config, TreeVerifiersNeedAValidTreeShape) {
  const std::string base = R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[verifier]
method = "tree-iid"
)";
  EXPECT_THAT(error_of(base), HasSubstr("verifier.method \"tree-iid\" is a tree verifier and "
                                        "needs decode.branches"));
  EXPECT_THAT(error_of(base, {"decode.branches=[2, 0]"}),
              HasSubstr("decode.branches is [2, 0]; expected a non-empty list of integers ≥ 1"));
  EXPECT_THAT(error_of(base, {"decode.branches=[17]"}),
              HasSubstr("expected candidates per node ≤ the vocabulary size 16"));
  EXPECT_THAT(error_of(base, {"decode.branches=[16, 16, 16]"}),
              HasSubstr("makes a tree of more than 4096 nodes"));
  // Integers near 2^63 (tests/fuzz/config_fuzz.cpp): counted without overflow, so refused.
  EXPECT_THAT(error_of(base, {"decode.branches=[5000, 9000000000000000000]"}),
              HasSubstr("makes a tree of more than 4096 nodes"));
  const Sweep sweep = load(base, {"decode.branches=[3, 2]"});
  EXPECT_EQ(std::get<TreeVerifier>(sweep.points[0].settings.decode.verifier).branches,
            (std::vector<int64_t>{3, 2}));
  EXPECT_THAT(sweep.points[0].config_toml, HasSubstr("branches = [ 3, 2 ]"));
  // Chain verifiers ignore a tree shape, and it is not part of their resolved config.
  const Sweep chain = load(base, {"decode.branches=[3, 2]", "verifier.method=token"});
  EXPECT_THAT(chain.points[0].config_toml, Not(HasSubstr("branches")));
}

TEST(Config, ModelThatCannotBeBuiltIsReportedAtItsKey) {
  // A valid name whose model fails to build (here layer 99 of a 30-layer SmolLM2, or its GGUF file
  // not fetched) is an error at the key, like every other (found by tests/fuzz/config_fuzz.cpp:
  // the registry's message escaped without the file's name).
  const std::string message = error_of(tiny_target_with_draft("layerskip:99"));
  EXPECT_THAT(message, HasSubstr("c.toml: 1 error:\n"));
  EXPECT_THAT(message, HasSubstr("c.toml:4:9: draft.model \"layerskip:99\" cannot be built: "));
}

TEST(Config, ManyErrorsAreCountedAndTheFirstListed) {
  // 100 × 100 repeats of one point: 9999 "same experiment" errors (found by
  // tests/fuzz/config_fuzz.cpp, where such a sweep took minutes: every error was compared with
  // every earlier one). All are counted, the first kMaxReportedErrors listed.
  std::string repeated = "[1";
  for (int i = 1; i < 100; ++i) repeated += ", 1";
  repeated += "]";
  const std::string message = error_of(R"([target]
model = "lsm-tiny-target"
[sweep]
seed = )" + repeated +
                                       "\ndecode.gamma = " + repeated + "\n");
  EXPECT_THAT(message, HasSubstr("c.toml: 9999 errors:\n"));
  EXPECT_THAT(message, HasSubstr("c.toml: sweep points 0 and 1 are the same experiment"));
  EXPECT_THAT(message, Not(HasSubstr("sweep points 0 and 51 ")));
  EXPECT_THAT(message, ::testing::EndsWith(fmt::format("\n… and {} more errors",
                                                       9999 - Diagnostics::kMaxReportedErrors)));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'),
            static_cast<std::ptrdiff_t>(Diagnostics::kMaxReportedErrors + 1));
}

TEST(Config, NameMustNameOneDirectoryUnderResults) {
  // The name is the default output directory results/NAME, which tests/fuzz/config_fuzz.cpp
  // checks: name = "/" made it the file system's root, "../x" a sibling of results/.
  const std::string base = "[target]\nmodel = \"lsm-tiny-target\"\n";
  for (const std::string bad : {"/", "../x", "a/b", ".", "..", "a\\b"}) {
    // TOML literal strings: the name exactly as written.
    EXPECT_THAT(error_of("name = '" + bad + "'\n" + base),
                HasSubstr("c.toml:1:8: name is \"" + bad +
                          "\"; expected a label that names one directory under results/"))
        << bad;
  }
  EXPECT_THAT(error_of("name = \"a\\tb\"\n" + base), HasSubstr("name is \"a\\x09b\";"));
  EXPECT_EQ(load("name = \"x y é-1.5\"\n" + base).name, "x y é-1.5");
}

}  // namespace
}  // namespace speclab::experiments
