// Unit tests of experiments/results, runner and merge (docs/hdf5.md): the datasets
// and attributes of a point's file, identical datasets for the same config and seed (whatever
// --jobs), the summary table, --resume, stopping, and merging shards.
#include "experiments/results.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/io/hdf5_file.hpp"
#include "core/models/model_registry.hpp"
#include "core/plan/cost_model.hpp"
#include "experiments/merge.hpp"
#include "experiments/runner.hpp"
#include "experiments/summary_table.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab::experiments {
namespace {

namespace fs = std::filesystem;
using speclab::testing::fresh_test_dir;
using speclab::testing::invalid_input_message;
using speclab::testing::read_text;
using speclab::testing::tiny_sweep_toml;
using speclab::testing::write_text;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

Sweep tiny_sweep(const fs::path& dir, const std::string& text = tiny_sweep_toml()) {
  return load_sweep(write_text(dir / "tiny.toml", text));
}

RunReport run_quietly(const Sweep& sweep, const fs::path& out, RunOptions options = {}) {
  options.out = out;
  options.progress.out = nullptr;
  return run_sweep(sweep, options);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

bool is_time_valued(const std::string& name) {
  for (const MetricSpec& m : summary_metrics()) {
    if (m.name == name) return m.time_valued;
  }
  return name.ends_with("seconds");
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Results, PointFileHoldsStepLogsCurvesAndAttributes) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  const RunReport report = run_quietly(sweep, dir / "out");
  EXPECT_EQ(report.ran, 4);
  const SweepPoint& point = sweep.points[3];  // gamma 3, temperature 1.0
  const Hdf5Reader file(point_path(dir / "out", point));
  EXPECT_EQ(file.read_string_attribute("schema"), "speclab.run");
  EXPECT_EQ(file.read_attribute<int64_t>("schema_version"), 3);
  EXPECT_EQ(file.read_string_attribute("id"), point.id);
  EXPECT_EQ(file.read_string_attribute("config_toml"), point.config_toml);
  EXPECT_EQ(file.read_attribute<uint64_t>("seed"), 5u);
  EXPECT_EQ(file.read_attribute<int64_t>("param.decode.gamma"), 3);
  EXPECT_EQ(file.read_attribute<double>("param.sampling.temperature"), 1.0);
  EXPECT_EQ(file.read_string_attribute("swept_keys"), "decode.gamma,sampling.temperature");
  for (const char* name : {"started", "finished"}) {
    EXPECT_THAT(file.read_string_attribute(name),
                ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"));
  }
  for (const char* name : {"git_commit", "host", "hdf5_version", "speclab_version"}) {
    EXPECT_FALSE(file.read_string_attribute(name).empty()) << name;
  }
  EXPECT_THAT(file.read_string_attribute("library_versions"), HasSubstr("hdf5 1.10"));
  // The machine it ran on (core/probe/machine.hpp). A binary runs only on a CPU that has the
  // instruction set it was built for, so the CPU's ISA is at least the build's.
  const std::vector<std::string> isas = {"x86-64", "avx2", "avx512", "avx512-vnni"};
  const auto rank = [&](const std::string& isa) {
    return std::find(isas.begin(), isas.end(), isa) - isas.begin();
  };
  const std::string build_isa = file.read_string_attribute("build_isa");
  const std::string cpu_isa = file.read_string_attribute("cpu_isa");
  ASSERT_LT(rank(build_isa), 4) << build_isa;
  ASSERT_LT(rank(cpu_isa), 4) << cpu_isa;
  EXPECT_GE(rank(cpu_isa), rank(build_isa));
  EXPECT_FALSE(file.read_string_attribute("cpu_model").empty());
  EXPECT_EQ(file.read_attribute<int64_t>("threads"), omp_get_max_threads());
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  EXPECT_TRUE(
      file.read_string_attribute("omp_wait_policy").starts_with(policy ? policy : "default"))
      << file.read_string_attribute("omp_wait_policy");

  const int64_t steps = file.read_attribute<int64_t>("steps");
  for (const char* name :
       {"steps/accepted", "steps/emitted", "steps/drafted", "steps/batch", "steps/request"}) {
    const Hdf5DatasetInfo info = file.dataset_info(name);
    EXPECT_EQ(info.shape, std::vector<int64_t>{steps}) << name;
    EXPECT_TRUE(info.chunked && info.deflate && info.extendable) << name;
  }
  const auto accepted = file.read<int32_t>("steps/accepted").values;
  const auto emitted = file.read<int32_t>("steps/emitted").values;
  const auto drafted = file.read<int32_t>("steps/drafted").values;
  for (size_t i = 0; i < accepted.size(); ++i) {
    EXPECT_LE(accepted[i], drafted[i]);
    EXPECT_LE(drafted[i], 3);
    EXPECT_EQ(emitted[i], accepted[i] + 1);  // no EOS in this model
  }
  const int64_t total_accepted = std::accumulate(accepted.begin(), accepted.end(), int64_t{0});
  EXPECT_EQ(file.read_attribute<int64_t>("accepted"), total_accepted);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("mean_accepted"),
                   static_cast<double>(total_accepted) / steps);
  EXPECT_EQ(file.read_attribute<int64_t>("tokens"), 4 * 12);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("emitted_per_step"), 48.0 / steps);
  const auto histogram = file.read<int64_t>("accepted_length_histogram", 1).values;
  ASSERT_EQ(histogram.size(), 4u);  // γ + 1
  EXPECT_EQ(std::accumulate(histogram.begin(), histogram.end(), int64_t{0}), steps);
  const auto reached = file.read<int64_t>("position/reached", 1).values;
  const auto pos_accepted = file.read<int64_t>("position/accepted", 1).values;
  const auto rate = file.read<double>("position/acceptance_conditional", 1).values;
  ASSERT_EQ(reached.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    if (reached[i] > 0) EXPECT_DOUBLE_EQ(rate[i], double(pos_accepted[i]) / reached[i]);
  }
  const double alpha = file.read_attribute<double>("alpha_estimate");
  EXPECT_GT(alpha, 0.0);
  EXPECT_LE(alpha, 1.0);
  EXPECT_EQ(file.read<int32_t>("sequences/length").values, std::vector<int32_t>(4, 12));
  EXPECT_EQ(file.read<int32_t>("sequences/tokens").values.size(), 48u);
  EXPECT_EQ(file.read<int32_t>("baseline/sequences/tokens").values.size(), 48u);
  EXPECT_EQ(file.dataset_shape("batches/seed"), std::vector<int64_t>{2});
  EXPECT_GT(file.read_attribute<double>("speedup"), 0.0);
}

