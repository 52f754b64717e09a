// Experiment configs: the key schema, typed reads with source locations, range and cross-field
// checks, and the resolved TOML text of a point (see config.hpp).
#include "experiments/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/base/error.hpp"
#include "core/base/hash.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/ngram.hpp"
#include "experiments/workload.hpp"

namespace speclab::experiments {
namespace {

constexpr std::array<KeySpec, 25> kKeys = {{
    {"name", ValueKind::kString, "label of the experiment; default: the config file's stem"},
    {"seed", ValueKind::kInteger, "base seed, ≥ 0; batch k decodes with a mix of (seed, k)"},
    {"target.model", ValueKind::kString, "target model name (speclab make_model), required"},
    {"draft.model", ValueKind::kString, "draft model name; no [draft] table: plain decoding only"},
    {"draft.temperature", ValueKind::kNumber, "draft's temperature; default sampling.temperature"},
    {"draft.top_k", ValueKind::kInteger, "draft's top-k; default sampling.top_k"},
    {"draft.top_p", ValueKind::kNumber, "draft's top-p; default sampling.top_p"},
    {"draft.min_p", ValueKind::kNumber, "draft's min-p; default sampling.min_p"},
    {"verifier.method", ValueKind::kString,
     "token | greedy | lenient | block | typical | tree-iid | tree-swor | tree-topk | "
     "tree-topk-softmax-q | kseq | traversal | coupled | sampled-match; default token"},
    {"verifier.leniency", ValueKind::kNumber, "l in (0, 1] of lenient verification; default 1"},
    {"verifier.typical_epsilon", ValueKind::kNumber, "ε > 0 of typical acceptance; default 0.09"},
    {"verifier.typical_delta", ValueKind::kNumber, "δ > 0 of typical acceptance; default 0.3"},
    {"sampling.temperature", ValueKind::kNumber, "≥ 0, 0 = greedy; default 1"},
    {"sampling.top_k", ValueKind::kInteger, "≥ 0, 0 = off; default 0"},
    {"sampling.top_p", ValueKind::kNumber, "in (0, 1]; default 1"},
    {"sampling.min_p", ValueKind::kNumber, "in [0, 1]; default 0"},
    {"decode.gamma", ValueKind::kInteger, "draft tokens per step, 1..256; default 4"},
    {"decode.branches", ValueKind::kIntegerList,
     "tree verifiers: candidates per depth, e.g. [2, 2, 1]; the depth plays γ's role"},
    {"decode.batch_size", ValueKind::kInteger, "requests decoded together; default 1"},
    {"decode.sequences", ValueKind::kInteger, "requests in all; default batch_size"},
    {"decode.max_new_tokens", ValueKind::kInteger, "tokens generated per request; default 64"},
    {"decode.prompt_length", ValueKind::kInteger, "prompt tokens per request; default 16"},
    {"decode.prompt_source", ValueKind::kString,
     "random | corpus | workload:NAME (data/workloads); default random"},
    {"decode.baseline", ValueKind::kBoolean, "also run plain decoding for the speedup"},
    {"decode.sampling", ValueKind::kString,
     "inverse-cdf | gumbel: how plain decoding (and the match verifiers' target) draws a token; "
     "default gumbel for verifier coupled, else inverse-cdf"},
}};

constexpr std::array<std::string_view, 6> kTables = {"target",   "draft",  "verifier",
                                                     "sampling", "decode", "sweep"};

constexpr int64_t kMaxGamma = 256;
constexpr int64_t kMaxCount = 1'000'000;
constexpr int64_t kMaxTokensPerPoint = 1'000'000'000;
constexpr int64_t kMaxTreeNodes = 4096;  // as core/decode/decode_tree.cpp

std::string_view kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kString:
      return "a string";
    case ValueKind::kInteger:
      return "an integer";
    case ValueKind::kNumber:
      return "a number";
    case ValueKind::kBoolean:
      return "a boolean (true or false)";
    case ValueKind::kIntegerList:
      return "a list of integers";
  }
  return "a value";
}

std::string_view node_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// Typed access to one point's leaves; every type or range problem goes to the diagnostics.
class LeafReader {
 public:
  LeafReader(const LeafValues& values, std::string_view fallback, Diagnostics& diagnostics)
      : values_(values), fallback_(fallback), diagnostics_(diagnostics) {}

  const toml::node* node(std::string_view key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? nullptr : it->second;
  }

