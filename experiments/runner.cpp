// The experiment runner (see runner.hpp).
#include "experiments/runner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "core/base/error.hpp"
#include "core/base/hash.hpp"
#include "core/decode/decode.hpp"
#include "core/decode/decode_vocab.hpp"
#include "core/io/atomic_file.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/ngram.hpp"
#include "core/plan/cost_model.hpp"
#include "experiments/out_dir.hpp"
#include "experiments/results.hpp"
#include "experiments/run_costs.hpp"
#include "experiments/workload.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;
namespace {

int64_t planned_work(const RunSettings& s) {
  return s.sequences * s.decode.max_new_tokens * (s.baseline ? 2 : 1);
}

// One worker's models, built with make_model and reused while consecutive points use them.
class ModelCache {
 public:
  LanguageModel& get(const std::string& role, const std::string& name) {
    auto& slot = models_[role];
    if (!slot.second || slot.first != name) {
      slot.second.reset();  // free the old model first
      slot = {name, make_model(name)};
    }
    return *slot.second;
  }
  // The vocabulary bridge of a pair (nullptr when they share a vocabulary), kept like the models.
  std::shared_ptr<const VocabBridge> bridge(const std::string& target, int64_t target_vocab,
                                            const std::string& draft, int64_t draft_vocab) {
    const std::string key = target + "\n" + draft;
    if (bridge_key_ != key) {
      bridge_ = model_vocab_bridge(target, target_vocab, draft, draft_vocab);
      bridge_key_ = key;
    }
    return bridge_;
  }

 private:
  std::string bridge_key_;
  std::shared_ptr<const VocabBridge> bridge_;
  std::map<std::string, std::pair<std::string, std::unique_ptr<LanguageModel>>> models_;
};

// Runs one point into `path`; false when stopped before it finished (nothing is left behind).
bool run_point(const SweepPoint& point, int64_t n_points, const fs::path& path, ModelCache& models,
               const std::atomic<bool>* stop, Progress& progress) {
  const RunSettings& s = point.settings;
  LanguageModel& target = models.get("target", s.target_model);
  LanguageModel* draft = s.speculative() ? &models.get("draft", s.draft_model) : nullptr;
  const std::shared_ptr<const VocabBridge> bridge =
      draft != nullptr && crosses_vocabularies(s.decode.verifier)
          ? models.bridge(s.target_model, target.vocab(), s.draft_model, draft->vocab())
          : nullptr;
  const std::vector<std::vector<int32_t>> prompts = make_prompts(s, target.vocab());
  PointWriter writer(path, point, n_points);
  int64_t reported = 0;
  for (int64_t batch = 0; batch < s.batches(); ++batch) {
    if (stop != nullptr && stop->load()) return false;
    const int64_t begin = batch * s.batch_size;
    const int64_t end = std::min(s.sequences, begin + s.batch_size);
    const std::span<const std::vector<int32_t>> batch_prompts(prompts.data() + begin,
                                                              static_cast<size_t>(end - begin));
    const DecodeConfig config = decode_config(s, batch);
    const DecodeResult result =
        draft != nullptr ? speculative_decode(target, *draft, bridge.get(), batch_prompts, config)
                         : plain_decode(target, batch_prompts, config);
    writer.add_batch(batch, config.seed, batch_prompts, result);
    progress.add(result.metrics.tokens, result.metrics.accepted_positions,
                 result.metrics.tested_positions);
    reported += result.metrics.tokens;
    if (s.baseline) {
      const DecodeResult plain = plain_decode(target, batch_prompts, config);
      writer.add_baseline_batch(plain, result);
      progress.add(plain.metrics.tokens, 0, 0);
      reported += plain.metrics.tokens;
    }
  }
  if (s.baseline && draft != nullptr && !s.tree()) {
    // The planner's prediction from the point's own acceptance rate and timings (run_costs.hpp).
    const PointTotals& t = writer.totals();
    if (t.target.calls > 0 && t.baseline_target.calls > 0) {
      const double alpha = t.tested_positions > 0 ? static_cast<double>(t.accepted_positions) /
                                                        static_cast<double>(t.tested_positions)
                                                  : 0.0;
      const MeasuredRoundCosts costs(
          {{.batch = s.batch_size,
            .plain_step = measured_plain_step(t.baseline_target, t.baseline_decode_seconds),
            .rounds = {measured_round(t.target, t.draft, t.decode_seconds, s.decode.gamma)}}});
      writer.set_predicted_speedup(
          predict_run(costs, alpha, s.batch_size, s.decode.gamma, s.decode.max_new_tokens).speedup);
    }
  }
  writer.commit();
  progress.point_finished(planned_work(s), reported);
  return true;
}

std::string describe(const std::vector<std::string>& names, size_t limit = 3) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < limit; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > limit) text += fmt::format(", … ({} in all)", names.size());
  return text;
}

}  // namespace