// A dataset's string attribute, read with the HDF5 C API ("" when absent).
std::string dataset_attribute(const fs::path& path, const std::string& dataset, const char* name) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  std::string value;
  if (H5Aexists_by_name(file, dataset.c_str(), name, H5P_DEFAULT) > 0) {
    const hid_t attribute = H5Aopen_by_name(file, dataset.c_str(), name, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t type = H5Aget_type(attribute);
    char* text = nullptr;
    if (H5Tis_variable_str(type) > 0 && H5Aread(attribute, type, &text) >= 0 && text != nullptr) {
      value = text;
      H5free_memory(text);
    }
    H5Tclose(type);
    H5Aclose(attribute);
  }
  H5Fclose(file);
  return value;
}

// steps/request names the request of every request-step, so that each request's trajectory can
// be read off at batch > 1: (a) a request's steps emit exactly its generated tokens; (b) request 0
// decodes with the same seed, prompt and Philox addresses (request index 0, batch 0) at batch
// size 2 as at batch size 1, so its steps at batch size 2 are the whole first batch at batch
// size 1, step for step.
TEST(Results, StepRequestGivesEachRequestsTrajectoryAtAnyBatchSize) {
  const fs::path dir = fresh_test_dir();
  const Sweep two = tiny_sweep(dir);  // batch_size 2
  run_quietly(two, dir / "two");
  const std::vector<std::string> batch_of_one = {"decode.batch_size=1"};
  const Sweep one = load_sweep(write_text(dir / "one.toml", tiny_sweep_toml()), batch_of_one);
  run_quietly(one, dir / "one");
  ASSERT_EQ(one.points.size(), two.points.size());
  for (size_t p = 0; p < two.points.size(); ++p) {
    const Hdf5Reader file(point_path(dir / "two", two.points[p]));
    const auto request = file.read<int32_t>("steps/request").values;
    const auto emitted = file.read<int32_t>("steps/emitted").values;
    const auto accepted = file.read<int32_t>("steps/accepted").values;
    const auto length = file.read<int32_t>("sequences/length").values;
    ASSERT_EQ(request.size(), emitted.size());
    std::vector<int64_t> sum(length.size(), 0);
    std::vector<int32_t> request0;
    for (size_t i = 0; i < request.size(); ++i) {
      ASSERT_GE(request[i], 0);
      ASSERT_LT(request[i], static_cast<int32_t>(length.size()));
      sum[request[i]] += emitted[i];
      if (request[i] == 0) request0.push_back(accepted[i]);
    }
    for (size_t r = 0; r < length.size(); ++r) EXPECT_EQ(sum[r], length[r]) << "request " << r;

    const Hdf5Reader single(point_path(dir / "one", one.points[p]));
    const auto batch = single.read<int32_t>("steps/batch").values;
    const auto single_accepted = single.read<int32_t>("steps/accepted").values;
    std::vector<int32_t> first_batch;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (batch[i] == 0) first_batch.push_back(single_accepted[i]);
    }
    EXPECT_EQ(request0, first_batch) << two.points[p].id;
    EXPECT_GT(first_batch.size(), 1u);
  }
}

