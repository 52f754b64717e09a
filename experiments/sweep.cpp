// Sweeps: reading a config and its --set overrides with source locations, the grid and zip axes,
// expansion into points, point ids and shards (see sweep.hpp).
#include "experiments/sweep.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "core/base/error.hpp"

namespace speclab::experiments {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kMaxPoints = 1'000'000;
constexpr size_t kMaxPrefix = 64;

// One sweep axis: a [sweep] list (one key) or a [[sweep.zip]] group (several keys, paired).
struct Axis {
  std::vector<std::string> keys;
  std::vector<const toml::array*> lists;  ///< lists[k] holds the values of keys[k]
  const toml::node* origin = nullptr;     ///< for ordering and messages
  bool zip = false;

  size_t size() const { return lists.empty() ? 0 : lists.front()->size(); }
};

// The documents a sweep was read from; every node pointer below points into them.
struct Documents {
  toml::table config;
  std::vector<std::unique_ptr<toml::table>> sets;
};

struct SetValue {
  std::string key;
  std::string text;  ///< "KEY=VALUE" as given
  const toml::node* node = nullptr;
};

std::vector<std::string> all_keys() {
  std::vector<std::string> keys;
  for (const KeySpec& spec : config_keys()) keys.emplace_back(spec.key);
  return keys;
}

bool before(const toml::node* a, const toml::node* b) {
  const auto& pa = a->source().begin;
  const auto& pb = b->source().begin;
  const bool a_set = a->source().path && a->source().path->starts_with("--set ");
  const bool b_set = b->source().path && b->source().path->starts_with("--set ");
  if (a_set != b_set) return b_set;
  return pa.line != pb.line ? pa.line < pb.line : pa.column < pb.column;
}

std::string read_file(const fs::path& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw InvalidInput(fmt::format("{}: no such file; expected a TOML config", path.string()));
  }
  if (!fs::is_regular_file(status)) {
    throw InvalidInput(
        fmt::format("{}: is not a regular file; expected a TOML config", path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) {
    throw InvalidInput(fmt::format("{}: cannot be read", path.string()));
  }
  return text.str();
}

// Leaves of the config outside [sweep], with unknown keys and misplaced values reported.
void collect_leaves(const toml::table& root, LeafValues& leaves, Diagnostics& d) {
  const std::vector<std::string> keys = all_keys();
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (name == "sweep") continue;
    if (is_config_table(name)) {
      const toml::table* table = node.as_table();
      if (table == nullptr) {
        d.error_at(node,
                   fmt::format("{} is {}; expected a table [{}]", name, render_value(node), name));
        continue;
      }
      for (const auto& [dotted, leaf] : flatten_table(*table)) {
        const std::string full = fmt::format("{}.{}", name, dotted);
        if (find_key(full) == nullptr) {
          d.error_at(*leaf, fmt::format("unknown key {}{}", full, did_you_mean(full, keys)));
        } else {
          leaves[full] = leaf;
        }
      }
      // An empty sub-table ([decode.gamma]) has no leaves but is still a mistake.
      for (const auto& [sub_key, sub] : *table) {
        const std::string full = fmt::format("{}.{}", name, sub_key.str());
        if (sub.is_table() && find_key(full) != nullptr) {
          d.error_at(sub, fmt::format(
                              "{} is a table; expected {}", full,
                              find_key(full)->kind == ValueKind::kString ? "a string" : "a value"));
        }
      }
      continue;
    }
    if (find_key(name) != nullptr && !node.is_table()) {
      leaves[name] = &node;
      continue;
    }
    std::vector<std::string> top = keys;
    top.insert(top.end(), {"target", "draft", "verifier", "sampling", "decode", "sweep"});
    d.error_at(node, fmt::format("unknown key {}{}", name, did_you_mean(name, top)));
  }
}

// One list of sweep values: a non-empty array under a known key.
const toml::array* sweep_list(const std::string& key, const toml::node& node, Diagnostics& d) {
  if (find_key(key) == nullptr) {
    d.error_at(node, fmt::format("unknown key sweep.{}{}", key, did_you_mean(key, all_keys())));
    return nullptr;
  }
  const toml::array* list = node.as_array();
  if (list == nullptr) {
    d.error_at(node, fmt::format("sweep.{} is {}; expected a list of values, e.g. [1, 2, 4]", key,
                                 render_value(node)));
    return nullptr;
  }
  if (list->empty()) {
    d.error_at(node, fmt::format("sweep.{} is []; expected at least one value", key));
    return nullptr;
  }
  return list;
}

std::vector<Axis> collect_axes(const toml::table& root, Diagnostics& d) {
  std::vector<Axis> axes;
  const toml::node* sweep_node = root.get("sweep");
  if (sweep_node == nullptr) return axes;
  const toml::table* sweep = sweep_node->as_table();
  if (sweep == nullptr) {
    d.error_at(*sweep_node,
               fmt::format("sweep is {}; expected a table [sweep]", render_value(*sweep_node)));
    return axes;
  }
  for (const auto& [key, node] : *sweep) {
    const std::string name(key.str());
    if (name == "zip") {
      const toml::array* groups = node.as_array();
      if (groups == nullptr) {
        d.error_at(node, "sweep.zip is not an array of tables; expected [[sweep.zip]] groups");
        continue;
      }
      for (const toml::node& group_node : *groups) {
        const toml::table* group = group_node.as_table();
        if (group == nullptr) {
          d.error_at(group_node, fmt::format("a sweep.zip entry is {}; expected a table of "
                                             "equally long lists",
                                             render_value(group_node)));
          continue;
        }
        Axis axis;
        axis.origin = &group_node;
        axis.zip = true;
        // In file order, as the user wrote them (a TOML table iterates in key order).
        auto leaves = flatten_table(*group);
        std::stable_sort(leaves.begin(), leaves.end(),
                         [](const auto& a, const auto& b) { return before(a.second, b.second); });
        for (const auto& [dotted, leaf] : leaves) {
          if (const toml::array* list = sweep_list(dotted, *leaf, d)) {
            if (!axis.lists.empty() && list->size() != axis.size()) {
              d.error_at(*leaf, fmt::format("sweep.zip: {} has {} values but {} has {}; zipped "
                                            "lists must be equally long",
                                            dotted, list->size(), axis.keys.front(), axis.size()));
              continue;
            }
            axis.keys.push_back(dotted);
            axis.lists.push_back(list);
          }
        }
        if (axis.keys.empty()) {
          if (group->empty()) d.error_at(group_node, "a [[sweep.zip]] group is empty");
          continue;
        }
        axes.push_back(std::move(axis));
      }
      continue;
    }
    const auto add = [&](const std::string& dotted, const toml::node& leaf) {
      if (const toml::array* list = sweep_list(dotted, leaf, d)) {
        axes.push_back(Axis{.keys = {dotted}, .lists = {list}, .origin = &leaf});
      }
    };
    if (const toml::table* table = node.as_table(); table != nullptr && is_config_table(name)) {
      for (const auto& [dotted, leaf] : flatten_table(*table)) {
        add(fmt::format("{}.{}", name, dotted), *leaf);
      }
    } else {
      add(name, node);
    }
  }
  return axes;
}

// Parses "KEY=VALUE": VALUE as TOML, or a bare word as a string.
SetValue parse_set(const std::string& text, Documents& docs, Diagnostics& d) {
  const size_t eq = text.find('=');
  const std::string location = fmt::format("--set {}", text);
  if (eq == std::string::npos || eq == 0) {
    d.error(location, "expected --set KEY=VALUE, e.g. --set decode.gamma=4");
    return {};
  }
  std::string key = text.substr(0, eq);
  key.erase(key.find_last_not_of(" \t") + 1);
  key.erase(0, key.find_first_not_of(" \t"));
  const std::string value = text.substr(eq + 1);
  const std::string bare = key.starts_with("sweep.") ? key.substr(6) : key;
  if (find_key(bare) == nullptr) {
    d.error(location, fmt::format("unknown key {}{}", key, did_you_mean(key, all_keys())));
    return {};
  }
  auto parse = [&](const std::string& toml_value) -> std::unique_ptr<toml::table> {
    try {
      return std::make_unique<toml::table>(toml::parse("v = " + toml_value, location));
    } catch (const toml::parse_error&) {
      return nullptr;
    }
  };
  std::unique_ptr<toml::table> doc = parse(value);
  const bool bare_word = !value.empty() && value.find_first_of("\"'[]{}=\\\n") == std::string::npos;
  if (doc == nullptr && bare_word) doc = parse(fmt::format("\"{}\"", value));
  if (doc == nullptr || doc->size() != 1) {
    d.error(location, fmt::format("{} is not a TOML value; expected e.g. 4, 0.5, true, \"text\" "
                                  "or [1, 2] (quote strings for the shell: {}='\"text\"')",
                                  value, key));
    return {};
  }
  SetValue set{key, text, doc->get("v")};
  docs.sets.push_back(std::move(doc));
  return set;
}

void apply_sets(std::span<const std::string> texts, Documents& docs, LeafValues& leaves,
                std::vector<Axis>& axes, Diagnostics& d) {
  std::vector<SetValue> sets;
  for (const std::string& text : texts) {
    SetValue set = parse_set(text, docs, d);
    if (set.node == nullptr) continue;
    const std::string bare = set.key.starts_with("sweep.") ? set.key.substr(6) : set.key;
    bool duplicate = false;
    for (const SetValue& other : sets) {
      const std::string other_bare =
          other.key.starts_with("sweep.") ? other.key.substr(6) : other.key;
      if (other_bare != bare) continue;
      if (other.key == set.key && render_value(*other.node) == render_value(*set.node)) {
        duplicate = true;  // the same setting twice is harmless
      } else {
        d.error(fmt::format("--set {}", set.text),
                fmt::format("conflicts with --set {}; give {} once", other.text, bare));
        duplicate = true;
      }
    }
    if (!duplicate) sets.push_back(std::move(set));
  }
  for (const SetValue& set : sets) {
    const std::string location = fmt::format("--set {}", set.text);
    const bool to_sweep = set.key.starts_with("sweep.");
    const std::string key = to_sweep ? set.key.substr(6) : set.key;
    Axis* axis = nullptr;
    for (Axis& a : axes) {
      if (std::find(a.keys.begin(), a.keys.end(), key) != a.keys.end()) axis = &a;
    }
    if (axis != nullptr && axis->zip) {
      d.error(location, fmt::format("{} is swept in a [[sweep.zip]] group at {}; remove it from "
                                    "the group in the config to override it",
                                    key, source_location(axis->origin->source())));
      continue;
    }
    if (!to_sweep) {
      if (axis != nullptr) {
        d.error(
            location,
            fmt::format("{} is swept at {}; use --set sweep.{}=[{}] to run only that value", key,
                        source_location(axis->origin->source()), key, render_value(*set.node)));
        continue;
      }
      leaves[key] = set.node;
      continue;
    }
    const toml::array* list = sweep_list(key, *set.node, d);
    if (list == nullptr) continue;
    if (axis != nullptr) {
      axis->lists = {list};
      axis->origin = set.node;
    } else {
      axes.push_back(Axis{.keys = {key}, .lists = {list}, .origin = set.node});
    }
  }
}

ScalarValue scalar_of(const std::string& key, const toml::node& node) {
  const KeySpec* spec = find_key(key);
  if (spec != nullptr && spec->kind == ValueKind::kNumber) {
    if (const auto i = node.value_exact<int64_t>()) return static_cast<double>(*i);
  }
  if (const auto b = node.value_exact<bool>()) return *b;
  if (const auto i = node.value_exact<int64_t>()) return *i;
  if (const auto x = node.value_exact<double>()) return *x;
  if (const auto s = node.value_exact<std::string>()) return *s;
  return render_value(node);
}

// A readable, file-name-safe short form of the swept values: "gamma-4_temperature-0.5".
std::string readable_prefix(const std::vector<SweptValue>& swept, const std::string& name) {
  const auto short_key = [&](const std::string& key) {
    if (key.ends_with(".model")) return key.substr(0, key.size() - 6);
    const std::string last = key.substr(key.rfind('.') + 1);
    const auto same_last = std::count_if(swept.begin(), swept.end(), [&](const SweptValue& v) {
      return v.key.substr(v.key.rfind('.') + 1) == last;
    });
    if (same_last <= 1) return last;
    std::string full = key;
    std::replace(full.begin(), full.end(), '.', '-');
    return full;
  };
  std::string prefix;
  for (const SweptValue& v : swept) {
    if (!prefix.empty()) prefix += '_';
    prefix += short_key(v.key) + "-" + to_string(v.value);
  }
  if (prefix.empty()) prefix = name;
  for (char& c : prefix) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_' || c == '+';
    if (!ok) c = '_';
  }
  if (prefix.size() > kMaxPrefix) prefix.resize(kMaxPrefix);
  return prefix;
}

}  // namespace

