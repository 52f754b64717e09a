// Unit tests of experiments/sweep (docs/architecture.md "experiments/"): grid and zip expansion in
// a fixed order, deterministic point ids, --set on sweep axes, and shards that partition the
// points.
#include "experiments/sweep.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tests/support/experiment_fixture.hpp"

namespace speclab::experiments {
namespace {

using speclab::testing::fresh_test_dir;
using speclab::testing::invalid_input_message;
using speclab::testing::write_text;
using ::testing::HasSubstr;

constexpr const char* kBase = R"([target]
model = "lsm-tiny-target"
[draft]
model = "lsm-tiny-draft"
)";

Sweep load(const std::string& text, std::vector<std::string> sets = {}) {
  return load_sweep(write_text(fresh_test_dir() / "s.toml", text), sets);
}

std::vector<std::string> values_of(const SweepPoint& p) {
  std::vector<std::string> values;
  for (const SweptValue& v : p.swept) values.push_back(v.key + "=" + to_string(v.value));
  return values;
}

TEST(Sweep, GridIsTheCartesianProductInFileOrderLastAxisFastest) {
  const Sweep sweep = load(std::string(kBase) + R"([sweep]
sampling.temperature = [0.5, 1.0]
decode.gamma = [1, 2, 3]
)");
  ASSERT_EQ(sweep.points.size(), 6u);
  EXPECT_EQ(sweep.swept_keys, (std::vector<std::string>{"sampling.temperature", "decode.gamma"}));
  EXPECT_EQ(values_of(sweep.points[0]),
            (std::vector<std::string>{"sampling.temperature=0.5", "decode.gamma=1"}));
  EXPECT_EQ(values_of(sweep.points[1]),
            (std::vector<std::string>{"sampling.temperature=0.5", "decode.gamma=2"}));
  EXPECT_EQ(values_of(sweep.points[5]),
            (std::vector<std::string>{"sampling.temperature=1", "decode.gamma=3"}));
  for (size_t i = 0; i < sweep.points.size(); ++i) EXPECT_EQ(sweep.points[i].index, (int64_t)i);
  EXPECT_EQ(sweep.points[4].settings.decode.gamma, 2);
  EXPECT_EQ(sweep.points[4].settings.decode.sampling.temperature, 1.0);
}

TEST(Sweep, ZipPairsValuesAndMultipliesWithTheGrid) {
  const Sweep sweep = load(R"([decode]
max_new_tokens = 8
[[sweep.zip]]
target.model = ["lsm-tiny-target", "ngram-3"]
draft.model = ["lsm-tiny-draft", "ngram-1"]
[sweep]
"decode.gamma" = [2, 4]
)");
  ASSERT_EQ(sweep.points.size(), 4u);
  std::set<std::pair<std::string, std::string>> pairs;
  for (const SweepPoint& p : sweep.points) {
    pairs.emplace(p.settings.target_model, p.settings.draft_model);
  }
  EXPECT_EQ(pairs, (std::set<std::pair<std::string, std::string>>{
                       {"lsm-tiny-target", "lsm-tiny-draft"}, {"ngram-3", "ngram-1"}}));
}

TEST(Sweep, ZipListsMustBeEquallyLongAndKeysSweptOnce) {
  const std::string message = invalid_input_message([&] {
    load(std::string(kBase) + R"([[sweep.zip]]
decode.gamma = [1, 2]
seed = [1]
[sweep]
decode.gamma = [3]
sampling.top_k = 5
sampling.min_p = []
)");
  });
  EXPECT_THAT(message, HasSubstr("zipped lists must be equally long"));
  EXPECT_THAT(message, HasSubstr("decode.gamma is swept twice"));
  EXPECT_THAT(message, HasSubstr("sweep.sampling.top_k is 5; expected a list of values"));
  EXPECT_THAT(message, HasSubstr("sweep.sampling.min_p is []; expected at least one value"));
}

TEST(Sweep, ValuesInSweepListsAreValidatedAtTheirOwnPosition) {
  const std::string message = invalid_input_message(
      [&] { load(std::string(kBase) + "[sweep]\ndecode.gamma = [1, 0, 2]\n"); });
  EXPECT_THAT(message,
              HasSubstr("s.toml:6:20: decode.gamma is 0; expected an integer in [1, 256]"));
}

TEST(Sweep, IdsAreDeterministicReadableAndIndependentOfOtherPoints) {
  const std::string one = std::string(kBase) + "[sweep]\ndecode.gamma = [2, 4]\n";
  const std::string two = std::string(kBase) + "[sweep]\ndecode.gamma = [1, 2, 4, 8]\n";
  const Sweep a = load(one), b = load(one), c = load(two);
  ASSERT_EQ(a.points.size(), 2u);
  EXPECT_EQ(a.points[0].id, b.points[0].id);
  EXPECT_THAT(a.points[0].id, ::testing::MatchesRegex("gamma-2-[0-9a-f]{12}"));
  EXPECT_NE(a.points[0].id, a.points[1].id);
  // Adding values to a sweep keeps the ids of the old points, so --resume finds them.
  EXPECT_EQ(a.points[0].id, c.points[1].id);
  EXPECT_EQ(a.points[1].id, c.points[2].id);
  // The name is a label, not part of the experiment: only the readable part of the id differs
  // when there is no sweep.
  const Sweep named = load(std::string("name = \"n1\"\n") + kBase);
  EXPECT_THAT(named.points[0].id, ::testing::StartsWith("n1-"));
}

TEST(Sweep, RepeatedValuesAreReported) {
  EXPECT_THAT(
      invalid_input_message([&] { load(std::string(kBase) + "[sweep]\ndecode.gamma = [2, 2]\n"); }),
      HasSubstr("sweep points 0 and 1 are the same experiment"));
}

TEST(Sweep, SetCanReplaceOrAddAnAxis) {
  const std::string text = std::string(kBase) + "[sweep]\ndecode.gamma = [1, 2, 4]\n";
  const Sweep replaced = load(text, {"sweep.decode.gamma=[8]"});
  ASSERT_EQ(replaced.points.size(), 1u);
  EXPECT_EQ(replaced.points[0].settings.decode.gamma, 8);
  const Sweep added = load(text, {"sweep.seed=[1, 2]"});
  EXPECT_EQ(added.points.size(), 6u);
  EXPECT_EQ(added.swept_keys.back(), "seed");
  EXPECT_THAT(invalid_input_message([&] { load(text, {"sweep.decode.gamma=3"}); }),
              HasSubstr("expected a list of values"));
}

TEST(Sweep, ShardsPartitionThePoints) {
  const Sweep sweep = load(std::string(kBase) + R"([sweep]
decode.gamma = [1, 2, 3, 4, 5, 6, 7]
)");
  std::multiset<int64_t> seen;
  for (int64_t i = 1; i <= 3; ++i) {
    const auto points = shard_points(sweep, parse_shard(fmt::format("{}/3", i)));
    EXPECT_GE(points.size(), 2u);
    EXPECT_LE(points.size(), 3u);
    for (const SweepPoint* p : points) seen.insert(p->index);
  }
  EXPECT_EQ(seen, (std::multiset<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(shard_points(sweep, parse_shard("1/1")).size(), 7u);
}

TEST(Sweep, ParseShardRejectsBadForms) {
  EXPECT_EQ(parse_shard("2/5").index, 2);
  EXPECT_EQ(parse_shard("2/5").count, 5);
  for (const char* bad : {"0/3", "4/3", "1", "a/b", "1/0", "-1/2", "1/2x", ""}) {
    EXPECT_THAT(invalid_input_message([&] { parse_shard(bad); }),
                HasSubstr("expected I/N with integers 1 ≤ I ≤ N"))
        << bad;
  }
}

TEST(Sweep, TextLoadsLikeItsFile) {
  // parse_sweep is load_sweep without the file (the config fuzzer's entry): same points, ids, and
  // errors naming the path it is given.
  const std::string text = std::string(kBase) + "[sweep]\ndecode.gamma = [1, 2]\n";
  const auto path = write_text(fresh_test_dir() / "s.toml", text);
  const Sweep from_file = load_sweep(path, std::vector<std::string>{"seed=3"});
  const Sweep from_text = parse_sweep(text, path, std::vector<std::string>{"seed=3"});
  ASSERT_EQ(from_text.points.size(), 2u);
  EXPECT_EQ(from_text.name, from_file.name);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(from_text.points[i].id, from_file.points[i].id);
    EXPECT_EQ(from_text.points[i].config_toml, from_file.points[i].config_toml);
  }
  EXPECT_THAT(invalid_input_message([] { parse_sweep("[decode]\ngamma = 0\n", "x/y.toml"); }),
              HasSubstr("x/y.toml:2:9: decode.gamma is 0"));
}

// The points a config expands to, counted from its TOML alone by the rule experiments/README.md
// states: the product of the [sweep] lists' lengths, each [[sweep.zip]] table counting once (its
// lists advance together).
int64_t points_from_the_toml(const std::filesystem::path& path) {
  const toml::table config = toml::parse_file(path.string());
  const toml::table* sweep = config["sweep"].as_table();
  if (sweep == nullptr) return 1;
  int64_t points = 1;
  std::function<void(const toml::table&)> axes = [&](const toml::table& table) {
    for (const auto& [key, node] : table) {
      if (const toml::table* nested = node.as_table()) {
        axes(*nested);
      } else if (const toml::array* list = node.as_array(); list && key.str() != "zip") {
        points *= static_cast<int64_t>(list->size());
      }
    }
  };
  axes(*sweep);
  if (const toml::array* zips = (*sweep)["zip"].as_array()) {
    // A zip table's keys are dotted (target.model), so its first list may sit in nested tables.
    std::function<int64_t(const toml::table&)> first_list = [&](const toml::table& table) {
      const toml::node& value = table.begin()->second;
      if (const toml::table* nested = value.as_table()) return first_list(*nested);
      return static_cast<int64_t>(value.as_array()->size());
    };
    for (const toml::node& zip : *zips) points *= first_list(*zip.as_table());
  }
  return points;
}

// experiments/README.md's table of shipped configs lists exactly the files of experiments/configs/,
// each with the number of points its sweep expands to, so that the table cannot go stale.
TEST(Sweep, ShippedConfigsTableMatchesTheConfigsDirectory) {
  const std::filesystem::path source(SPECLAB_SOURCE_DIR);
  const std::string readme = speclab::testing::read_text(source / "experiments" / "README.md");
  const size_t section = readme.find("## Shipped configs");
  ASSERT_NE(section, std::string::npos);
  const size_t next = readme.find("\n## ", section + 1);
  const std::string table = readme.substr(section, next - section);
  std::map<std::string, int64_t> listed;
  const std::regex row(R"(\| `([a-z0-9_]+\.toml)` \|[^|]*\| ([0-9]+) \|)");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row);
       it != std::sregex_iterator(); ++it) {
    listed[(*it)[1]] = std::stoll((*it)[2]);
  }
  std::set<std::string> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(source / "experiments" / "configs")) {
    if (entry.path().extension() == ".toml") files.insert(entry.path().filename().string());
  }
  std::set<std::string> names;
  for (const auto& [name, points] : listed) names.insert(name);
  EXPECT_EQ(names, files) << "experiments/README.md \"Shipped configs\" and experiments/configs/";
  for (const auto& [name, points] : listed) {
    if (!files.contains(name)) continue;
    const std::filesystem::path path = source / "experiments" / "configs" / name;
    EXPECT_EQ(points_from_the_toml(path), points) << name;
    // Where the config's models can be built here (a GGUF target needs its file fetched), the
    // expansion itself agrees; the count above does not need the models.
    try {
      EXPECT_EQ(static_cast<int64_t>(load_sweep(path).points.size()), points) << name;
    } catch (const InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr("cannot be built")) << name;
    }
  }
}

}  // namespace
}  // namespace speclab::experiments