// The two per-position rates, recounted from the step log (no EOS in this model, so
// steps/accepted is the verifier's count): the marginal rate of position i is the fraction of
// verification steps that accepted more than i drafts, the conditional one the fraction of those
// that reached position i (accepted at least i and drafted more than i).
TEST(Results, PositionAcceptanceMarginalAndConditionalFromTheStepLog) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  for (const SweepPoint& point : sweep.points) {
    const Hdf5Reader file(point_path(dir / "out", point));
    const auto accepted = file.read<int32_t>("steps/accepted").values;
    const auto drafted = file.read<int32_t>("steps/drafted").values;
    const auto marginal = file.read<double>("position/acceptance_marginal").values;
    const auto conditional = file.read<double>("position/acceptance_conditional").values;
    const int64_t gamma = point.settings.decode.gamma;
    ASSERT_EQ(marginal.size(), static_cast<size_t>(gamma));
    ASSERT_EQ(conditional.size(), static_cast<size_t>(gamma));
    int64_t verifications = 0;
    for (const int32_t d : drafted) verifications += d > 0;
    for (int64_t i = 0; i < gamma; ++i) {
      int64_t beyond = 0, reached = 0;
      for (size_t s = 0; s < accepted.size(); ++s) {
        beyond += accepted[s] > i;
        reached += accepted[s] >= i && drafted[s] > i;
      }
      EXPECT_DOUBLE_EQ(marginal[i], static_cast<double>(beyond) / verifications) << i;
      if (reached > 0) {
        EXPECT_DOUBLE_EQ(conditional[i], static_cast<double>(beyond) / reached) << i;
      }
    }
    EXPECT_DOUBLE_EQ(marginal[0], conditional[0]);
  }
}

// Every root attribute of a run file is in the tables `speclab schema` prints (run_attributes(),
// summary_metrics()), and every entry of those tables is written.
TEST(Results, EveryRootAttributeIsInTheSchemaTables) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  const std::vector<std::string> names =
      Hdf5Reader(point_path(dir / "out", sweep.points[0])).attribute_names();
  std::vector<std::string> table;
  for (const AttributeSpec& a : run_attributes()) table.emplace_back(a.name);
  for (const MetricSpec& m : summary_metrics()) table.emplace_back(m.name);
  for (const std::string& name : names) {
    const std::string entry = name.starts_with("param.")   ? "param.KEY"
                              : name.starts_with("units.") ? "units.METRIC"
                                                           : name;
    EXPECT_NE(std::find(table.begin(), table.end(), entry), table.end())
        << name << " is written but not in the schema tables";
  }
  for (const std::string& entry : table) {
    const bool written =
        entry == "param.KEY" || entry == "units.METRIC"
            ? std::any_of(names.begin(), names.end(),
                          [&](const std::string& n) { return n.starts_with(entry.substr(0, 6)); })
            : std::find(names.begin(), names.end(), entry) != names.end();
    EXPECT_TRUE(written) << entry << " is in the schema tables but never written";
  }
}