  void error(std::string_view key, std::string_view message) const {
    if (const toml::node* n = node(key)) {
      diagnostics_.error_at(*n, message);
    } else {
      diagnostics_.error(fallback_, message);
    }
  }

  template <typename T>
  std::optional<T> read(std::string_view key) const {
    const toml::node* n = node(key);
    if (n == nullptr) return std::nullopt;
    std::optional<T> value;
    ValueKind kind = ValueKind::kString;
    if constexpr (std::is_same_v<T, std::string>) {
      value = n->value_exact<std::string>();
    } else if constexpr (std::is_same_v<T, int64_t>) {
      kind = ValueKind::kInteger;
      value = n->value_exact<int64_t>();
    } else if constexpr (std::is_same_v<T, double>) {
      kind = ValueKind::kNumber;
      if (n->is_integer()) {
        value = static_cast<double>(*n->value_exact<int64_t>());
      } else {
        value = n->value_exact<double>();
      }
    } else {
      kind = ValueKind::kBoolean;
      value = n->value_exact<bool>();
    }
    if (!value) {
      diagnostics_.error_at(*n, fmt::format("{} is {} ({}); expected {}", key, render_value(*n),
                                            node_type_name(*n), kind_name(kind)));
    }
    return value;
  }

  int64_t integer(std::string_view key, int64_t fallback, int64_t lo, int64_t hi) const {
    const std::optional<int64_t> value = read<int64_t>(key);
    if (!value) return fallback;
    if (*value < lo || *value > hi) {
      error(key, fmt::format("{} is {}; expected an integer in [{}, {}]", key, *value, lo, hi));
      return fallback;
    }
    return *value;
  }

  // A finite number in [lo, hi] (or (lo, hi] when lo_open).
  double number(std::string_view key, double fallback, double lo, bool lo_open, double hi) const {
    const std::optional<double> value = read<double>(key);
    if (!value) return fallback;
    const bool ok = std::isfinite(*value) && (lo_open ? *value > lo : *value >= lo) && *value <= hi;
    if (!ok) {
      const std::string range =
          std::isinf(hi) ? fmt::format("a finite number {} {}", lo_open ? ">" : "≥", lo)
                         : fmt::format("a number in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
      error(key, fmt::format("{} is {}; expected {}", key, render_value(*node(key)), range));
      return fallback;
    }
    return *value;
  }

  std::optional<std::string> choice(std::string_view key,
                                    const std::vector<std::string>& choices) const {
    const std::optional<std::string> value = read<std::string>(key);
    if (!value) return std::nullopt;
    if (std::find(choices.begin(), choices.end(), *value) == choices.end()) {
      error(key, fmt::format("{} is \"{}\"; expected one of: {}{}", key, *value,
                             fmt::join(choices, ", "), did_you_mean(*value, choices)));
      return std::nullopt;
    }
    return value;
  }

 private:
  const LeafValues& values_;
  std::string_view fallback_;
  Diagnostics& diagnostics_;
};

SamplingParams read_sampling(const LeafReader& r, std::string_view prefix,
                             const SamplingParams& defaults) {
  const auto key = [&](std::string_view field) { return fmt::format("{}.{}", prefix, field); };
  const double inf = std::numeric_limits<double>::infinity();
  SamplingParams p;
  p.temperature = r.number(key("temperature"), defaults.temperature, 0.0, false, inf);
  p.top_k = r.integer(key("top_k"), defaults.top_k, 0, std::numeric_limits<int32_t>::max());
  p.top_p = r.number(key("top_p"), defaults.top_p, 0.0, true, 1.0);
  p.min_p = r.number(key("min_p"), defaults.min_p, 0.0, false, 1.0);
  return p;
}

}  // namespace

std::span<const KeySpec> config_keys() { return kKeys; }

