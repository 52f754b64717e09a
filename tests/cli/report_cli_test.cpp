// `speclab report DIR -o report.html` opened in headless Chromium (Debian's chromium): the page is
// self-contained (no URL but data: ones), every figure decodes and renders (naturalWidth > 0, read
// by a probe script the test appends to a copy of the page), is displayed no smaller than its
// natural width in a window wide enough for it (in a narrower one, shrunk to fit, it is a link to
// itself) and is a link that opens it at full size, and the page holds the summary table with the
// key metrics first, the resolved config, the machine's instruction sets and the verify verdict.
// Without chromium the test skips saying so, unless SPECLAB_REPORT_BROWSER_REQUIRED=1 (CI), where
// that fails. A summary cut short exits 2 naming the file, without a Python traceback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/cli_run.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::fresh_test_dir;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::quoted;
using testing::read_text;
using testing::run_cli;
using testing::tiny_sweep_toml;
using testing::write_text;

bool have_matplotlib() {
  return std::system("/usr/bin/python3 -c 'import matplotlib, h5py, pandas' >/dev/null 2>&1") == 0;
}

// The chromium executable, or "" when there is none.
std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"}) {
      const fs::path path = fs::path(dir) / name;
      if (fs::exists(path)) return path.string();
    }
  }
  return "";
}

// Appended to a copy of the report: once the page and its images have loaded, a <div
// id="probe"> lists for each image its natural width, the per mille of its pixels that the
// browser decoded as opaque (each image drawn into a canvas: a truncated or corrupt PNG leaves
// pixels transparent, while matplotlib's figures are opaque throughout) and how it is shown (1:
// at no less than its natural width; 2: narrower, in a window narrower than that, inside a link
// to its own data; 0: otherwise), then the count of images inside a link to their own data and
// the count of URLs that are not data: ones.
constexpr const char* kProbe = R"(<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const opaque = images.map(i => {
    if (!i.complete || i.naturalWidth === 0) return 0;
    const canvas = document.createElement("canvas");
    canvas.width = i.naturalWidth;
    canvas.height = i.naturalHeight;
    const context = canvas.getContext("2d");
    context.drawImage(i, 0, 0);
    const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    let n = 0;
    for (let k = 3; k < pixels.length; k += 4) n += pixels[k] === 255;
    return Math.floor(1000 * n / (pixels.length / 4));
  });
  const linked = images.map(i => {
    const link = i.closest("a");
    return link !== null && link.getAttribute("href") === i.getAttribute("src");
  });
  const shown = images.map((i, k) => {
    if (i.getBoundingClientRect().width >= i.naturalWidth - 0.5) return 1;
    return linked[k] && document.documentElement.clientWidth < i.naturalWidth ? 2 : 0;
  });
  const external = [...document.querySelectorAll("[src],[href]")]
      .map(e => e.getAttribute("src") || e.getAttribute("href"))
      .filter(u => !u.startsWith("data:"));
  const probe = document.createElement("div");
  probe.id = "probe";
  probe.textContent = "images=" + images.length + " widths=" +
      images.map(i => i.complete ? i.naturalWidth : 0).join(",") + " opaque=" + opaque.join(",") +
      " shown=" + shown.join(",") + " linked=" + linked.filter(Boolean).length +
      " external=" + external.length;
  document.body.appendChild(probe);
});
</script>
)";