// Every dataset of a run file says what it holds and in which units, and the table that says so
// lists nothing a file never holds.
TEST(Results, EveryDatasetCarriesItsUnitsAndDescription) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  const fs::path path = point_path(dir / "out", sweep.points[0]);
  const std::vector<std::string> names = Hdf5Reader(path).dataset_names();
  ASSERT_GE(names.size(), 30u);
  for (const std::string& name : names) {
    EXPECT_FALSE(dataset_attribute(path, name, "units").empty()) << name;
    EXPECT_FALSE(dataset_attribute(path, name, "description").empty()) << name;
  }
  for (const DatasetSpec& spec : run_datasets()) {
    EXPECT_NE(std::find(names.begin(), names.end(), std::string(spec.name)), names.end())
        << spec.name << " is described but never written";
  }
  EXPECT_EQ(dataset_attribute(path, "batches/seconds", "units"), "s");
}

TEST(Results, SameConfigAndSeedGiveIdenticalDatasetsWhateverTheJobs) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "a");
  RunOptions parallel;
  parallel.jobs = 3;
  run_quietly(sweep, dir / "b", parallel);
  ASSERT_EQ(files_in(dir / "a"), files_in(dir / "b"));
  for (const SweepPoint& p : sweep.points) {
    const Hdf5Reader a(point_path(dir / "a", p)), b(point_path(dir / "b", p));
    ASSERT_EQ(a.dataset_names(), b.dataset_names());
    for (const std::string& name : a.dataset_names()) {
      if (name.ends_with("seconds")) continue;               // time-valued
      if (a.dataset_info(name).dtype == "uint64") continue;  // batches/seed, compared below
      if (a.dataset_info(name).dtype.starts_with("float")) {
        EXPECT_EQ(a.read<double>(name).values, b.read<double>(name).values) << p.id << " " << name;
      } else {
        EXPECT_EQ(a.read<int64_t>(name).values, b.read<int64_t>(name).values)
            << p.id << " " << name;
      }
    }
    ASSERT_EQ(a.attribute_names(), b.attribute_names());
    for (const std::string& name : a.attribute_names()) {
      if (is_time_valued(name)) continue;
      switch (a.attribute_kind(name)) {
        case Hdf5AttributeKind::kString:
          EXPECT_EQ(a.read_string_attribute(name), b.read_string_attribute(name)) << name;
          break;
        case Hdf5AttributeKind::kFloat: {
          const double x = a.read_attribute<double>(name), y = b.read_attribute<double>(name);
          EXPECT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << name;
          break;
        }
        default:
          EXPECT_EQ(a.read_attribute<uint64_t>(name), b.read_attribute<uint64_t>(name)) << name;
      }
    }
  }
}

TEST(Results, SummaryHasOneRowPerPointWithSweptParametersAndMetrics) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  const RunReport report = run_quietly(sweep, dir / "out");
  ASSERT_EQ(report.summary, dir / "out" / "summary.csv");
  const auto lines = lines_of(read_text(report.summary));
  ASSERT_EQ(lines.size(), 5u);
  const auto header = cells_of(lines[0]);
  const auto column = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return static_cast<size_t>(it - header.begin());
  };
  for (size_t r = 1; r < lines.size(); ++r) {
    const auto cells = cells_of(lines[r]);
    ASSERT_EQ(cells.size(), header.size()) << lines[r];
    const SweepPoint& p = sweep.points[r - 1];
    EXPECT_EQ(cells[column("id")], p.id);
    EXPECT_EQ(cells[column("index")], std::to_string(p.index));
    EXPECT_EQ(cells[column("decode.gamma")], std::to_string(p.settings.decode.gamma));
    EXPECT_EQ(cells[column("target.model")], "lsm-tiny-target");
    EXPECT_EQ(cells[column("file")], p.id + ".h5");
    for (const char* metric : {"mean_accepted", "emitted_per_step", "acceptance_rate",
                               "alpha_sum_min", "tokens_per_second", "speedup"}) {
      EXPECT_FALSE(cells[column(metric)].empty()) << metric;
    }
  }
}