const KeySpec* find_key(std::string_view key) {
  for (const KeySpec& spec : kKeys) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

bool is_config_table(std::string_view key) {
  return std::find(kTables.begin(), kTables.end(), key) != kTables.end();
}

std::string source_location(const toml::source_region& region) {
  const std::string path = region.path ? *region.path : std::string("<config>");
  if (path.starts_with("--set ")) return path;
  return fmt::format("{}:{}:{}", path, region.begin.line, region.begin.column);
}

std::string render_value(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::string:
      return fmt::format("\"{}\"", *node.value_exact<std::string>());
    case toml::node_type::integer:
      return fmt::format("{}", *node.value_exact<int64_t>());
    case toml::node_type::floating_point:
      return fmt::format("{}", *node.value_exact<double>());
    case toml::node_type::boolean:
      return *node.value_exact<bool>() ? "true" : "false";
    case toml::node_type::array: {
      std::vector<std::string> parts;
      for (const toml::node& element : *node.as_array()) parts.push_back(render_value(element));
      return fmt::format("[{}]", fmt::join(parts, ", "));
    }
    default: {
      std::ostringstream out;
      node.visit([&](const auto& n) { out << toml::toml_formatter{n}; });
      std::string text = out.str();
      std::replace(text.begin(), text.end(), '\n', ' ');
      return text;
    }
  }
}

std::string plain_value(const toml::node& node) {
  if (const auto s = node.value_exact<std::string>()) return *s;
  return render_value(node);
}

void Diagnostics::add(Entry entry) {
  if (!texts_.insert(entry.text).second) return;
  entries_.push_back(std::move(entry));
}

void Diagnostics::error(std::string_view location, std::string_view message) {
  add({0, 0, location.empty() ? std::string(message) : fmt::format("{}: {}", location, message)});
}

void Diagnostics::error_at(const toml::node& node, std::string_view message) {
  const toml::source_region& region = node.source();
  const bool from_set = region.path && region.path->starts_with("--set ");
  add({from_set ? 0 : region.begin.line, from_set ? 0 : region.begin.column,
       fmt::format("{}: {}", source_location(region), message)});
}

void Diagnostics::merge(const Diagnostics& other) {
  for (const Entry& e : other.entries_) add(e);
}

std::vector<std::string> Diagnostics::messages() const {
  std::vector<Entry> sorted = entries_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry& a, const Entry& b) {
    const auto key = [](const Entry& e) {
      return std::pair{e.line == 0 ? UINT64_MAX : e.line, e.column};
    };
    return key(a) < key(b);
  });
  std::vector<std::string> messages;
  for (const Entry& e : sorted) messages.push_back(e.text);
  return messages;
}

void Diagnostics::throw_if_any(std::string_view source) const {
  if (entries_.empty()) return;
  std::vector<std::string> lines = messages();
  if (lines.size() > kMaxReportedErrors) {
    const size_t more = lines.size() - kMaxReportedErrors;
    lines.resize(kMaxReportedErrors);
    lines.push_back(fmt::format("… and {} more error{}", more, more == 1 ? "" : "s"));
  }
  throw InvalidInput(fmt::format("{}: {} error{}:\n{}", source, entries_.size(),
                                 entries_.size() == 1 ? "" : "s", fmt::join(lines, "\n")));
}

std::string_view to_string(PromptSource source) {
  switch (source) {
    case PromptSource::kCorpus:
      return "corpus";
    case PromptSource::kWorkload:
      return "workload";
    case PromptSource::kRandom:
      break;
  }
  return "random";
}

std::string RunSettings::prompt_source_text() const {
  if (prompt_source == PromptSource::kWorkload) return fmt::format("workload:{}", workload);
  return std::string(to_string(prompt_source));
}