fs::path default_out_dir(const Sweep& sweep) { return fs::path("results") / sweep.name; }

fs::path point_path(const fs::path& out, const SweepPoint& point) {
  return out / (point.id + ".h5");
}

std::string summary_file_name(const Shard& shard) {
  if (shard.whole()) return std::string(kSummaryFile);
  return fmt::format("summary.shard-{}-of-{}.csv", shard.index, shard.count);
}

std::vector<std::vector<int32_t>> make_prompts(const RunSettings& s, int64_t vocab) {
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(s.sequences));
  const uint64_t stream = mix64(s.decode.seed ^ 0x70726f6d70747321ULL);  // "prompts!"
  if (s.prompt_source == PromptSource::kWorkload) {
    // Request j takes conversation j mod n of the workload; prompt_length does not apply.
    return workload_prompts(load_workload(s.workload), s.target_model, s.sequences,
                            s.decode.max_new_tokens);
  }
  if (s.prompt_source == PromptSource::kCorpus) {
    const auto corpus = load_corpus(default_corpus_path());
    const auto held_out = static_cast<int64_t>(corpus->held_out_text().size());
    if (held_out < s.prompt_length) {
      throw InvalidInput(
          fmt::format("decode.prompt_length is {} but the held-out corpus text of "
                      "{} has {} bytes",
                      s.prompt_length, corpus->path, held_out));
    }
    const auto starts = static_cast<uint64_t>(held_out - s.prompt_length + 1);
    for (int64_t j = 0; j < s.sequences; ++j) {
      const uint64_t offset = mix64(stream + static_cast<uint64_t>(j)) % starts;
      prompts[j] = corpus_prompt(static_cast<int64_t>(offset), s.prompt_length);
    }
    return prompts;
  }
  for (int64_t j = 0; j < s.sequences; ++j) {
    prompts[j].resize(static_cast<size_t>(s.prompt_length));
    for (int64_t i = 0; i < s.prompt_length; ++i) {
      const uint64_t bits = mix64(stream + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(j + 1) +
                                  0xc2b2ae3d27d4eb4fULL * static_cast<uint64_t>(i + 1));
      prompts[j][i] = static_cast<int32_t>(bits % static_cast<uint64_t>(vocab));
    }
  }
  return prompts;
}