// Each point with a baseline records the planner's finite-run speedup (predict_run) for its batch
// size, γ and max_new_tokens at its own measured acceptance rate, priced with its own timings: the
// baseline's decode time per plain step and, per verification call, the draft's and the target's
// seconds and the decode time outside both. A plain run has none. The plain steps are derived
// here, not read: a plain run without EOS makes max_new_tokens target calls per batch.
TEST(Results, SpeedupIsRecordedBesideThePlannersPrediction) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  for (const SweepPoint& p : sweep.points) {
    ASSERT_TRUE(p.settings.baseline);
    const Hdf5Reader file(point_path(dir / "out", p));
    const auto& d = p.settings.decode;
    const double alpha = file.read_attribute<double>("acceptance_rate");
    const double rounds = static_cast<double>(file.read_attribute<int64_t>("target_calls"));
    const double target = file.read_attribute<double>("target_seconds");
    const double draft = file.read_attribute<double>("draft_seconds");
    const double decode = file.read_attribute<double>("decode_seconds");
    const double plain_steps = static_cast<double>(p.settings.batches() * d.max_new_tokens);
    const MeasuredRoundCosts costs(
        {{.batch = p.settings.batch_size,
          .plain_step = file.read_attribute<double>("baseline_decode_seconds") / plain_steps,
          .rounds = {{.gamma = d.gamma,
                      .drafting = draft / rounds,
                      .verify_pass = target / rounds,
                      .overhead = std::max(0.0, decode - target - draft) / rounds}}}});
    const double expected =
        predict_run(costs, alpha, p.settings.batch_size, d.gamma, d.max_new_tokens).speedup;
    EXPECT_GT(expected, 0.0);
    EXPECT_NEAR(file.read_attribute<double>("predicted_speedup"), expected, 1e-9 * expected)
        << p.id;
  }
}

// The rates of a point are decode rates: a batch whose prompt pass took 10 s and its decoding 1 s
// beside a baseline of 10 s + 2 s has speedup (4 / 1) / (4 / 2) = 2, and end to end
// (4 / 11) / (4 / 12) = 12/11. Timing the prompt pass as decoding would give 12/11 for both.
// identical_to_plain is the fraction of requests whose tokens equal the baseline's: one of two
// requests differing gives 1/2, which the summary table prints as "no".
TEST(Results, IdenticalToPlainCountsRequestsWithTheBaselinesTokens) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  const SweepPoint& point = sweep.points[0];
  ASSERT_TRUE(point.settings.baseline);
  const auto result = [](std::vector<std::vector<int32_t>> tokens) {
    DecodeResult r;
    r.tokens = std::move(tokens);
    DecodeMetrics& m = r.metrics;
    m.requests = 2;
    m.steps = 2;
    m.tokens = 4;
    m.step_accepted = {0, 0};
    m.step_emitted = {2, 2};
    m.step_drafted = {1, 1};
    m.decode_seconds = 1.0;
    m.request_prefill_seconds = {0.5, 0.5};
    m.request_decode_seconds = {1.0, 1.0};
    return r;
  };
  fs::create_directories(dir / "out");
  const fs::path path = point_path(dir / "out", point);
  {
    PointWriter writer(path, point, 1);
    const std::vector<std::vector<int32_t>> prompts = {{5}, {6}};
    const DecodeResult run = result({{1, 2}, {3, 4}});
    writer.add_batch(0, 1, prompts, run);
    writer.add_baseline_batch(result({{1, 2}, {3, 5}}), run);
    writer.commit();
  }
  EXPECT_DOUBLE_EQ(Hdf5Reader(path).read_attribute<double>("identical_to_plain"), 0.5);
}

