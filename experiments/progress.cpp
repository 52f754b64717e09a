// Progress reporting of a run (see progress.hpp).
#include "experiments/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace speclab::experiments {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s % 3600 / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

Progress::Progress(int64_t points, int64_t work, Options options)
    : options_(std::move(options)), points_(points), work_(std::max<int64_t>(work, 0)) {
  if (!options_.clock) options_.clock = steady_seconds;
  start_ = options_.clock();
  last_report_ = start_;
}

Progress::Options Progress::for_stderr() {
  Options options;
  options.terminal = isatty(STDERR_FILENO) != 0;
  return options;
}

void Progress::add(int64_t tokens, int64_t accepted, int64_t tested) {
  const std::lock_guard lock(mutex_);
  work_done_ += tokens;
  tokens_ += tokens;
  accepted_ += accepted;
  tested_ += tested;
  maybe_report_locked();
}

void Progress::add_work(int64_t work) {
  const std::lock_guard lock(mutex_);
  work_ += std::max<int64_t>(work, 0);
}

void Progress::point_finished(int64_t planned_work, int64_t reported_work) {
  const std::lock_guard lock(mutex_);
  ++points_done_;
  if (planned_work > reported_work) work_done_ += planned_work - reported_work;
  maybe_report_locked();
}

std::string Progress::line() const {
  const std::lock_guard lock(mutex_);
  return line_locked(options_.clock());
}

std::string Progress::line_locked(double now) const {
  const double elapsed = now - start_;
  const double fraction =
      std::min(1.0, static_cast<double>(work_done_) / std::max<int64_t>(work_, 1));
  std::string text = fmt::format("point {}/{}  {:5.1f}%", std::min(points_done_ + 1, points_),
                                 points_, 100.0 * fraction);
  if (elapsed > 0) text += fmt::format("  {:.0f} tok/s", tokens_ / elapsed);
  if (tested_ > 0) {
    text += fmt::format("  acceptance {:.3f}", static_cast<double>(accepted_) / tested_);
  }
  if (fraction > 0 && fraction < 1) {
    text += "  ETA " + format_duration(elapsed * (1 - fraction) / fraction);
  }
  return text;
}

void Progress::maybe_report_locked() {
  if (options_.out == nullptr) return;
  const double now = options_.clock();
  if (options_.terminal) {
    if (now - last_report_ < options_.redraw_seconds) return;
    std::fprintf(options_.out, "\r%s\x1b[K", line_locked(now).c_str());
    std::fflush(options_.out);
    shown_ = true;
  } else {
    const bool due = now - last_report_ >= options_.log_seconds ||
                     static_cast<double>(work_done_ - last_work_reported_) >=
                         options_.log_fraction * static_cast<double>(std::max<int64_t>(work_, 1));
    if (!due) return;
    last_work_reported_ = work_done_;
    std::fprintf(options_.out, "speclab: %s\n", line_locked(now).c_str());
    std::fflush(options_.out);
  }
  last_report_ = now;
  ++lines_written_;
}

void Progress::clear() {
  const std::lock_guard lock(mutex_);
  clear_locked();
}

void Progress::clear_locked() {
  if (options_.out == nullptr || !shown_) return;
  std::fprintf(options_.out, "\r\x1b[K");
  std::fflush(options_.out);
  shown_ = false;
}

void Progress::finish() {
  const std::lock_guard lock(mutex_);
  if (options_.out == nullptr || points_ == 0) return;
  const double elapsed = options_.clock() - start_;
  clear_locked();
  std::string text = fmt::format("speclab: {} of {} points in {}", points_done_, points_,
                                 format_duration(elapsed));
  if (elapsed > 0 && tokens_ > 0) text += fmt::format(", {:.0f} tok/s", tokens_ / elapsed);
  if (tested_ > 0) {
    text += fmt::format(", acceptance {:.3f}", static_cast<double>(accepted_) / tested_);
  }
  std::fprintf(options_.out, "%s\n", text.c_str());
  std::fflush(options_.out);
}

}  // namespace speclab::experiments
