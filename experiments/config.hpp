// Experiment configs (docs/architecture.md "experiments/"): the TOML schema of one run, its keys
// and types, and the resolution of one sweep point's values into validated RunSettings. Every error
// names FILE:LINE:COLUMN, the key, the value found and the value expected; unknown keys get a "did
// you mean" suggestion. The schema is documented in experiments/README.md.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "core/base/suggest.hpp"
#include "core/decode/decode.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab::experiments {

/// The type a config key holds.
enum class ValueKind { kString, kInteger, kNumber, kBoolean, kIntegerList };

/// One settable key of the schema, e.g. {"decode.gamma", kInteger, "draft tokens per step"}.
struct KeySpec {
  std::string_view key;
  ValueKind kind;
  std::string_view help;
};

/// Every leaf key of the schema, in documentation order.
std::span<const KeySpec> config_keys();
/// The spec of a leaf key, or nullptr.
const KeySpec* find_key(std::string_view key);
/// Tables of the schema: "target", "draft", "verifier", "sampling", "decode" (and "sweep").
bool is_config_table(std::string_view key);

/// "FILE:LINE:COLUMN" of a parsed node; for a --set value, "--set KEY=VALUE".
std::string source_location(const toml::source_region& region);
/// A leaf value as TOML writes it: "lsm-target" quoted, 0.5, [1, 2].
std::string render_value(const toml::node& node);
/// A leaf value for file names and CSV cells: strings unquoted.
std::string plain_value(const toml::node& node);

/// Collects every error of a config so that all are reported at once.
class Diagnostics {
 public:
  /// Records "LOCATION: message" (just the message when LOCATION is empty); a message already
  /// recorded is ignored (sweep points share most of their values, so the same mistake would
  /// otherwise repeat once per point).
  void error(std::string_view location, std::string_view message);
  void error_at(const toml::node& node, std::string_view message);
  /// Adds another collection's errors.
  void merge(const Diagnostics& other);
  bool empty() const { return entries_.empty(); }
  /// The messages in file order (line, column), then those without a line (--set, whole file).
  std::vector<std::string> messages() const;
  /// Throws InvalidInput "SOURCE: N error(s):" followed by one line per error, when any: the
  /// first kMaxReportedErrors in file order, then how many more there are.
  void throw_if_any(std::string_view source) const;

  /// A sweep of a million points can make as many errors (every point a repeat of the first);
  /// beyond this many lines a message only buries the first ones.
  static constexpr size_t kMaxReportedErrors = 50;

 private:
  struct Entry {
    uint64_t line = 0, column = 0;  ///< 0: no position
    std::string text;
  };
  void add(Entry entry);
  std::vector<Entry> entries_;
  std::unordered_set<std::string> texts_;  // of entries_, for a repeat test in O(1), not O(N)
};

enum class PromptSource {
  kRandom,    ///< uniform random tokens from the point's seed
  kCorpus,    ///< held-out text of the n-gram corpus (byte vocabulary only)
  kWorkload,  ///< a chat workload of data/workloads (models with a tokenizer only)
};
std::string_view to_string(PromptSource source);

/// Everything one sweep point runs with, resolved and validated: the decoding engine's config
/// (with the point's base seed and the verifier) and what the runner adds around it.
struct RunSettings {
  std::string name;          ///< label (default: the config file's stem)
  std::string target_model;  ///< a make_model name
  std::string draft_model;   ///< empty: plain decoding only (no [draft] table)
  /// The engine's config; decode.seed is the base seed, and batch k decodes with
  /// decode_config(settings, k), whose seed is batch_seed(seed, k).
  DecodeConfig decode;
  int64_t batch_size = 1;
  int64_t sequences = 1;
  int64_t prompt_length = 16;
  PromptSource prompt_source = PromptSource::kRandom;
  std::string workload;   ///< the workload name when prompt_source is kWorkload
  bool baseline = false;  ///< also run plain decoding of the target, for the speedup

  bool speculative() const { return !draft_model.empty(); }
  bool tree() const { return family_of(decode.verifier) == VerifierFamily::kTree; }
  std::string_view verifier() const { return verifier_name(decode.verifier); }
  int64_t batches() const { return (sequences + batch_size - 1) / batch_size; }
  /// decode.prompt_source as written: "random", "corpus" or "workload:NAME".
  std::string prompt_source_text() const;
};

/// A point's leaf values: dotted key -> the parsed node (owned by the loaded documents, so each
/// keeps its source location). Keys absent here take their defaults.
using LeafValues = std::map<std::string, const toml::node*, std::less<>>;

/// Resolves and validates one point's values; records every problem in `diagnostics` and returns
/// nullopt when there was any. `fallback_location` is used for errors with no node (a missing
/// required key): usually "FILE".
std::optional<RunSettings> resolve_settings(const LeafValues& values, std::string_view default_name,
                                            std::string_view fallback_location,
                                            Diagnostics& diagnostics);

/// The resolved config as a TOML table with every default filled in, and as text (the
/// `config_toml` of a result file), each float the shortest text that reads back as it (0.3,
/// where toml++ writes 0.29999999999999999).
toml::table settings_to_toml(const RunSettings& settings, bool include_name = true);
std::string settings_to_toml_text(const RunSettings& settings, bool include_name = true);
/// What a point's id hashes: toml++'s text of the config without its name. Kept as it was when
/// the ids were introduced, so that the ids of existing results (--resume, merge) stay valid.
std::string settings_id_text(const RunSettings& settings);

/// Leaves of a TOML table as dotted key -> node, in key order.
std::vector<std::pair<std::string, const toml::node*>> flatten_table(const toml::table& table);

/// Vocabulary size of a named model (built once per process with make_model and cached).
int64_t model_vocab(const std::string& name);

/// The decode engine's config for batch k of a point.
DecodeConfig decode_config(const RunSettings& settings, int64_t batch);

/// The seed batch k of a point decodes with: a 64-bit mix of (seed, k), so that batches draw
/// independent uniforms although each numbers its requests from 0.
uint64_t batch_seed(uint64_t seed, int64_t batch);

}  // namespace speclab::experiments