// The summary table says whether a point emitted plain decoding's tokens: yes (all requests), no,
// or "-" without a baseline; a column that would be all dashes is left out.
TEST(Results, SummaryTableSaysWhetherTokensAreIdenticalToPlain) {
  const fs::path dir = fresh_test_dir();
  const fs::path csv = dir / "summary.csv";
  {
    std::ofstream out(csv);
    out << "decode.gamma,acceptance_rate,identical_to_plain\n2,0.8,1\n4,0.7,0.5\n6,0.6,nan\n";
  }
  const std::string table = format_summary_table(csv, {"decode.gamma"});
  EXPECT_THAT(table, HasSubstr("identical to plain"));
  EXPECT_THAT(table, ContainsRegex("2 +0.800 .* yes"));
  EXPECT_THAT(table, ContainsRegex("4 +0.700 .* no"));
  {
    std::ofstream out(csv);
    out << "decode.gamma,acceptance_rate,identical_to_plain\n2,0.8,nan\n";
  }
  EXPECT_THAT(format_summary_table(csv, {"decode.gamma"}), Not(HasSubstr("identical")));
}

TEST(Results, SpeedupIsOnDecodeTimeAndEndToEndIncludesThePromptPass) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  const SweepPoint& point = sweep.points[0];
  ASSERT_TRUE(point.settings.baseline);
  const auto metrics = [](double prefill, double decode) {
    DecodeResult r;
    r.tokens = {{1, 2, 3, 4}};
    DecodeMetrics& m = r.metrics;
    m.requests = 1;
    m.steps = 2;
    m.tokens = 4;
    m.step_accepted = {1, 1};
    m.step_emitted = {2, 2};
    m.step_drafted = {1, 1};
    m.prompt_tokens = 3;
    m.decode_seconds = decode;
    m.request_prefill_seconds = {prefill};
    m.request_decode_seconds = {decode};
    return r;
  };
  fs::create_directories(dir / "out");
  const fs::path path = point_path(dir / "out", point);
  {
    PointWriter writer(path, point, 1);
    const std::vector<std::vector<int32_t>> prompts = {{5, 6, 7}};
    writer.add_batch(0, 1, prompts, metrics(10.0, 1.0));
    writer.add_baseline_batch(metrics(10.0, 2.0), metrics(10.0, 1.0));
    writer.commit();
  }
  const Hdf5Reader file(path);
  EXPECT_EQ(file.read_attribute<int64_t>("prompt_tokens"), 3);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("prefill_seconds"), 10.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("decode_seconds"), 1.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("seconds"), 11.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("baseline_seconds"), 12.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("tokens_per_second"), 4.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("baseline_tokens_per_second"), 2.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("speedup"), 2.0);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("end_to_end_speedup"), 12.0 / 11.0);
  // The one request's tokens are the baseline's; a token verifier records no match acceptances.
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("identical_to_plain"), 1.0);
  EXPECT_TRUE(std::isnan(file.read_attribute<double>("alpha_coupled")));
  // Every metric carries its units beside it.
  EXPECT_EQ(file.read_string_attribute("units.speedup"), "ratio");
  EXPECT_EQ(file.read_string_attribute("units.tokens_per_second"), "tokens/s");
  EXPECT_EQ(file.read_string_attribute("units.decode_seconds"), "s");
  for (const MetricSpec& m : summary_metrics()) {
    EXPECT_FALSE(file.read_string_attribute(fmt::format("units.{}", m.name)).empty()) << m.name;
  }
  EXPECT_EQ(file.read<double>("sequences/prefill_seconds").values, std::vector<double>{10.0});
  EXPECT_EQ(file.read<double>("sequences/decode_seconds").values, std::vector<double>{1.0});
  EXPECT_EQ(file.read<double>("batches/seconds").values, std::vector<double>{11.0});
  EXPECT_EQ(file.read<double>("baseline/batches/decode_seconds").values, std::vector<double>{2.0});
}

TEST(Results, PlainDecodingRunHasNoCurvesAndNoAcceptance) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir, R"([target]
model = "lsm-tiny-target"
[decode]
max_new_tokens = 5
)");
  run_quietly(sweep, dir / "out");
  const Hdf5Reader file(point_path(dir / "out", sweep.points[0]));
  EXPECT_FALSE(file.has_dataset("position/reached"));
  EXPECT_TRUE(std::isnan(file.read_attribute<double>("acceptance_rate")));
  EXPECT_TRUE(std::isnan(file.read_attribute<double>("mean_accepted")));
  EXPECT_EQ(file.read_attribute<int64_t>("steps"), 5);
  EXPECT_DOUBLE_EQ(file.read_attribute<double>("emitted_per_step"), 1.0);
  EXPECT_TRUE(std::isnan(file.read_attribute<double>("predicted_speedup")));
}