namespace {

void refuse_existing(const fs::path& out, const fs::path& summary,
                     std::vector<std::string> existing) {
  std::error_code ec;
  if (existing.empty() && !fs::exists(summary, ec)) return;
  if (fs::exists(summary, ec)) existing.push_back(summary.string());
  throw InvalidInput(fmt::format(
      "--out {} already holds results of this sweep ({}); pass --resume to run only the "
      "missing points, or choose another --out",
      out.string(), describe(existing)));
}

void refuse_corrupt(const std::vector<std::string>& corrupt) {
  if (corrupt.empty()) return;
  throw InvalidInput(fmt::format(
      "--resume: {} result file{} cannot be used:\n{}\ndelete {} to "
      "run {} again",
      corrupt.size(), corrupt.size() == 1 ? "" : "s", fmt::join(corrupt, "\n"),
      corrupt.size() == 1 ? "it" : "them", corrupt.size() == 1 ? "its point" : "their points"));
}

// The cell of a summary row's column, or "" when it has none.
std::string cell(const SummaryRow& row, std::string_view column) {
  for (const auto& [name, value] : row) {
    if (name == column) return value;
  }
  return {};
}

// "decode.max_new_tokens = 12 (now 10)" for every key outside the sweep's axes whose value in a
// result file's row differs from the sweep's; "" when none does.
std::string changed_keys(const SummaryRow& row, const Sweep& sweep) {
  std::vector<std::string> changed;
  const toml::table config = toml::parse(sweep.points.front().config_toml);  // outlives the nodes
  for (const auto& [key, node] : flatten_table(config)) {
    if (key == "name" || std::ranges::find(sweep.swept_keys, key) != sweep.swept_keys.end()) {
      continue;
    }
    const std::string then = cell(row, key), now = plain_value(*node);
    if (then != now) changed.push_back(fmt::format("{} = {} (now {})", key, then, now));
  }
  return fmt::format("{}", fmt::join(changed, ", "));
}

// --resume continues the sweep its files came from. A result file of this sweep's name whose point
// is not in the sweep was run with another config (a changed key outside the axes changes every
// point's id): resuming would rewrite the summary without it, or mix two configurations in one
// table, so it is refused, naming the keys that changed, before anything is written.
void refuse_other_configs(const Sweep& sweep, const fs::path& out) {
  std::set<std::string> ids;
  for (const SweepPoint& p : sweep.points) ids.insert(p.id);
  std::vector<std::string> stray;
  std::string changed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(out, ec)) {
    if (entry.path().extension() != ".h5" || ids.contains(entry.path().stem().string())) continue;
    SummaryRow row;
    try {
      row = read_summary_row(entry.path());
    } catch (const Error&) {
      continue;  // not a result file of speclab's, or not ours to judge
    }
    if (ids.contains(cell(row, "id")) || cell(row, "name") != sweep.name) continue;
    stray.push_back(entry.path().filename().string());
    if (changed.empty()) changed = changed_keys(row, sweep);
  }
  if (stray.empty()) return;
  std::sort(stray.begin(), stray.end());
  throw InvalidInput(fmt::format(
      "--resume: --out {} holds {} result file(s) of sweep '{}' that are not points of this "
      "config ({}): {}; resuming would rewrite the summary without them or mix two "
      "configurations in it. Restore the config, or run into another --out (nothing was "
      "changed)",
      out.string(), stray.size(), sweep.name, describe(stray),
      changed.empty() ? std::string("their points are no longer in the sweep")
                      : "changed since: " + changed));
}

// What OUT already holds of the shard's points: without --resume any finished point, stale
// .partial file of a killed run or summary is refused; with it the stale .partial files are
// removed and the finished points checked and skipped. Returns the points left to run.
std::vector<const SweepPoint*> scan_out_dir(const std::vector<const SweepPoint*>& points,
                                            const fs::path& out, const fs::path& summary,
                                            bool resume, RunReport& report) {
  std::vector<const SweepPoint*> pending;
  std::vector<std::string> existing, corrupt;
  std::error_code ec;
  for (const SweepPoint* p : points) {
    const fs::path path = point_path(out, *p);
    const bool finished = fs::exists(path, ec);
    const bool partial = fs::exists(partial_path(path), ec);
    if (!resume) {
      if (finished || partial) existing.push_back((finished ? path : partial_path(path)).string());
      pending.push_back(p);
      continue;
    }
    if (partial) {
      fs::remove(partial_path(path), ec);
      ++report.removed_partials;
    }
    if (!finished) {
      pending.push_back(p);
      continue;
    }
    try {
      const std::string id = read_result_id(path);
      if (id != p->id) {
        corrupt.push_back(
            fmt::format("{}: holds point '{}'; expected '{}'", path.string(), id, p->id));
      }
      ++report.skipped;
    } catch (const Error& e) {
      corrupt.push_back(e.what());
    }
  }
  if (!resume) refuse_existing(out, summary, existing);
  refuse_corrupt(corrupt);
  return pending;
}

// The state the workers of one run share: the queue of pending points, the stop flag they watch
// between batches, and the first failure, rethrown once every worker has stopped.
struct SweepWork {
  const std::vector<const SweepPoint*>& pending;
  int64_t n_points = 0;  // in the whole sweep, for the result files' metadata
  const fs::path& out;
  const RunOptions& options;
  Progress& progress;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> stop{false};  // the user asked, or another worker failed
  std::atomic<int64_t> ran{0};
  std::mutex error_mutex;
  std::exception_ptr first_error;
  std::string failed_point;
};

