// Sweeps (docs/architecture.md "experiments/"): a config file plus `--set KEY=VALUE` overrides,
// expanded into points — the Cartesian product of the [sweep] lists and the [[sweep.zip]] groups
// (paired values) — each resolved, validated and named by a deterministic id; and shards, a
// deterministic 1/N of the points for one machine of a cluster.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "experiments/config.hpp"

namespace speclab::experiments {

/// A swept value as stored in result files: typed by the key's schema (numbers are doubles).
using ScalarValue = std::variant<bool, int64_t, double, std::string>;
std::string to_string(const ScalarValue& value);

struct SweptValue {
  std::string key;  ///< dotted key, e.g. "decode.gamma"
  ScalarValue value;
};

/// One point of a sweep.
struct SweepPoint {
  int64_t index = 0;  ///< position in the expansion (the last axis varies fastest), 0-based
  std::string id;     ///< file stem: readable swept values + "-" + 12 hex digits hashing the config
  RunSettings settings;
  std::string config_toml;        ///< the resolved config, every default filled in
  std::vector<SweptValue> swept;  ///< this point's value of each swept key, in axis order
};

/// `--shard I/N`: the points whose index i satisfies i mod N = I - 1.
struct Shard {
  int64_t index = 1;  ///< I in [1, N]
  int64_t count = 1;  ///< N ≥ 1

  bool contains(int64_t point_index) const { return point_index % count == index - 1; }
  bool whole() const { return count == 1; }
};
/// Parses "I/N"; throws InvalidInput naming the text and the expected form.
Shard parse_shard(std::string_view text);

/// A config file expanded into its sweep points.
struct Sweep {
  std::filesystem::path config_path;
  std::string name;                     ///< `name`, or the file's stem
  std::vector<std::string> swept_keys;  ///< in axis order (zip groups' keys together)
  std::vector<std::string> axes;        ///< e.g. "decode.gamma (4 values)", for messages
  std::vector<SweepPoint> points;
};

/// Reads, expands and validates a config. `sets` are "KEY=VALUE" strings: KEY is a schema key
/// (decode.gamma) or sweep.KEY; VALUE parses as TOML (a bare word that is not TOML is taken as a
/// string). Throws InvalidInput listing every error as FILE:LINE:COLUMN: message.
Sweep load_sweep(const std::filesystem::path& config_path, std::span<const std::string> sets = {});
/// load_sweep on a config's text (the file is not read): `config_path` names it in messages and
/// gives the default name.
Sweep parse_sweep(std::string_view text, const std::filesystem::path& config_path,
                  std::span<const std::string> sets = {});

/// The points of a shard, in sweep order.
std::vector<const SweepPoint*> shard_points(const Sweep& sweep, const Shard& shard);

/// 64-bit FNV-1a, the hash of point ids.
uint64_t fnv1a64(std::string_view text);

}  // namespace speclab::experiments
