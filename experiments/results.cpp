// Result files and the summary table (see results.hpp; the schema is in docs/hdf5.md).
#include "experiments/results.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>

#include "core/base/error.hpp"
#include "core/io/atomic_file.hpp"
#include "core/io/hdf5_file.hpp"
#include "core/probe/machine.hpp"
#include "core/stats/stats.hpp"
#include "experiments/build_info.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;
namespace {

using Kind = MetricSpec::Kind;

constexpr MetricSpec kMetrics[] = {
    {"sequences", Kind::kInteger, false, "requests", "requests decoded"},
    {"tokens", Kind::kInteger, false, "tokens", "tokens generated over all requests"},
    {"prompt_tokens", Kind::kInteger, false, "tokens", "prompt tokens over all requests"},
    {"steps", Kind::kInteger, false, "steps",
     "per-request steps: verifications (speculative) or tokens (plain)"},
    {"accepted", Kind::kInteger, false, "tokens",
     "accepted draft tokens over all steps, bonus not counted"},
    {"mean_accepted", Kind::kNumber, false, "tokens/step",
     "accepted draft tokens per step, bonus not counted"},
    {"emitted_per_step", Kind::kNumber, false, "tokens/step",
     "tokens appended per step: accepted + 1 (the residual or bonus token), cut at EOS"},
    {"acceptance_rate", Kind::kNumber, false, "probability", "accepted / tested draft positions"},
    {"acceptance_rate_lower95", Kind::kNumber, false, "probability",
     "95% Wilson interval of acceptance_rate"},
    {"acceptance_rate_upper95", Kind::kNumber, false, "probability",
     "95% Wilson interval of acceptance_rate"},
    {"alpha_estimate", Kind::kNumber, false, "probability",
     "alpha_sum_min / tested_positions: the mean of sum_x min(p, q) (docs/verifiers.md)"},
    {"alpha_sum_min", Kind::kNumber, false, "positions",
     "sum over tested positions of sum_x min(p, q)"},
    {"alpha_coupled", Kind::kNumber, false, "probability",
     "mean over tested positions of coupled's exact acceptance probability sum_y 1 / sum_u "
     "max(p_u/p_y, q_u/q_y); runs of coupled and sampled-match, NaN otherwise"},
    {"alpha_coupled_bound", Kind::kNumber, false, "probability",
     "mean over tested positions of coupled's lower bound (1 - TV)/(1 + TV); as alpha_coupled"},
    {"alpha_sampled_match", Kind::kNumber, false, "probability",
     "mean over tested positions of sampled-match's acceptance probability sum_x p(x) q(x); as "
     "alpha_coupled"},
    {"identical_to_plain", Kind::kNumber, false, "fraction",
     "requests whose tokens equal the plain-decoding baseline's, of all requests (1 for "
     "coupled and sampled-match by construction); points with a baseline, NaN otherwise"},
    {"tested_positions", Kind::kInteger, false, "positions", "draft positions the verifier tested"},
    {"accepted_positions", Kind::kInteger, false, "positions",
     "tested positions accepted (before any EOS cut)"},
    {"residual_fallbacks", Kind::kInteger, false, "steps",
     "rejections whose residual had zero mass (token drawn from p)"},
    {"accepted_bytes", Kind::kInteger, false, "bytes",
     "bytes of the accepted draft tokens; runs with a draft of another vocabulary (tli, slem, "
     "slrs), 0 otherwise"},
    {"accepted_bytes_per_step", Kind::kNumber, false, "bytes/step",
     "accepted_bytes / steps: the text a step's accepted proposals add"},
    {"target_calls", Kind::kInteger, false, "calls", "target score() calls"},
    {"target_positions", Kind::kInteger, false, "rows", "distribution rows the target produced"},
    {"draft_calls", Kind::kInteger, false, "calls", "draft score() calls"},
    {"draft_positions", Kind::kInteger, false, "rows", "distribution rows the draft produced"},
    {"prefill_seconds", Kind::kNumber, true, "s",
     "the prompt pass (every model's prefill of every prompt), summed over batches"},
    {"decode_seconds", Kind::kNumber, true, "s",
     "wall time of decoding after the prompt pass, summed over batches"},
    {"seconds", Kind::kNumber, true, "s", "prefill_seconds + decode_seconds"},
    {"target_seconds", Kind::kNumber, true, "s", "time inside the target's score() while decoding"},
    {"draft_seconds", Kind::kNumber, true, "s", "time inside the draft's score() while decoding"},
    {"verify_seconds", Kind::kNumber, true, "s", "time inside verify_chain"},
    {"tokens_per_second", Kind::kNumber, true, "tokens/s", "tokens / decode_seconds"},
    {"baseline_prefill_seconds", Kind::kNumber, true, "s",
     "the plain-decoding baseline's prompt pass"},
    {"baseline_decode_seconds", Kind::kNumber, true, "s",
     "wall time of the baseline's decoding after its prompt pass"},
    {"baseline_seconds", Kind::kNumber, true, "s",
     "baseline_prefill_seconds + baseline_decode_seconds"},
    {"baseline_tokens_per_second", Kind::kNumber, true, "tokens/s",
     "the baseline's tokens / baseline_decode_seconds"},
    {"speedup", Kind::kNumber, true, "ratio",
     "tokens_per_second / baseline_tokens_per_second: decode rates, the prompt pass left out"},
    {"end_to_end_speedup", Kind::kNumber, true, "ratio",
     "(tokens / seconds) / (the baseline's tokens / baseline_seconds): the prompt pass included"},
    {"predicted_speedup", Kind::kNumber, true, "ratio",
     "the planner's speedup (predict_run) for runs of max_new_tokens per request at this batch "
     "size and gamma (the rounds of a batch's slowest request), from the point's measured "
     "acceptance_rate and its own timings: plain step, drafting, verification call and the "
     "time outside the calls per round; points with a baseline and a chain verifier, NaN "
     "otherwise"},
    {"started", Kind::kText, true, "UTC ISO-8601", "UTC ISO-8601 time the point started"},
    {"finished", Kind::kText, true, "UTC ISO-8601", "UTC ISO-8601 time the point finished"},
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

constexpr DatasetSpec kDatasets[] = {
    {"steps/accepted", "tokens", "accepted draft tokens of each request-step, bonus not counted"},
    {"steps/emitted", "tokens", "tokens appended by the request-step: accepted + 1, cut at EOS"},
    {"steps/drafted", "tokens", "draft tokens the request-step proposed (fewer near the end)"},
    {"steps/batch", "index",
     "the batch the request-step belongs to; within a batch in (step, request) order"},
    {"steps/request", "index",
     "the request of the request-step: its row in sequences/length (the point's requests in "
     "order); a request's steps in file order are its trajectory"},
    {"sequences/prompt_tokens", "token id", "every request's prompt, concatenated"},
    {"sequences/prompt_length", "tokens", "each request's prompt length, to split prompt_tokens"},
    {"sequences/tokens", "token id", "every request's generated tokens, concatenated"},
    {"sequences/length", "tokens", "each request's generated length, to split tokens"},
    {"batches/seed", "seed", "the Philox seed the batch decoded with"},
    {"batches/requests", "requests", "requests decoded in the batch"},
    {"batches/steps", "steps", "per-request steps of the batch"},
    {"batches/tokens", "tokens", "tokens the batch generated"},
    {"batches/accepted", "tokens", "accepted draft tokens in the batch, bonus not counted"},
    {"batches/tested_positions", "positions", "draft positions the verifier tested"},
    {"batches/accepted_positions", "positions", "tested positions accepted (before any EOS cut)"},
    {"batches/target_calls", "calls", "target score() calls"},
    {"batches/draft_calls", "calls", "draft score() calls"},
    {"batches/alpha_sum_min", "probability", "sum over tested positions of sum_x min(p(x), q(x))"},
    {"sequences/prefill_seconds", "s", "each request's prompt pass"},
    {"sequences/decode_seconds", "s",
     "each request's decoding until its last token (the device loop: the batch's decoding)"},
    {"batches/prefill_seconds", "s", "the batch's prompt pass"},
    {"batches/decode_seconds", "s", "wall time of the batch's decoding after its prompt pass"},
    {"batches/seconds", "s", "prefill_seconds + decode_seconds of the batch"},
    {"batches/target_seconds", "s", "time inside the target's score() while decoding"},
    {"batches/draft_seconds", "s", "time inside the draft's score() while decoding"},
    {"batches/verify_seconds", "s", "time inside the verifier"},
    {"baseline/sequences/tokens", "token id", "plain decoding's generated tokens, concatenated"},
    {"baseline/sequences/length", "tokens", "plain decoding's generated length per request"},
    {"baseline/batches/tokens", "tokens", "tokens plain decoding generated per batch"},
    {"baseline/batches/prefill_seconds", "s", "plain decoding's prompt pass per batch"},
    {"baseline/batches/decode_seconds", "s", "plain decoding's decoding time per batch"},
    {"baseline/batches/seconds", "s", "plain decoding's prefill + decode seconds per batch"},
    {"position/reached", "steps",
     "steps whose draft position i (0-based; tree verifiers: depth) was tested"},
    {"position/accepted", "steps", "of those, steps that accepted position i"},
    {"position/offered", "steps", "steps that drafted at least i + 1 tokens"},
    {"position/acceptance_conditional", "probability",
     "P(position i accepted | position i reached): accepted / reached (NaN where never reached)"},
    {"position/acceptance_conditional_lower95", "probability",
     "lower end of the 95% Wilson interval of acceptance_conditional"},
    {"position/acceptance_conditional_upper95", "probability",
     "upper end of the 95% Wilson interval of acceptance_conditional"},
    {"position/acceptance_marginal", "probability",
     "P(position i accepted) per verification step: accepted / reached at position 0"},
    {"position/acceptance_marginal_lower95", "probability",
     "lower end of the 95% Wilson interval of acceptance_marginal"},
    {"position/acceptance_marginal_upper95", "probability",
     "upper end of the 95% Wilson interval of acceptance_marginal"},
    {"accepted_length_histogram", "steps", "steps by accepted count 0..gamma"},
};

constexpr AttributeSpec kAttributes[] = {
    {"schema", "\"speclab.run\""},
    {"schema_version", "the version of this schema the file follows"},
    {"id", "the sweep point's id: the file's stem"},
    {"index", "the point's index in its sweep, 0-based"},
    {"n_points", "points in the sweep the file belongs to"},
    {"name", "the sweep's name"},
    {"config_toml", "the point's resolved config, every key, as TOML"},
    {"seed", "decode.seed"},
    {"swept_keys", "the swept keys, comma-separated"},
    {"param.KEY", "the value of each swept key KEY"},
    {"units.METRIC", "the units of each summary metric METRIC (e.g. units.speedup = \"ratio\")"},
    {"git_commit", "the commit the binary was built from"},
    {"host", "the machine's host name"},
    {"hdf5_version", "the HDF5 library's version"},
    {"speclab_version", "speclab's version"},
    {"library_versions", "the versions of the libraries speclab was built with"},
    {"cpu_model", "the CPU the run measured on"},
    {"build_isa", "the instruction set the binary was compiled for"},
    {"cpu_isa", "the instruction sets the CPU offers"},
    {"threads", "OpenMP threads"},
    {"omp_wait_policy", "OMP_WAIT_POLICY during the run"},
};

// The units and description of a run file's dataset (kDatasets), written on the dataset.
void describe(Hdf5Writer& file, std::string_view name) {
  for (const DatasetSpec& d : kDatasets) {
    if (d.name == name) return file.describe(name, d.units, d.description);
  }
  throw Error(fmt::format("dataset '{}' has no entry in the run file's dataset table", name));
}

double ratio(double a, double b) { return b > 0 ? a / b : kNaN; }

// Writes `total` int64 entries named `name` from a vector (the fixed-size curves).
void write_int64(Hdf5Writer& file, std::string_view name, const std::vector<int64_t>& values) {
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  file.write(name, std::span<const int64_t>(values), shape);
  describe(file, name);
}

void write_double(Hdf5Writer& file, std::string_view name, const std::vector<double>& values) {
  const int64_t shape[] = {static_cast<int64_t>(values.size())};
  file.write(name, std::span<const double>(values), shape);
  describe(file, name);
}

std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

const RunMetadata& run_metadata() {
  static const RunMetadata metadata = [] {
    RunMetadata m;
    m.git_commit = build_info().git_commit;
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
    m.host = host;
    unsigned major = 0, minor = 0, release = 0;
    H5get_libversion(&major, &minor, &release);
    m.hdf5_version = fmt::format("{}.{}.{}", major, minor, release);
    m.speclab_version = build_info().version;
    m.library_versions = fmt::format(
        "hdf5 {}; toml++ {}.{}.{}; fmt {}.{}.{}", m.hdf5_version, TOML_LIB_MAJOR, TOML_LIB_MINOR,
        TOML_LIB_PATCH, FMT_VERSION / 10000, FMT_VERSION / 100 % 100, FMT_VERSION % 100);
    return m;
  }();
  return metadata;
}

void write_machine_attributes(Hdf5Writer& file) {
  const MachineIdentity& m = machine_identity();
  file.write_attribute("cpu_model", m.cpu_model);
  file.write_attribute("build_isa", m.build_isa);
  file.write_attribute("cpu_isa", m.cpu_isa);
  file.write_attribute<int64_t>("threads", m.threads);
  file.write_attribute("omp_wait_policy", m.omp_wait_policy);
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

std::span<const MetricSpec> summary_metrics() { return kMetrics; }

std::span<const DatasetSpec> run_datasets() { return kDatasets; }

std::span<const AttributeSpec> run_attributes() { return kAttributes; }

std::vector<int32_t> step_requests(const DecodeResult& result, int64_t first_request) {
  const std::vector<int32_t>& emitted = result.metrics.step_emitted;
  std::vector<int64_t> left;
  for (const auto& tokens : result.tokens) left.push_back(static_cast<int64_t>(tokens.size()));
  std::vector<int32_t> requests;
  requests.reserve(emitted.size());
  size_t row = 0;
  while (row < emitted.size()) {
    bool running = false;
    for (size_t b = 0; b < left.size() && row < emitted.size(); ++b) {
      if (left[b] <= 0) continue;
      running = true;
      requests.push_back(static_cast<int32_t>(first_request + static_cast<int64_t>(b)));
      left[b] -= emitted[row++];
    }
    if (!running) break;
  }
  if (row != emitted.size() ||
      std::any_of(left.begin(), left.end(), [](int64_t n) { return n != 0; })) {
    throw Error(fmt::format(
        "the step log of a batch ({} request-steps) does not match its {} requests' lengths",
        emitted.size(), left.size()));
  }
  return requests;
}

void PointTotals::add(const DecodeMetrics& m) {
  sequences += m.requests;
  steps += m.steps;
  tokens += m.tokens;
  prompt_tokens += m.prompt_tokens;
  for (const int32_t a : m.step_accepted) accepted += a;
  const auto add_vector = [](std::vector<int64_t>& into, const std::vector<int64_t>& from) {
    if (into.size() < from.size()) into.resize(from.size(), 0);
    for (size_t i = 0; i < from.size(); ++i) into[i] += from[i];
  };
  add_vector(position_reached, m.position_reached);
  add_vector(position_accepted, m.position_accepted);
  add_vector(position_offered, m.position_offered);
  add_vector(histogram, m.accepted_length_histogram);
  residual_fallbacks += m.residual_fallbacks;
  tested_positions += m.tested_positions;
  accepted_positions += m.accepted_positions;
  accepted_bytes += m.accepted_bytes;
  alpha_sum_min += m.alpha_sum_min;
  coupled_sum += m.coupled_sum;
  coupled_bound_sum += m.coupled_bound_sum;
  sampled_match_sum += m.sampled_match_sum;
  for (auto [into, from] : {std::pair{&target, &m.target}, std::pair{&draft, &m.draft}}) {
    into->calls += from->calls;
    into->sequences += from->sequences;
    into->positions += from->positions;
    into->seconds += from->seconds;
  }
  verify_seconds += m.verify_seconds;
  prefill_seconds += m.prefill_seconds();
  decode_seconds += m.decode_seconds;
}

void PointTotals::add_baseline(const DecodeMetrics& m) {
  baseline_tokens += m.tokens;
  baseline_prefill_seconds += m.prefill_seconds();
  baseline_decode_seconds += m.decode_seconds;
  baseline_target.calls += m.target.calls;
  baseline_target.sequences += m.target.sequences;
  baseline_target.positions += m.target.positions;
  baseline_target.seconds += m.target.seconds;
}

PointWriter::PointWriter(const fs::path& path, const SweepPoint& point, int64_t n_points)
    : point_(point), file_(std::make_unique<Hdf5Writer>(path)) {
  Hdf5Writer& f = *file_;
  f.write_attribute("started", utc_now());
  f.write_attribute<int64_t>("n_points", n_points);
  for (std::string_view name :
       {"steps/accepted", "steps/emitted", "steps/drafted", "steps/batch", "steps/request",
        "sequences/prompt_tokens", "sequences/prompt_length", "sequences/tokens",
        "sequences/length"}) {
    f.create_extendable<int32_t>(name, 16384);
    describe(f, name);
  }
  f.create_extendable<uint64_t>("batches/seed", 1024);
  describe(f, "batches/seed");
  for (std::string_view name :
       {"batches/requests", "batches/steps", "batches/tokens", "batches/accepted",
        "batches/tested_positions", "batches/accepted_positions", "batches/target_calls",
        "batches/draft_calls"}) {
    f.create_extendable<int64_t>(name, 1024);
    describe(f, name);
  }
  for (std::string_view name :
       {"sequences/prefill_seconds", "sequences/decode_seconds", "batches/alpha_sum_min",
        "batches/prefill_seconds", "batches/decode_seconds", "batches/seconds",
        "batches/target_seconds", "batches/draft_seconds", "batches/verify_seconds"}) {
    f.create_extendable<double>(name, 1024);
    describe(f, name);
  }
  if (point.settings.baseline) {
    f.create_extendable<int32_t>("baseline/sequences/tokens", 16384);
    f.create_extendable<int32_t>("baseline/sequences/length", 16384);
    f.create_extendable<int64_t>("baseline/batches/tokens", 1024);
    for (std::string_view name : {"baseline/batches/prefill_seconds",
                                  "baseline/batches/decode_seconds", "baseline/batches/seconds"}) {
      f.create_extendable<double>(name, 1024);
    }
    for (std::string_view name : {"baseline/sequences/tokens", "baseline/sequences/length",
                                  "baseline/batches/tokens", "baseline/batches/prefill_seconds",
                                  "baseline/batches/decode_seconds", "baseline/batches/seconds"}) {
      describe(f, name);
    }
  }
}

PointWriter::~PointWriter() = default;

void PointWriter::add_batch(int64_t batch, uint64_t seed,
                            std::span<const std::vector<int32_t>> prompts,
                            const DecodeResult& result) {
  Hdf5Writer& f = *file_;
  const DecodeMetrics& m = result.metrics;
  totals_.add(m);
  f.append("steps/accepted", std::span<const int32_t>(m.step_accepted));
  f.append("steps/emitted", std::span<const int32_t>(m.step_emitted));
  f.append("steps/drafted", std::span<const int32_t>(m.step_drafted));
  const std::vector<int32_t> step_batch(m.step_accepted.size(), static_cast<int32_t>(batch));
  f.append("steps/batch", std::span<const int32_t>(step_batch));
  const std::vector<int32_t> requests = step_requests(result, totals_.sequences - m.requests);
  f.append("steps/request", std::span<const int32_t>(requests));
  std::vector<int32_t> prompt_tokens, prompt_lengths, tokens, lengths;
  for (const auto& p : prompts) {
    prompt_tokens.insert(prompt_tokens.end(), p.begin(), p.end());
    prompt_lengths.push_back(static_cast<int32_t>(p.size()));
  }
  for (const auto& t : result.tokens) {
    tokens.insert(tokens.end(), t.begin(), t.end());
    lengths.push_back(static_cast<int32_t>(t.size()));
  }
  f.append("sequences/prompt_tokens", std::span<const int32_t>(prompt_tokens));
  f.append("sequences/prompt_length", std::span<const int32_t>(prompt_lengths));
  f.append("sequences/tokens", std::span<const int32_t>(tokens));
  f.append("sequences/length", std::span<const int32_t>(lengths));
  f.append("sequences/prefill_seconds", std::span<const double>(m.request_prefill_seconds));
  f.append("sequences/decode_seconds", std::span<const double>(m.request_decode_seconds));
  int64_t accepted = 0;
  for (const int32_t a : m.step_accepted) accepted += a;
  const uint64_t seeds[] = {seed};
  f.append("batches/seed", std::span<const uint64_t>(seeds));
  const auto one = [&](std::string_view name, auto value) {
    const decltype(value) values[] = {value};
    f.append(name, std::span<const decltype(value)>(values));
  };
  one("batches/requests", m.requests);
  one("batches/steps", m.steps);
  one("batches/tokens", m.tokens);
  one("batches/accepted", accepted);
  one("batches/tested_positions", m.tested_positions);
  one("batches/accepted_positions", m.accepted_positions);
  one("batches/target_calls", m.target.calls);
  one("batches/draft_calls", m.draft.calls);
  one("batches/alpha_sum_min", m.alpha_sum_min);
  one("batches/prefill_seconds", m.prefill_seconds());
  one("batches/decode_seconds", m.decode_seconds);
  one("batches/seconds", m.seconds());
  one("batches/target_seconds", m.target.seconds);
  one("batches/draft_seconds", m.draft.seconds);
  one("batches/verify_seconds", m.verify_seconds);
}

void PointWriter::add_baseline_batch(const DecodeResult& result, const DecodeResult& run) {
  Hdf5Writer& f = *file_;
  totals_.add_baseline(result.metrics);
  for (size_t b = 0; b < result.tokens.size() && b < run.tokens.size(); ++b) {
    totals_.identical_to_plain += result.tokens[b] == run.tokens[b];
  }
  std::vector<int32_t> tokens, lengths;
  for (const auto& t : result.tokens) {
    tokens.insert(tokens.end(), t.begin(), t.end());
    lengths.push_back(static_cast<int32_t>(t.size()));
  }
  f.append("baseline/sequences/tokens", std::span<const int32_t>(tokens));
  f.append("baseline/sequences/length", std::span<const int32_t>(lengths));
  const DecodeMetrics& m = result.metrics;
  const int64_t n[] = {m.tokens};
  f.append("baseline/batches/tokens", std::span<const int64_t>(n));
  for (const auto& [name, value] :
       {std::pair{"baseline/batches/prefill_seconds", m.prefill_seconds()},
        std::pair{"baseline/batches/decode_seconds", m.decode_seconds},
        std::pair{"baseline/batches/seconds", m.seconds()}}) {
    const double values[] = {value};
    f.append(name, std::span<const double>(values));
  }
}

void PointWriter::commit() {
  Hdf5Writer& f = *file_;
  const PointTotals& t = totals_;
  const RunSettings& s = point_.settings;
  if (s.speculative()) {
    write_int64(f, "position/reached", t.position_reached);
    write_int64(f, "position/accepted", t.position_accepted);
    write_int64(f, "position/offered", t.position_offered);
    // Accepted at position i out of `of` trials: the rate and its 95% Wilson interval.
    const auto write_rates = [&](std::string_view name, const std::vector<int64_t>& of) {
      std::vector<double> rate, lower, upper;
      for (size_t i = 0; i < t.position_accepted.size(); ++i) {
        const int64_t n = of[i], a = t.position_accepted[i];
        rate.push_back(ratio(static_cast<double>(a), static_cast<double>(n)));
        const Interval ci = n > 0 ? wilson_interval(a, n, 0.95) : Interval{kNaN, kNaN};
        lower.push_back(ci.lower);
        upper.push_back(ci.upper);
      }
      write_double(f, name, rate);
      write_double(f, std::string(name) + "_lower95", lower);
      write_double(f, std::string(name) + "_upper95", upper);
    };
    write_rates("position/acceptance_conditional", t.position_reached);
    // Every verification step tests position 0: its count is the number of steps.
    const int64_t verifications = t.position_reached.empty() ? 0 : t.position_reached[0];
    write_rates("position/acceptance_marginal",
                std::vector<int64_t>(t.position_accepted.size(), verifications));
    write_int64(f, "accepted_length_histogram", t.histogram);
  }

  const RunMetadata& meta = run_metadata();
  f.write_attribute("schema", kRunSchema);
  f.write_attribute<int64_t>("schema_version", kRunSchemaVersion);
  f.write_attribute("id", point_.id);
  f.write_attribute<int64_t>("index", point_.index);
  f.write_attribute("name", s.name);
  f.write_attribute("config_toml", point_.config_toml);
  f.write_attribute<uint64_t>("seed", s.decode.seed);
  f.write_attribute("git_commit", meta.git_commit);
  f.write_attribute("host", meta.host);
  f.write_attribute("hdf5_version", meta.hdf5_version);
  f.write_attribute("speclab_version", meta.speclab_version);
  f.write_attribute("library_versions", meta.library_versions);
  write_machine_attributes(f);
  std::string swept_keys;
  for (const SweptValue& v : point_.swept) {
    if (!swept_keys.empty()) swept_keys += ',';
    swept_keys += v.key;
    const std::string name = "param." + v.key;
    std::visit(
        [&](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::string>) {
            f.write_attribute(name, value);
          } else if constexpr (std::is_same_v<T, double>) {
            f.write_attribute<double>(name, value);
          } else {
            f.write_attribute<int64_t>(name, static_cast<int64_t>(value));
          }
        },
        v.value);
  }
  f.write_attribute("swept_keys", swept_keys);

  const bool spec = s.speculative();
  const double tokens_per_second = ratio(static_cast<double>(t.tokens), t.decode_seconds);
  const double baseline_tps =
      ratio(static_cast<double>(t.baseline_tokens), t.baseline_decode_seconds);
  const double seconds = t.prefill_seconds + t.decode_seconds;
  const double baseline_seconds = t.baseline_prefill_seconds + t.baseline_decode_seconds;
  const double end_to_end = ratio(ratio(static_cast<double>(t.tokens), seconds),
                                  ratio(static_cast<double>(t.baseline_tokens), baseline_seconds));
  const Interval ci = t.tested_positions > 0
                          ? wilson_interval(t.accepted_positions, t.tested_positions, 0.95)
                          : Interval{kNaN, kNaN};
  f.write_attribute<int64_t>("sequences", t.sequences);
  f.write_attribute<int64_t>("tokens", t.tokens);
  f.write_attribute<int64_t>("prompt_tokens", t.prompt_tokens);
  f.write_attribute<int64_t>("steps", t.steps);
  f.write_attribute<int64_t>("accepted", t.accepted);
  f.write_attribute<double>("mean_accepted",
                            spec ? ratio(static_cast<double>(t.accepted), t.steps) : kNaN);
  f.write_attribute<double>("emitted_per_step", ratio(static_cast<double>(t.tokens), t.steps));
  f.write_attribute<double>("acceptance_rate", ratio(static_cast<double>(t.accepted_positions),
                                                     static_cast<double>(t.tested_positions)));
  f.write_attribute<double>("acceptance_rate_lower95", ci.lower);
  f.write_attribute<double>("acceptance_rate_upper95", ci.upper);
  f.write_attribute<double>("alpha_estimate",
                            ratio(t.alpha_sum_min, static_cast<double>(t.tested_positions)));
  f.write_attribute<double>("alpha_sum_min", t.alpha_sum_min);
  const bool match = family_of(s.decode.verifier) == VerifierFamily::kMatch && spec;
  const auto per_position = [&](double sum) {
    return match ? ratio(sum, static_cast<double>(t.tested_positions)) : kNaN;
  };
  f.write_attribute<double>("alpha_coupled", per_position(t.coupled_sum));
  f.write_attribute<double>("alpha_coupled_bound", per_position(t.coupled_bound_sum));
  f.write_attribute<double>("alpha_sampled_match", per_position(t.sampled_match_sum));
  f.write_attribute<double>("identical_to_plain",
                            s.baseline && spec ? ratio(static_cast<double>(t.identical_to_plain),
                                                       static_cast<double>(t.sequences))
                                               : kNaN);
  f.write_attribute<int64_t>("tested_positions", t.tested_positions);
  f.write_attribute<int64_t>("accepted_positions", t.accepted_positions);
  f.write_attribute<int64_t>("residual_fallbacks", t.residual_fallbacks);
  f.write_attribute<int64_t>("accepted_bytes", t.accepted_bytes);
  f.write_attribute<double>("accepted_bytes_per_step", ratio(static_cast<double>(t.accepted_bytes),
                                                             static_cast<double>(t.steps)));
  f.write_attribute<int64_t>("target_calls", t.target.calls);
  f.write_attribute<int64_t>("target_positions", t.target.positions);
  f.write_attribute<int64_t>("draft_calls", t.draft.calls);
  f.write_attribute<int64_t>("draft_positions", t.draft.positions);
  f.write_attribute<double>("prefill_seconds", t.prefill_seconds);
  f.write_attribute<double>("decode_seconds", t.decode_seconds);
  f.write_attribute<double>("seconds", seconds);
  f.write_attribute<double>("target_seconds", t.target.seconds);
  f.write_attribute<double>("draft_seconds", t.draft.seconds);
  f.write_attribute<double>("verify_seconds", t.verify_seconds);
  f.write_attribute<double>("tokens_per_second", tokens_per_second);
  f.write_attribute<double>("baseline_prefill_seconds",
                            s.baseline ? t.baseline_prefill_seconds : kNaN);
  f.write_attribute<double>("baseline_decode_seconds",
                            s.baseline ? t.baseline_decode_seconds : kNaN);
  f.write_attribute<double>("baseline_seconds", s.baseline ? baseline_seconds : kNaN);
  f.write_attribute<double>("baseline_tokens_per_second", s.baseline ? baseline_tps : kNaN);
  f.write_attribute<double>("speedup", s.baseline ? ratio(tokens_per_second, baseline_tps) : kNaN);
  f.write_attribute<double>("end_to_end_speedup", s.baseline ? end_to_end : kNaN);
  f.write_attribute<double>("predicted_speedup", predicted_speedup_);
  f.write_attribute("finished", utc_now());
  for (const MetricSpec& metric : kMetrics) {
    f.write_attribute(fmt::format("units.{}", metric.name), metric.units);
  }
  f.commit();
}

std::string read_result_id(const fs::path& path) {
  const Hdf5Reader reader(path);
  if (!reader.has_attribute("schema") || reader.read_string_attribute("schema") != kRunSchema) {
    throw InvalidInput(fmt::format(
        "{}: not a speclab result file (root attribute 'schema' is {}; "
        "expected \"{}\")",
        path.string(),
        reader.has_attribute("schema") ? "\"" + reader.read_string_attribute("schema") + "\""
                                       : std::string("missing"),
        kRunSchema));
  }
  const int64_t version = reader.read_attribute<int64_t>("schema_version");
  if (version < 1 || version > kRunSchemaVersion) {
    throw InvalidInput(fmt::format("{}: schema_version is {}; this speclab reads versions 1..{}",
                                   path.string(), version, kRunSchemaVersion));
  }
  return reader.read_string_attribute("id");
}

int64_t read_sweep_size(const fs::path& path) {
  const Hdf5Reader reader(path);
  return reader.has_attribute("n_points") ? reader.read_attribute<int64_t>("n_points") : 0;
}

SummaryRow read_summary_row(const fs::path& path) {
  const std::string id = read_result_id(path);
  const Hdf5Reader reader(path);
  SummaryRow row;
  row.emplace_back("id", id);
  row.emplace_back("index", fmt::format("{}", reader.read_attribute<int64_t>("index")));
  row.emplace_back("name", reader.read_string_attribute("name"));
  const std::string config_text = reader.read_string_attribute("config_toml");
  toml::table config;
  try {
    config = toml::parse(config_text, path.string() + ":config_toml");
  } catch (const toml::parse_error& e) {
    throw InvalidInput(fmt::format("{}: attribute config_toml is not valid TOML ({})",
                                   path.string(), e.description()));
  }
  std::map<std::string, std::string> values;
  for (const auto& [key, node] : flatten_table(config)) values[key] = plain_value(*node);
  for (const KeySpec& spec : config_keys()) {
    if (spec.key == "name") continue;
    const auto it = values.find(std::string(spec.key));
    row.emplace_back(spec.key, it == values.end() ? std::string() : it->second);
    if (it != values.end()) values.erase(it);
  }
  values.erase("name");
  for (const auto& [key, value] : values) row.emplace_back(key, value);  // newer schema keys
  for (const MetricSpec& metric : kMetrics) {
    std::string cell;
    if (reader.has_attribute(metric.name)) {
      switch (metric.kind) {
        case Kind::kInteger:
          cell = fmt::format("{}", reader.read_attribute<int64_t>(metric.name));
          break;
        case Kind::kNumber: {
          const double x = reader.read_attribute<double>(metric.name);
          if (std::isfinite(x)) cell = fmt::format("{}", x);
          break;
        }
        case Kind::kText:
          cell = reader.read_string_attribute(metric.name);
          break;
      }
    }
    row.emplace_back(metric.name, cell);
  }
  row.emplace_back("file", path.filename().string());
  return row;
}

void write_summary_csv(const fs::path& path, std::span<const SummaryRow> rows) {
  std::vector<std::string> columns;
  for (const SummaryRow& row : rows) {
    for (const auto& [column, cell] : row) {
      if (std::find(columns.begin(), columns.end(), column) == columns.end()) {
        columns.push_back(column);
      }
    }
  }
  std::string text;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (c) text += ',';
    text += csv_cell(columns[c]);
  }
  text += '\n';
  for (const SummaryRow& row : rows) {
    for (size_t c = 0; c < columns.size(); ++c) {
      if (c) text += ',';
      for (const auto& [column, cell] : row) {
        if (column == columns[c]) {
          text += csv_cell(cell);
          break;
        }
      }
    }
    text += '\n';
  }
  write_file_atomically(path, text);
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  AtomicFile file(path);
  file.write(text);
  file.commit();
}

void copy_file_atomically(const fs::path& from, const fs::path& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    throw IoError(fmt::format("{}: cannot open to copy ({})", from.string(), errno_text()));
  }
  AtomicFile file(to);
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string message =
          fmt::format("{}: cannot read to copy ({})", from.string(), errno_text());
      ::close(in);
      throw IoError(message);
    }
    if (n == 0) break;
    try {
      file.write(std::string_view(buffer.data(), static_cast<size_t>(n)));
    } catch (...) {
      ::close(in);
      throw;
    }
  }
  ::close(in);
  file.commit();
}

}  // namespace speclab::experiments