TEST(Results, CorpusPromptsAreDeterministicHeldOutText) {
  RunSettings s;
  s.decode.seed = 3;
  s.sequences = 3;
  s.prompt_length = 20;
  s.prompt_source = PromptSource::kCorpus;
  const auto prompts = make_prompts(s, 256);
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts, make_prompts(s, 256));
  EXPECT_NE(prompts[0], prompts[1]);
  for (const auto& p : prompts) EXPECT_EQ(p.size(), 20u);
  s.prompt_source = PromptSource::kRandom;
  for (const auto& p : make_prompts(s, 16)) {
    for (const int32_t t : p) EXPECT_TRUE(t >= 0 && t < 16);
  }
}

TEST(Results, CsvQuotesCellsThatNeedIt) {
  const fs::path dir = fresh_test_dir();
  const std::vector<SummaryRow> rows = {{{"a", "1"}, {"b", "x,y"}}, {{"a", "say \"hi\""}}};
  write_summary_csv(dir / "s.csv", rows);
  EXPECT_EQ(read_text(dir / "s.csv"), "a,b\n1,\"x,y\"\n\"say \"\"hi\"\"\",\n");
}

TEST(Results, AtomicWritesReplaceWholeFilesAndLeaveNoPartial) {
  const fs::path dir = fresh_test_dir();
  write_file_atomically(dir / "f.txt", "old");
  write_file_atomically(dir / "f.txt", "new");
  EXPECT_EQ(read_text(dir / "f.txt"), "new");
  EXPECT_FALSE(fs::exists(dir / "f.txt.partial"));
  EXPECT_THROW(write_file_atomically(dir / "missing" / "f.txt", "x"), IoError);
  copy_file_atomically(dir / "f.txt", dir / "g.txt");
  EXPECT_EQ(read_text(dir / "g.txt"), "new");
}

TEST(Results, ReadResultIdRejectsFilesThatAreNotResults) {
  const fs::path dir = fresh_test_dir();
  write_text(dir / "text.h5", "not hdf5");
  EXPECT_THAT(invalid_input_message([&] { read_result_id(dir / "text.h5"); }),
              HasSubstr("not an HDF5 file"));
  {
    Hdf5Writer other(dir / "other.h5");
    other.write_attribute("schema", "speclab.demo");
    other.commit();
  }
  EXPECT_THAT(invalid_input_message([&] { read_result_id(dir / "other.h5"); }),
              HasSubstr("not a speclab result file (root attribute 'schema' is \"speclab.demo\""));
}

TEST(Results, ExistingResultsWithoutResumeAreRefused) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  const std::string message = invalid_input_message([&] { run_quietly(sweep, dir / "out"); });
  EXPECT_THAT(message, HasSubstr("already holds results of this sweep"));
  EXPECT_THAT(message, HasSubstr("pass --resume"));
}

TEST(Results, ResumeRunsOnlyMissingPointsAndRemovesStalePartials) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  const fs::path kept = point_path(dir / "out", sweep.points[0]);
  const std::string kept_bytes = read_text(kept);
  fs::remove(point_path(dir / "out", sweep.points[1]));
  write_text(point_path(dir / "out", sweep.points[2]).string() + ".partial", "half a file");
  fs::remove(point_path(dir / "out", sweep.points[2]));
  RunOptions resume;
  resume.resume = true;
  const RunReport report = run_quietly(sweep, dir / "out", resume);
  EXPECT_EQ(report.ran, 2);
  EXPECT_EQ(report.skipped, 2);
  EXPECT_EQ(report.removed_partials, 1);
  EXPECT_FALSE(report.interrupted);
  EXPECT_EQ(read_text(kept), kept_bytes);  // finished points are not rewritten
  for (const SweepPoint& p : sweep.points) {
    EXPECT_EQ(read_result_id(point_path(dir / "out", p)), p.id);
    EXPECT_FALSE(fs::exists(point_path(dir / "out", p).string() + ".partial"));
  }
  EXPECT_EQ(lines_of(read_text(dir / "out" / "summary.csv")).size(), 5u);
}