namespace {

// [target] and [draft]: the model names, checked against the model registry.
void read_models(const LeafReader& r, RunSettings& s) {
  const std::vector<std::string> models = model_names();
  const auto model = [&](std::string_view key) -> std::string {
    const std::optional<std::string> name = r.read<std::string>(key);
    if (!name) return {};
    if (!is_model_name(*name)) {
      r.error(key, fmt::format("{} is \"{}\"; expected a model name{}; known models: {}", key,
                               *name, did_you_mean(*name, models), fmt::join(models, ", ")));
      return {};
    }
    return *name;
  };
  s.target_model = model("target.model");
  if (r.node("target.model") == nullptr) {
    r.error("target.model",
            fmt::format("target.model is missing; expected [target] model = \"NAME\" with NAME "
                        "one of: {}",
                        fmt::join(models, ", ")));
  }
  s.draft_model = model("draft.model");
}

// decode.branches: a non-empty list of integers ≥ 1 (read whatever the verifier, so that a sweep
// may set it for every point; only a tree verifier keeps it).
std::vector<int64_t> read_branches(const LeafReader& r) {
  std::vector<int64_t> branches;
  const toml::node* node = r.node("decode.branches");
  if (node == nullptr) return branches;
  const toml::array* list = node->as_array();
  bool ok = list != nullptr && !list->empty();
  if (ok) {
    for (const toml::node& k : *list) {
      const auto value = k.value_exact<int64_t>();
      ok = ok && value.has_value() && *value >= 1;
      if (value) branches.push_back(*value);
    }
  }
  if (!ok) {
    branches.clear();
    r.error("decode.branches", fmt::format("decode.branches is {}; expected a non-empty list of "
                                           "integers ≥ 1, e.g. [2, 2, 1]",
                                           render_value(*node)));
  }
  return branches;
}

// [verifier]: the method and every parameter of the registry (each range-checked whichever
// method is chosen, so a sweep may set them for every point); the spec keeps what it reads.
VerifierSpec read_verifier(const LeafReader& r) {
  std::string name(verifier_name(VerifierSpec{}));
  if (const auto method = r.choice("verifier.method", verifier_names())) name = *method;
  const auto parameter = [&](std::string_view key) {
    const VerifierParameter& p = verifier_parameter(key);
    return r.number(fmt::format("verifier.{}", key), p.default_value, p.lower, true, p.upper);
  };
  const double leniency = parameter("leniency");
  const double epsilon = parameter("typical_epsilon");
  const double delta = parameter("typical_delta");
  std::vector<int64_t> branches = read_branches(r);
  VerifierSpec spec = make_verifier(name);
  if (auto* chain = std::get_if<ChainVerifier>(&spec)) chain->leniency = leniency;
  if (auto* typical = std::get_if<TypicalVerifier>(&spec)) *typical = {epsilon, delta};
  if (auto* tree = std::get_if<TreeVerifier>(&spec)) tree->branches = std::move(branches);
  return spec;
}

// [sampling] and the draft's pipeline in [draft] (which defaults to the target's).
void read_pipelines(const LeafReader& r, RunSettings& s) {
  s.decode.sampling = read_sampling(r, "sampling", SamplingParams{});
  s.decode.draft_sampling = read_sampling(r, "draft", s.decode.sampling);
  if (r.node("draft.model") != nullptr) return;
  for (std::string_view key : {"draft.temperature", "draft.top_k", "draft.top_p", "draft.min_p"}) {
    if (r.node(key) != nullptr) {
      r.error(key, fmt::format("{} is set but draft.model is missing; add draft.model to "
                               "[draft] or remove {}",
                               key, key));
    }
  }
}

// [decode]: lengths, counts and the prompt source; the defaults are DecodeConfig's and
// RunSettings'.
void read_decode(const LeafReader& r, RunSettings& s) {
  s.decode.gamma = r.integer("decode.gamma", s.decode.gamma, 1, kMaxGamma);
  s.batch_size = r.integer("decode.batch_size", s.batch_size, 1, kMaxCount);
  s.sequences = r.integer("decode.sequences", s.batch_size, 1, kMaxCount);
  s.decode.max_new_tokens =
      r.integer("decode.max_new_tokens", s.decode.max_new_tokens, 1, kMaxCount);
  s.prompt_length = r.integer("decode.prompt_length", s.prompt_length, 1, kMaxCount);
  std::vector<std::string> sources = {"random", "corpus"};
  for (const std::string& w : workload_names()) sources.push_back(fmt::format("workload:{}", w));
  if (const auto source = r.choice("decode.prompt_source", sources)) {
    if (source->starts_with("workload:")) {
      s.prompt_source = PromptSource::kWorkload;
      s.workload = source->substr(std::string_view("workload:").size());
    } else {
      s.prompt_source = *source == "corpus" ? PromptSource::kCorpus : PromptSource::kRandom;
    }
  }
  s.baseline = r.read<bool>("decode.baseline").value_or(false);
  const auto* match = std::get_if<MatchVerifier>(&s.decode.verifier);
  if (const auto rule = r.choice("decode.sampling", {"inverse-cdf", "gumbel"})) {
    s.decode.sampling_rule = parse_token_sampling(*rule, "decode.sampling");
    try {
      if (match != nullptr) {
        validate_match_sampling(match->method, *s.decode.sampling_rule, "decode.sampling");
      }
    } catch (const InvalidInput& e) {
      r.error("decode.sampling", e.what());
    }
  }
}

// Constraints between fields that need only the point's own values.
void check_run_shape(const LeafReader& r, const RunSettings& s) {
  if (s.batch_size > s.sequences) {
    r.error("decode.batch_size",
            fmt::format("decode.batch_size is {} but decode.sequences is {}; expected "
                        "batch_size ≤ sequences",
                        s.batch_size, s.sequences));
  }
  if (s.sequences * s.decode.max_new_tokens > kMaxTokensPerPoint) {
    r.error("decode.max_new_tokens",
            fmt::format("decode.sequences × decode.max_new_tokens is {} × {}; expected at most "
                        "{} tokens per sweep point",
                        s.sequences, s.decode.max_new_tokens, kMaxTokensPerPoint));
  }
  if (s.baseline && !s.speculative()) {
    r.error("decode.baseline",
            "decode.baseline = true needs a [draft]: without one the run is plain decoding "
            "already");
  }
  if (!s.speculative() || !s.tree()) return;
  const std::vector<int64_t>& branches = std::get<TreeVerifier>(s.decode.verifier).branches;
  if (branches.empty()) {
    r.error("verifier.method", fmt::format("verifier.method \"{}\" is a tree verifier and needs "
                                           "decode.branches, the candidates per depth, e.g. "
                                           "[2, 2, 1]",
                                           s.verifier()));
  }
  if (tree_node_count(branches) > kMaxTreeNodes) {
    r.error("decode.branches",
            fmt::format("decode.branches {} makes a tree of more than {} nodes",
                        render_value(*r.node("decode.branches")), kMaxTreeNodes));
  }
}

// A model's vocabulary size and whether it has a tokenizer. Building it can fail for a valid name
// (a GGUF file not fetched, a layerskip layer out of range); that is reported at the key, beside
// the other errors, instead of escaping without a location.
struct ModelFacts {
  int64_t vocab = 0;
  bool has_tokenizer = false;
};
std::optional<ModelFacts> model_facts(const LeafReader& r, std::string_view key,
                                      const std::string& name) {
  try {
    return ModelFacts{model_vocab(name), !tokenizer_file(name).empty()};
  } catch (const InvalidInput& e) {
    r.error(key, fmt::format("{} \"{}\" cannot be built: {}", key, name, e.what()));
    return std::nullopt;
  }
}

// Constraints that need the models: vocabularies, tokenizers, and the pipelines' validity.
void check_against_models(const LeafReader& r, const RunSettings& s) {
  const std::optional<ModelFacts> target = model_facts(r, "target.model", s.target_model);
  if (!target) return;
  const int64_t target_vocab = target->vocab;
  if (s.speculative()) {
    const std::optional<ModelFacts> draft = model_facts(r, "draft.model", s.draft_model);
    if (!draft) return;
    const int64_t draft_vocab = draft->vocab;
    if (crosses_vocabularies(s.decode.verifier)) {
      // A draft of another vocabulary: the two must have vocabularies a map can join.
      try {
        const auto pair =
            vocabularies_to_join(s.target_model, target_vocab, s.draft_model, draft_vocab);
        if (pair && vocab_rule_of(s.decode.verifier) == VocabRule::kStringRejection &&
            single_byte_ids(*pair->second.vocabulary).empty()) {
          r.error("draft.model",
                  fmt::format("verifier.method \"slrs\" decodes with a draft whose tokens are "
                              "single bytes; draft.model \"{}\" has tokens of several bytes "
                              "(use tli or slem)",
                              s.draft_model));
        }
      } catch (const InvalidInput& e) {
        r.error("draft.model", e.what());
      }
    } else if (draft_vocab != target_vocab) {
      r.error("draft.model",
              fmt::format("draft.model \"{}\" has vocabulary size {} but target.model \"{}\" "
                          "has {}; speculative decoding needs the same vocabulary (a draft of "
                          "another vocabulary decodes with verifier.method tli, slem or slrs)",
                          s.draft_model, draft_vocab, s.target_model, target_vocab));
    }
  }
  if (const auto* tree = std::get_if<TreeVerifier>(&s.decode.verifier)) {
    for (const int64_t k : tree->branches) {
      if (k > target_vocab) {
        r.error("decode.branches",
                fmt::format("decode.branches holds {}; expected candidates per node ≤ the "
                            "vocabulary size {}",
                            k, target_vocab));
        break;
      }
    }
  }
  const bool has_tokenizer = target->has_tokenizer;
  if (s.prompt_source == PromptSource::kCorpus && target_vocab != kByteVocab) {
    r.error("decode.prompt_source",
            fmt::format("decode.prompt_source is \"corpus\" but target.model \"{}\" has "
                        "vocabulary size {}; corpus prompts are bytes and need a model of "
                        "vocabulary {} (ngram-*, prompt-lookup); use {}",
                        s.target_model, target_vocab, kByteVocab,
                        has_tokenizer ? "\"workload:NAME\" (a chat workload) or \"random\""
                                      : "\"random\""));
  }
  if (s.prompt_source == PromptSource::kWorkload && !has_tokenizer) {
    r.error("decode.prompt_source",
            fmt::format("decode.prompt_source is \"{}\" but target.model \"{}\" has no "
                        "tokenizer (vocabulary size {}); chat workloads need a model with one, "
                        "such as smollm2-135m; use \"{}\"",
                        s.prompt_source_text(), s.target_model, target_vocab,
                        target_vocab == kByteVocab ? "corpus" : "random"));
  }
  for (const auto& [key, params] :
       {std::pair{"sampling", s.decode.sampling}, std::pair{"draft", s.decode.draft_sampling}}) {
    try {
      validate_sampling_params(params);
    } catch (const InvalidInput& e) {
      r.error(fmt::format("{}.temperature", key), fmt::format("[{}]: {}", key, e.what()));
    }
  }
}

// The name labels the experiment and is its default output directory, results/NAME: a path there
// would write elsewhere (name = "/" made it the root) and a control character garbles listings.
void check_name(const LeafReader& r, const std::string& name) {
  if (name.empty()) {
    r.error("name", "name is \"\"; expected a non-empty label");
    return;
  }
  const auto control = [](char c) { return (c >= 0 && c < 0x20) || c == 0x7f; };
  const bool one_component =
      name != "." && name != ".." && std::none_of(name.begin(), name.end(), [&](char c) {
        return c == '/' || c == '\\' || control(c);
      });
  if (one_component) return;
  std::string shown;  // control characters escaped, so that the message stays one line
  for (const char c : name) {
    shown +=
        control(c) ? fmt::format("\\x{:02x}", static_cast<unsigned char>(c)) : std::string(1, c);
  }
  r.error("name", fmt::format("name is \"{}\"; expected a label that names one directory under "
                              "results/ (no / or \\, no control characters, not . or ..)",
                              shown));
}

}  // namespace