TEST(ReportCli, RendersItsFiguresInHeadlessChromium) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    const char* required = std::getenv("SPECLAB_REPORT_BROWSER_REQUIRED");
    if (required != nullptr && std::string(required) == "1") {
      FAIL() << "chromium not found and SPECLAB_REPORT_BROWSER_REQUIRED=1; install Debian's "
                "chromium (scripts/install-deps.sh)";
    }
    GTEST_SKIP() << "chromium not found; install Debian's chromium (scripts/install-deps.sh) to "
                    "open the report in a browser";
  }
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  ASSERT_EQ(run_cli("run " + quoted(config) + " -q -o " + quoted(dir / "results" / "tiny")).status,
            0);
  const CliRun verify =
      run_cli(std::string("verify '") + SPECLAB_SOURCE_DIR +
              "/experiments/configs/verify_token.toml' --length 2 --samples 4000 -q -o " +
              quoted(dir / "results" / "verify" / "token.h5"));
  ASSERT_EQ(verify.status, 0) << verify.output;
  const CliRun report = run_cli("report " + quoted(dir / "results") + " -o " +
                                quoted(dir / "page" / "report.html") + " --json");
  ASSERT_EQ(report.status, 0) << report.output;
  EXPECT_THAT(report.output, HasSubstr("\"figures\": [\"tiny_position_acceptance\""));

  const std::string page = read_text(dir / "page" / "report.html");
  EXPECT_THAT(page, HasSubstr("<th>decode.gamma</th>"));  // the summary table, by swept key
  // The key metrics first, after the point's id and swept keys.
  EXPECT_THAT(page, HasSubstr("<th>speedup</th><th>predicted_speedup</th>"));
  ASSERT_NE(page.find("<th>sequences</th>"), std::string::npos);
  EXPECT_LT(page.find("<th>speedup</th>"), page.find("<th>sequences</th>"));
  EXPECT_THAT(page, HasSubstr("model = &#x27;lsm-tiny-target&#x27;"));  // the resolved config
  EXPECT_THAT(page, HasSubstr("<td class=\"text\">build_isa</td>"));    // the machine
  EXPECT_THAT(page, HasSubstr("<td class=\"text\">cpu_isa</td>"));
  EXPECT_THAT(page, HasSubstr("Distribution checks"));  // the verify verdict
  EXPECT_THAT(page, HasSubstr("<td class=\"pass\">1</td>"));
  EXPECT_THAT(page, Not(HasSubstr("src=\"http")));

  // A copy with the probe, opened by the browser from disk in a window wider than the widest
  // figure (the verification figure, 13 in at 150 dpi); the DOM after load is printed.
  const size_t end = page.rfind("</body>");
  ASSERT_NE(end, std::string::npos);
  const fs::path probed =
      write_text(dir / "page" / "probed.html", page.substr(0, end) + kProbe + page.substr(end));
  const std::string command = "timeout 120 '" + chromium +
                              "' --headless --no-sandbox --disable-gpu --dump-dom "
                              "--window-size=2400,1800 --virtual-time-budget=10000 'file://" +
                              probed.string() + "' 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string dom;
  char buffer[65536];
  while (const size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) dom.append(buffer, n);
  const int status = pclose(pipe);
  ASSERT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << "chromium failed";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m,
                                std::regex(R"(<div id="probe">images=(\d+) widths=([\d,]*) )"
                                           R"(opaque=([\d,]*) shown=([\d,]*) linked=(\d+) )"
                                           R"(external=(\d+)</div>)")))
      << "no probe in the DOM chromium printed (" << dom.size() << " bytes)";
  // Five figures of the sweep (position acceptance, accepted length, emitted vs γ, α vs T,
  // speedup vs γ) and the verification figure.
  const std::string probe = m[0];
  EXPECT_EQ(std::stoi(m[1]), 6) << probe;
  EXPECT_EQ(std::stoi(m[5]), 6) << "not every figure is a link to itself: " << probe;
  EXPECT_EQ(std::stoi(m[6]), 0) << "the page loads something that is not a data: URL: " << probe;
  const auto numbers = [](std::string text) {
    std::vector<int> values;
    std::smatch n;
    for (const std::regex number("\\d+"); std::regex_search(text, n, number); text = n.suffix()) {
      values.push_back(std::stoi(n[0]));
    }
    return values;
  };
  const std::vector<int> widths = numbers(m[2]), opaque = numbers(m[3]), shown = numbers(m[4]);
  ASSERT_EQ(widths.size(), 6u) << probe;
  ASSERT_EQ(opaque.size(), 6u) << probe;
  ASSERT_EQ(shown.size(), 6u) << probe;
  for (size_t i = 0; i < widths.size(); ++i) {
    EXPECT_GT(widths[i], 100) << "image " << i << " did not decode: " << probe;
    EXPECT_EQ(opaque[i], 1000) << "image " << i << " is not rendered whole: " << probe;
    EXPECT_GE(shown[i], 1) << "image " << i << " is shown narrower than its natural width and "
                           << "not as a link to itself: " << probe;
  }
}

// A summary.csv cut short inside its header names the file and what is wrong with it, exits 2
// without a Python traceback and writes no page.
TEST(ReportCli, TruncatedSummaryExitsTwoNamingIt) {
  if (!have_matplotlib()) GTEST_SKIP() << "/usr/bin/python3 with matplotlib not available";
  const fs::path dir = fresh_test_dir();
  const fs::path config = write_text(dir / "tiny.toml", tiny_sweep_toml());
  ASSERT_EQ(run_cli("run " + quoted(config) + " -q -o " + quoted(dir / "results")).status, 0);
  const fs::path summary = dir / "results" / "summary.csv";
  ASSERT_TRUE(fs::exists(summary));
  fs::resize_file(summary, 20);  // "id,index,name,..." and no `file` column
  const CliRun r =
      run_cli("report " + quoted(dir / "results") + " -o " + quoted(dir / "report.html"));
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(summary.string() + ": no 'file' column")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("expected a summary written by `speclab run`"));
  EXPECT_THAT(r.output, Not(HasSubstr("Traceback")));
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

// Bad input exits 2 and writes nothing; an -o that is a directory is refused and kept.
TEST(ReportCli, BadInputExitsTwoAndWritesNothing) {
  const fs::path dir = fresh_test_dir();
  const CliRun missing =
      run_cli("report " + quoted(dir / "nothing") + " -o " + quoted(dir / "report.html"));
  EXPECT_EQ(missing.status, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("does not exist"));
  fs::create_directories(dir / "empty");
  if (have_matplotlib()) {
    const CliRun empty =
        run_cli("report " + quoted(dir / "empty") + " -o " + quoted(dir / "report.html"));
    EXPECT_EQ(empty.status, 2) << empty.output;
    EXPECT_THAT(empty.output, HasSubstr("holds no runs"));
    const CliRun to_dir = run_cli("report " + quoted(dir / "empty") + " -o " + quoted(dir));
    EXPECT_EQ(to_dir.status, 2) << to_dir.output;
  }
  EXPECT_FALSE(fs::exists(dir / "report.html"));
}

}  // namespace
}  // namespace speclab