// One worker: takes points off the queue until it is empty, a stop is asked for or a point fails.
void work(SweepWork& w) {
  ModelCache models;
  for (;;) {
    if ((w.options.stop != nullptr && w.options.stop->load()) || w.failed.load()) return;
    const size_t i = w.next.fetch_add(1);
    if (i >= w.pending.size()) return;
    const SweepPoint& p = *w.pending[i];
    try {
      if (run_point(p, w.n_points, point_path(w.out, p), models, &w.stop, w.progress)) ++w.ran;
    } catch (...) {
      const std::lock_guard lock(w.error_mutex);
      if (!w.first_error) {
        w.first_error = std::current_exception();
        w.failed_point = p.id;
      }
      w.failed = true;
      w.stop = true;
      return;
    }
  }
}

// Runs min(--jobs, pending) workers. The external stop flag is polled here and forwarded, so
// workers watch a single flag.
void run_workers(SweepWork& w) {
  std::atomic<bool> done{false};
  std::thread watcher;
  if (w.options.stop != nullptr) {
    watcher = std::thread([&] {
      while (!done.load()) {
        if (w.options.stop->load()) w.stop = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  const int64_t jobs = std::min<int64_t>(w.options.jobs, std::max<size_t>(w.pending.size(), 1));
  if (jobs <= 1) {
    work(w);
  } else {
    std::vector<std::thread> threads;
    for (int64_t j = 0; j < jobs; ++j) threads.emplace_back([&w] { work(w); });
    for (std::thread& t : threads) t.join();
  }
  done = true;
  if (watcher.joinable()) watcher.join();
}

// The summary over every finished point of the shard, whatever happened to this run; returns
// the error that stopped it ("" when written or when no point is finished).
std::string write_summary(const std::vector<const SweepPoint*>& points, const fs::path& out,
                          const fs::path& summary, RunReport& report) {
  std::vector<SummaryRow> rows;
  std::error_code ec;
  try {
    for (const SweepPoint* p : points) {
      const fs::path path = point_path(out, *p);
      if (fs::exists(path, ec)) rows.push_back(read_summary_row(path));
    }
    if (!rows.empty()) {
      write_summary_csv(summary, rows);
      report.summary = summary;
    }
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// A worker's failure, named by its point; a full disk or an unusable directory also says how to
// carry on.
[[noreturn]] void rethrow_point_failure(const SweepWork& w, const RunReport& report) {
  try {
    std::rethrow_exception(w.first_error);
  } catch (const IoError& e) {
    throw InvalidInput(fmt::format(
        "sweep point {}: {}\nthe {} finished points are kept in {}; free disk space or fix "
        "the directory, then rerun with --resume",
        w.failed_point, e.what(), report.skipped + report.ran, w.out.string()));
  } catch (const InvalidInput& e) {
    throw InvalidInput(fmt::format("sweep point {}: {}", w.failed_point, e.what()));
  } catch (const std::exception& e) {
    throw Error(fmt::format("sweep point {}: {}", w.failed_point, e.what()));
  }
}

}  // namespace

RunReport run_sweep(const Sweep& sweep, const RunOptions& options) {
  const fs::path& out = options.out;
  if (options.jobs < 1) {
    throw InvalidInput(fmt::format("--jobs is {}; expected ≥ 1", options.jobs));
  }
  prepare_out_dir(out, "--out", "results directory");
  if (options.resume) refuse_other_configs(sweep, out);
  const std::vector<const SweepPoint*> points = shard_points(sweep, options.shard);
  const fs::path summary = out / summary_file_name(options.shard);
  RunReport report;
  report.points = static_cast<int64_t>(points.size());
  const std::vector<const SweepPoint*> pending =
      scan_out_dir(points, out, summary, options.resume, report);

  int64_t planned = 0;
  for (const SweepPoint* p : pending) planned += planned_work(p->settings);
  Progress progress(static_cast<int64_t>(pending.size()), planned, options.progress);
  SweepWork w{.pending = pending,
              .n_points = static_cast<int64_t>(sweep.points.size()),
              .out = out,
              .options = options,
              .progress = progress};
  run_workers(w);
  progress.finish();
  report.ran = w.ran.load();
  report.interrupted = report.skipped + report.ran < report.points;

  const std::string summary_error = write_summary(points, out, summary, report);
  if (w.first_error) rethrow_point_failure(w, report);
  if (!summary_error.empty()) {
    throw InvalidInput(
        fmt::format("cannot write the summary: {}\nthe finished points are kept "
                    "in {}; rerun with --resume to write it",
                    summary_error, out.string()));
  }
  return report;
}

}  // namespace speclab::experiments