std::string to_string(const ScalarValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else {
          return fmt::format("{}", v);
        }
      },
      value);
}

Shard parse_shard(std::string_view text) {
  const auto fail = [&] {
    return InvalidInput(fmt::format(
        "--shard is \"{}\"; expected I/N with integers 1 ≤ I ≤ N, e.g. --shard 2/8", text));
  };
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) throw fail();
  Shard shard;
  const auto parse = [&](std::string_view part, int64_t& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    if (ec != std::errc() || end != part.data() + part.size() || part.empty()) throw fail();
  };
  parse(text.substr(0, slash), shard.index);
  parse(text.substr(slash + 1), shard.count);
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) throw fail();
  return shard;
}

uint64_t fnv1a64(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

Sweep load_sweep(const fs::path& config_path, std::span<const std::string> sets) {
  return parse_sweep(read_file(config_path), config_path, sets);
}

Sweep parse_sweep(std::string_view text, const fs::path& config_path,
                  std::span<const std::string> sets) {
  const std::string source = config_path.string();
  Documents docs;
  try {
    docs.config = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InvalidInput(
        fmt::format("{}: {} (not valid TOML)", source_location(e.source()), e.description()));
  }
  Diagnostics d;
  LeafValues base;
  collect_leaves(docs.config, base, d);
  std::vector<Axis> axes = collect_axes(docs.config, d);
  std::sort(axes.begin(), axes.end(),
            [](const Axis& a, const Axis& b) { return before(a.origin, b.origin); });
  // A key may belong to one axis only.
  std::map<std::string, const Axis*> owner;
  for (Axis& axis : axes) {
    for (size_t k = 0; k < axis.keys.size(); ++k) {
      const auto [it, inserted] = owner.emplace(axis.keys[k], &axis);
      if (!inserted) {
        d.error_at(*axis.lists[k],
                   fmt::format("{} is swept twice (also at {}); sweep each key "
                               "once",
                               axis.keys[k], source_location(it->second->origin->source())));
      }
    }
  }
  apply_sets(sets, docs, base, axes, d);

  Sweep sweep;
  sweep.config_path = config_path;
  int64_t total = 1;
  for (const Axis& axis : axes) {
    sweep.swept_keys.insert(sweep.swept_keys.end(), axis.keys.begin(), axis.keys.end());
    sweep.axes.push_back(fmt::format("{}{} ({} value{})", axis.zip ? "zip " : "",
                                     fmt::join(axis.keys, " + "), axis.size(),
                                     axis.size() == 1 ? "" : "s"));
    total *= static_cast<int64_t>(axis.size());
    if (total > kMaxPoints) {
      throw InvalidInput(
          fmt::format("{}: the sweep has more than {} points ({}); split it into "
                      "several configs",
                      source, kMaxPoints, fmt::join(sweep.axes, " × ")));
    }
  }
  const std::string default_name = config_path.stem().string();
  std::map<std::string, int64_t> ids;
  std::vector<size_t> digit(axes.size(), 0);
  for (int64_t index = 0; index < total; ++index) {
    LeafValues leaves = base;
    std::vector<SweptValue> swept;
    for (size_t a = 0; a < axes.size(); ++a) {
      for (size_t k = 0; k < axes[a].keys.size(); ++k) {
        const toml::node& value = *axes[a].lists[k]->get(digit[a]);
        leaves[axes[a].keys[k]] = &value;
        swept.push_back({axes[a].keys[k], scalar_of(axes[a].keys[k], value)});
      }
    }
    // The last axis varies fastest.
    for (size_t a = axes.size(); a-- > 0;) {
      if (++digit[a] < axes[a].size()) break;
      digit[a] = 0;
    }
    std::optional<RunSettings> settings = resolve_settings(leaves, default_name, source, d);
    if (!settings) continue;
    SweepPoint point;
    point.index = index;
    point.settings = std::move(*settings);
    point.config_toml = settings_to_toml_text(point.settings);
    point.id = fmt::format("{}-{:012x}", readable_prefix(swept, point.settings.name),
                           fnv1a64(settings_id_text(point.settings)) >> 16);
    point.swept = std::move(swept);
    const auto [it, inserted] = ids.emplace(point.id, index);
    if (!inserted) {
      std::vector<std::string> values;
      for (const SweptValue& v : point.swept) values.push_back(v.key + " = " + to_string(v.value));
      d.error(source, fmt::format("sweep points {} and {} are the same experiment ({}); remove the "
                                  "repeated value",
                                  it->second, index, fmt::join(values, ", ")));
    }
    sweep.points.push_back(std::move(point));
  }
  d.throw_if_any(source);
  sweep.name = sweep.points.front().settings.name;
  return sweep;
}

std::vector<const SweepPoint*> shard_points(const Sweep& sweep, const Shard& shard) {
  std::vector<const SweepPoint*> points;
  for (const SweepPoint& p : sweep.points) {
    if (shard.contains(p.index)) points.push_back(&p);
  }
  return points;
}

}  // namespace speclab::experiments