std::optional<RunSettings> resolve_settings(const LeafValues& values, std::string_view default_name,
                                            std::string_view fallback_location,
                                            Diagnostics& diagnostics) {
  Diagnostics local;
  const LeafReader r(values, fallback_location, local);
  RunSettings s;
  s.name = r.read<std::string>("name").value_or(std::string(default_name));
  check_name(r, s.name);
  s.decode.seed =
      static_cast<uint64_t>(r.integer("seed", 0, 0, std::numeric_limits<int64_t>::max()));
  read_models(r, s);
  s.decode.verifier = read_verifier(r);
  read_pipelines(r, s);
  read_decode(r, s);
  // Cross-field constraints, once every field is known to be well formed.
  if (local.empty()) {
    check_run_shape(r, s);
    check_against_models(r, s);
  }
  diagnostics.merge(local);
  if (!local.empty()) return std::nullopt;
  return s;
}

namespace {

// The value of a registry parameter in a spec: its own where the verifier reads it, else the
// default (so that points differing only in a parameter their verifier ignores are one point).
double parameter_value(const VerifierSpec& spec, std::string_view key) {
  if (const auto* chain = std::get_if<ChainVerifier>(&spec); chain && key == "leniency") {
    return chain->leniency;
  }
  if (const auto* typical = std::get_if<TypicalVerifier>(&spec)) {
    if (key == "typical_epsilon") return typical->epsilon;
    if (key == "typical_delta") return typical->delta;
  }
  return verifier_parameter(key).default_value;
}

}  // namespace

