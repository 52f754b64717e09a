// Unit tests of experiments/progress: on a terminal at most 10 redraws a second; in a log one line
// per 5% of the work or per 30 s; the status line's fields. The clock is simulated.
#include "experiments/progress.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace speclab::experiments {
namespace {

using ::testing::HasSubstr;

struct Fixture {
  double now = 0.0;
  std::FILE* out = std::tmpfile();
  ~Fixture() { std::fclose(out); }

  Progress::Options options(bool terminal) {
    Progress::Options o;
    o.terminal = terminal;
    o.out = out;
    o.clock = [this] { return now; };
    return o;
  }
  std::string text() {
    std::fflush(out);
    std::rewind(out);
    std::string s;
    for (int c; (c = std::fgetc(out)) != EOF;) s += static_cast<char>(c);
    return s;
  }
};

TEST(Progress, TerminalRedrawsAtMostTenTimesASecond) {
  Fixture f;
  Progress progress(2, 100000, f.options(true));
  for (int i = 0; i < 2000; ++i) {  // 2 simulated seconds, an update every millisecond
    f.now += 0.001;
    progress.add(1, 1, 2);
  }
  EXPECT_LE(progress.lines_written(), 20);
  EXPECT_GE(progress.lines_written(), 19);
  const std::string text = f.text();
  EXPECT_EQ(text.find('\n'), std::string::npos);  // one line, redrawn with \r
  EXPECT_THAT(text, HasSubstr("\r"));
}

TEST(Progress, LogWritesALineEveryFivePercent) {
  Fixture f;
  Progress progress(1, 1000, f.options(false));
  for (int i = 0; i < 100; ++i) {  // 1% per update, 0.1 s apart
    f.now += 0.1;
    progress.add(10, 0, 0);
  }
  EXPECT_EQ(progress.lines_written(), 20);
  EXPECT_THAT(f.text(), HasSubstr("speclab: point 1/1   50.0%"));
}

TEST(Progress, LogWritesALineEveryThirtySecondsWhenProgressIsSlow) {
  Fixture f;
  Progress progress(1, 1000000, f.options(false));
  for (int i = 0; i < 300; ++i) {  // 300 s, far below 5%
    f.now += 1.0;
    progress.add(1, 0, 0);
  }
  EXPECT_EQ(progress.lines_written(), 10);
}

TEST(Progress, LineShowsPointPercentRateAcceptanceAndEta) {
  Fixture f;
  Progress progress(4, 1000, f.options(false));
  f.now = 10.0;
  progress.add(250, 30, 40);
  progress.point_finished(250, 250);
  const std::string line = progress.line();
  EXPECT_THAT(line, HasSubstr("point 2/4"));
  EXPECT_THAT(line, HasSubstr("25.0%"));
  EXPECT_THAT(line, HasSubstr("25 tok/s"));
  EXPECT_THAT(line, HasSubstr("acceptance 0.750"));
  EXPECT_THAT(line, HasSubstr("ETA 30s"));
}

TEST(Progress, PointFinishedCountsWorkCutShortAsDone) {
  Fixture f;
  Progress progress(2, 200, f.options(false));
  f.now = 1.0;
  progress.add(40, 0, 0);
  progress.point_finished(100, 40);
  EXPECT_THAT(progress.line(), HasSubstr("50.0%"));
}

TEST(Progress, FormatsDurations) {
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(format_duration(-1), "?");
}

}  // namespace
}  // namespace speclab::experiments
