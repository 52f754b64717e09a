// Progress of a long run (docs/architecture.md "experiments/"): on a terminal a single redrawn line
// (sweep point i/N, percent, ETA, tokens/s, acceptance so far) at most 10 times a second; elsewhere
// (a log file, a batch job) one plain line every 30 s or every 5% of the work, whichever comes
// first.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>

namespace speclab::experiments {

class Progress {
 public:
  struct Options {
    bool terminal = false;          ///< redraw one line (isatty) or print log lines
    std::FILE* out = stderr;        ///< nullptr: report nothing
    double redraw_seconds = 0.1;    ///< terminal: at most one redraw per this interval
    double log_seconds = 30.0;      ///< log: a line at least this often ...
    double log_fraction = 0.05;     ///< ... and whenever this fraction of the work is done
    std::function<double()> clock;  ///< seconds; default: steady_clock
  };

  /// `points` sweep points to run holding `work` tokens in all (plain baselines included).
  Progress(int64_t points, int64_t work, Options options);
  /// Options for stderr: terminal when stderr is a TTY.
  static Options for_stderr();

  /// Thread-safe updates: `tokens` decoded, of which `accepted` of `tested` draft positions.
  void add(int64_t tokens, int64_t accepted, int64_t tested);
  /// Work that became known after the start (`speclab verify` sizes each point's samples only
  /// when it reaches it).
  void add_work(int64_t work);
  /// A point finished: its unreported planned work (EOS stops early) counts as done.
  void point_finished(int64_t planned_work, int64_t reported_work);
  /// Removes the redrawn line from a terminal, so that other output can follow; the next update
  /// draws it again. Does nothing elsewhere.
  void clear();
  /// Ends the line on a terminal and prints a final report.
  void finish();

  /// The current status, e.g. "point 3/12  41.7%  1520 tok/s  acceptance 0.712  ETA 1m05s".
  std::string line() const;
  int64_t lines_written() const { return lines_written_; }

 private:
  std::string line_locked(double now) const;
  void maybe_report_locked();
  void clear_locked();

  Options options_;
  int64_t points_, work_;
  mutable std::mutex mutex_;
  int64_t points_done_ = 0, work_done_ = 0, tokens_ = 0, accepted_ = 0, tested_ = 0;
  double start_, last_report_;
  int64_t last_work_reported_ = 0;
  int64_t lines_written_ = 0;
  bool shown_ = false;  ///< a redrawn line is on the terminal
};

/// "1h02m", "3m05s", "42s".
std::string format_duration(double seconds);

}  // namespace speclab::experiments