toml::table settings_to_toml(const RunSettings& s, bool include_name) {
  const DecodeConfig& d = s.decode;
  toml::table root;
  if (include_name) root.insert("name", s.name);
  root.insert("seed", static_cast<int64_t>(d.seed));
  root.insert("target", toml::table{{"model", s.target_model}});
  if (s.speculative()) {
    root.insert("draft", toml::table{{"model", s.draft_model},
                                     {"temperature", d.draft_sampling.temperature},
                                     {"top_k", d.draft_sampling.top_k},
                                     {"top_p", d.draft_sampling.top_p},
                                     {"min_p", d.draft_sampling.min_p}});
  }
  toml::table verifier{{"method", s.verifier()}};
  for (const VerifierParameter& p : verifier_parameters()) {
    verifier.insert(p.key, parameter_value(d.verifier, p.key));
  }
  root.insert("verifier", std::move(verifier));
  root.insert("sampling", toml::table{{"temperature", d.sampling.temperature},
                                      {"top_k", d.sampling.top_k},
                                      {"top_p", d.sampling.top_p},
                                      {"min_p", d.sampling.min_p}});
  root.insert("decode", toml::table{{"gamma", d.gamma},
                                    {"batch_size", s.batch_size},
                                    {"sequences", s.sequences},
                                    {"max_new_tokens", d.max_new_tokens},
                                    {"prompt_length", s.prompt_length},
                                    {"prompt_source", s.prompt_source_text()},
                                    {"baseline", s.baseline},
                                    {"sampling", std::string(to_string(d.token_sampling()))}});
  if (const auto* tree = std::get_if<TreeVerifier>(&d.verifier)) {
    toml::array branches;
    for (const int64_t k : tree->branches) branches.push_back(k);
    root["decode"].as_table()->insert("branches", std::move(branches));
  }
  return root;
}