TEST(Results, ResumeRefusesACorruptFileUnderAFinalName) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  run_quietly(sweep, dir / "out");
  write_text(point_path(dir / "out", sweep.points[1]), "garbage");
  RunOptions resume;
  resume.resume = true;
  const std::string message =
      invalid_input_message([&] { run_quietly(sweep, dir / "out", resume); });
  EXPECT_THAT(message, HasSubstr(sweep.points[1].id + ".h5: not an HDF5 file"));
  EXPECT_THAT(message, HasSubstr("delete it to run its point again"));
}

TEST(Results, StopFlagEndsTheRunWithoutHalfFiles) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  std::atomic<bool> stop{true};
  RunOptions options;
  options.stop = &stop;
  const RunReport report = run_quietly(sweep, dir / "out", options);
  EXPECT_TRUE(report.interrupted);
  EXPECT_EQ(report.ran, 0);
  EXPECT_TRUE(files_in(dir / "out").empty());
}

TEST(Results, UnwritableOutputDirectoryIsInvalidInput) {
  const fs::path dir = fresh_test_dir();
  write_text(dir / "file", "x");
  const Sweep sweep = tiny_sweep(dir);
  EXPECT_THAT(invalid_input_message([&] { run_quietly(sweep, dir / "file" / "out"); }),
              HasSubstr("cannot create the results directory"));
}

TEST(Results, MergeCombinesShardsIntoOneSummary) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir);
  for (int i = 1; i <= 2; ++i) {
    RunOptions options;
    options.shard = parse_shard(fmt::format("{}/2", i));
    const RunReport report = run_quietly(sweep, dir / fmt::format("s{}", i), options);
    EXPECT_EQ(report.ran, 2);
    EXPECT_EQ(report.summary.filename(), fmt::format("summary.shard-{}-of-2.csv", i));
  }
  const std::vector<fs::path> inputs = {dir / "s1", dir / "s2"};
  const MergeReport merged = merge_results(inputs, dir / "all");
  EXPECT_EQ(merged.files, 4);
  EXPECT_EQ(merged.copied, 4);
  const auto lines = lines_of(read_text(dir / "all" / "summary.csv"));
  ASSERT_EQ(lines.size(), 5u);
  for (size_t r = 1; r < lines.size(); ++r) {
    EXPECT_EQ(cells_of(lines[r])[0], sweep.points[r - 1].id);  // sweep order
  }
  // Merging into one of the inputs copies only what is missing there.
  const MergeReport again = merge_results(inputs, dir / "s1");
  EXPECT_EQ(again.copied, 2);
  EXPECT_EQ(again.files, 4);
}

TEST(Results, MergeReportsEveryBadInputAndWritesNothing) {
  const fs::path dir = fresh_test_dir();
  fs::create_directories(dir / "in");
  write_text(dir / "in" / "bad.h5", "garbage");
  const std::vector<fs::path> inputs = {dir / "in", dir / "missing"};
  const std::string message = invalid_input_message([&] { merge_results(inputs, dir / "out"); });
  EXPECT_THAT(message, HasSubstr("2 problems; nothing was written"));
  EXPECT_THAT(message, HasSubstr("bad.h5: not an HDF5 file"));
  EXPECT_THAT(message, HasSubstr("missing: no such directory"));
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(Results, TreeVerifierPointRecordsCurvesOverTheTreeDepth) {
  const fs::path dir = fresh_test_dir();
  const Sweep sweep = tiny_sweep(dir, R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
[verifier]
method = "tree-iid"
[decode]
branches = [2, 2]
batch_size = 2
sequences = 2
max_new_tokens = 12
)");
  run_quietly(sweep, dir / "out");
  const Hdf5Reader file(point_path(dir / "out", sweep.points[0]));
  EXPECT_EQ(file.dataset_shape("accepted_length_histogram"), std::vector<int64_t>{3});
  EXPECT_EQ(file.dataset_shape("position/reached"), std::vector<int64_t>{2});
  EXPECT_EQ(file.read_attribute<int64_t>("tokens"), 24);
}

}  // namespace
}  // namespace speclab::experiments