namespace {

// A value as TOML text: floats as fmt's shortest round trip (with ".0" where that looks like an
// integer), arrays element by element, everything else as toml++ writes it.
std::string toml_value_text(const toml::node& node) {
  if (const auto* f = node.as_floating_point()) {
    std::string text = fmt::format("{}", f->get());
    if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // "n": inf, nan
    return text;
  }
  if (const auto* array = node.as_array()) {
    std::vector<std::string> parts;
    for (const toml::node& element : *array) parts.push_back(toml_value_text(element));
    return parts.empty() ? "[]" : fmt::format("[ {} ]", fmt::join(parts, ", "));  // as toml++
  }
  std::ostringstream out;
  node.visit([&](const auto& n) { out << toml::toml_formatter{n}; });
  return out.str();
}

}  // namespace

std::string settings_to_toml_text(const RunSettings& settings, bool include_name) {
  // The layout toml++'s formatter gives this table (root values, then one [table] each, keys in
  // order), written here for the floats' sake.
  const toml::table root = settings_to_toml(settings, include_name);
  std::string text;
  for (const auto& [key, node] : root) {
    if (!node.is_table()) text += fmt::format("{} = {}\n", key.str(), toml_value_text(node));
  }
  for (const auto& [key, node] : root) {
    const toml::table* table = node.as_table();
    if (table == nullptr) continue;
    text += fmt::format("\n[{}]\n", key.str());
    for (const auto& [sub_key, value] : *table) {
      text += fmt::format("{} = {}\n", sub_key.str(), toml_value_text(value));
    }
  }
  return text + "\n";
}

std::string settings_id_text(const RunSettings& settings) {
  std::ostringstream out;
  out << toml::toml_formatter{settings_to_toml(settings, false)} << "\n";
  return out.str();
}

std::vector<std::pair<std::string, const toml::node*>> flatten_table(const toml::table& table) {
  std::vector<std::pair<std::string, const toml::node*>> leaves;
  const auto walk = [&](const auto& self, const toml::table& t, const std::string& prefix) -> void {
    for (const auto& [key, node] : t) {
      const std::string dotted =
          prefix.empty() ? std::string(key.str()) : fmt::format("{}.{}", prefix, key.str());
      if (const toml::table* sub = node.as_table()) {
        self(self, *sub, dotted);
      } else {
        leaves.emplace_back(dotted, &node);
      }
    }
  };
  walk(walk, table, "");
  return leaves;
}

int64_t model_vocab(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, int64_t, std::less<>> cache;
  {
    const std::lock_guard lock(mutex);
    if (const auto it = cache.find(name); it != cache.end()) return it->second;
  }
  const int64_t vocab = make_model(name)->vocab();
  const std::lock_guard lock(mutex);
  cache[name] = vocab;
  return vocab;
}

DecodeConfig decode_config(const RunSettings& s, int64_t batch) {
  DecodeConfig config = s.decode;
  config.seed = batch_seed(s.decode.seed, batch);
  return config;
}

uint64_t batch_seed(uint64_t seed, int64_t batch) {
  return mix64(seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(batch + 1));
}

}  // namespace speclab::experiments
