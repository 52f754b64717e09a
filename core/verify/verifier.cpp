// The verifier registry (core/verify/verifier.hpp): the one table of names, families and
// parameters, and the name <-> method conversions of the chain and tree verifiers read from it.
#include "core/verify/verifier.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/base/error.hpp"
#include "core/base/suggest.hpp"

namespace speclab {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr std::array<VerifierParameter, 3> kParameters = {{
    {"leniency", "--leniency", "l", kDefaultLeniency, 0.0, 1.0,
     "leniency of lenient verification (V3); 1 is V1's test"},
    {"typical_epsilon", "--epsilon", "ε", kTypicalEpsilon, 0.0, kInf,
     "hard threshold of typical acceptance (V4)"},
    {"typical_delta", "--delta", "δ", kTypicalDelta, 0.0, kInf,
     "entropy factor of typical acceptance (V4)"},
}};

constexpr std::array<std::string_view, 0> kNone = {};
constexpr std::array<std::string_view, 1> kLeniency = {"leniency"};
constexpr std::array<std::string_view, 2> kTypical = {"typical_epsilon", "typical_delta"};

using F = VerifierFamily;
using C = ChainMethod;
using T = TreeMethod;

// name, label, family, chain method, tree method, lossy, reads q, drafts a tree, parameters.
constexpr std::array<VerifierEntry, 16> kRegistry = {{
    {"token", "V1", F::kChain, C::kToken, T::kIid, false, true, false, kNone,
     "token-level speculative sampling: accept x with min(1, p(x)/q(x)), else draw from "
     "max(0, p − q)"},
    {"greedy", "V2", F::kChain, C::kGreedy, T::kIid, false, false, false, kNone,
     "accept x iff it is the target's argmax; lossless against greedy decoding"},
    {"lenient", "V3", F::kChain, C::kLenient, T::kIid, true, true, false, kLeniency,
     "accept x iff u·l·q(x) ≤ p(x); lossy for l < 1"},
    {"block", "V5", F::kBlock, C::kToken, T::kIid, false, true, false, kNone,
     "block verification: the longest prefix accepted jointly (Sun et al. 2024)"},
    {"typical", "V4", F::kTypical, C::kToken, T::kIid, true, false, false, kTypical,
     "typical acceptance: accept x iff p(x) > min(ε, δ·exp(−H(p))) (Medusa); lossy"},
    {"tree-iid", "V6", F::kTree, C::kToken, T::kIid, false, true, true, kNone,
     "recursive rejection over a token tree, candidates i.i.d. from q"},
    {"tree-swor", "V6", F::kTree, C::kToken, T::kSwor, false, true, true, kNone,
     "recursive rejection over a token tree, candidates drawn without replacement"},
    {"tree-topk", "V6", F::kTree, C::kToken, T::kTopk, false, false, true, kNone,
     "recursive rejection over a token tree, candidates the top-k of q (deterministic)"},
    {"tree-topk-softmax-q", "V6", F::kTree, C::kToken, T::kTopkSoftmaxQ, true, true, true, kNone,
     "top-k candidates verified as if drawn from q; lossy, kept to show why"},
    {"kseq", "V6", F::kTree, C::kToken, T::kKseq, false, true, true, kNone,
     "SpecTr K-SEQ: i.i.d. candidates with ρ-scaled acceptance at every node"},
    {"traversal", "V7", F::kTree, C::kToken, T::kTraversal, false, true, true, kNone,
     "traversal verification: candidates without replacement, paths accepted leaf to root at "
     "sequence level (Weng et al. 2025); V5 on a chain"},
    {"coupled", "V8", F::kMatch, C::kToken, T::kIid, false, false, false, kNone,
     "drafts drawn with the target's Gumbel noise, accepted while equal to the target's "
     "Gumbel-max token: plain Gumbel decoding's tokens whatever the draft",
     MatchMethod::kCoupled, DraftRule::kOutputNoise},
    {"sampled-match", "V8", F::kMatch, C::kToken, T::kIid, false, false, false, kNone,
     "accept while the draft equals the target's own sample (plain decoding's noise); "
     "acceptance Σ p·q",
     MatchMethod::kSampledMatch, DraftRule::kOwnNoise},
    {"tli", "V9", F::kChain, C::kToken, T::kIid, false, true, false, kNone,
     "draft of another vocabulary: q restricted and renormalised to the tokens both vocabularies "
     "spell alike, then V1 (token-level intersection, Timor et al. 2025)",
     MatchMethod::kCoupled, DraftRule::kOwnNoise, VocabRule::kIntersection},
    {"slem", "V9", F::kMatch, C::kToken, T::kIid, false, false, false, kNone,
     "draft of another vocabulary: its text re-tokenised by the target, accepted while equal to "
     "the target's own sample (string-level exact match)",
     MatchMethod::kSampledMatch, DraftRule::kOwnNoise, VocabRule::kStringMatch},
    {"slrs", "V9", F::kChain, C::kToken, T::kIid, false, true, false, kNone,
     "draft of another vocabulary: one target token per proposal, accepted with min(1, p/ψ) where "
     "ψ is the draft's probability of the string (string-level rejection sampling)",
     MatchMethod::kCoupled, DraftRule::kOwnNoise, VocabRule::kStringRejection},
}};

std::string format_number(double value) { return fmt::format("{:g}", value); }

// "\"token\", \"greedy\", ..." over the entries `keep` selects.
std::string quoted_names(auto&& keep) {
  std::string names;
  for (const VerifierEntry& e : kRegistry) {
    if (keep(e)) names += fmt::format("{}\"{}\"", names.empty() ? "" : ", ", e.name);
  }
  return names;
}

// The entry of a family's method, for the names of ChainMethod and TreeMethod values.
template <typename Method>
const VerifierEntry& method_entry(VerifierFamily family, Method method) {
  for (const VerifierEntry& e : kRegistry) {
    if (e.family != family || e.vocab_rule != VocabRule::kShared) continue;
    if constexpr (std::is_same_v<Method, ChainMethod>) {
      if (e.chain_method == method) return e;
    } else {
      if (e.tree_method == method) return e;
    }
  }
  throw Error("verifier registry: no entry for this method");
}

const VerifierEntry& entry_where(auto&& matches) {
  for (const VerifierEntry& e : kRegistry) {
    if (matches(e)) return e;
  }
  throw Error("verifier registry: no entry for this method");
}

}  // namespace

std::string VerifierParameter::range_text() const {
  if (std::isinf(upper)) return fmt::format("{} > {}", symbol, format_number(lower));
  return fmt::format("{} in ({}, {}]", symbol, format_number(lower), format_number(upper));
}

std::string VerifierParameter::help() const {
  return fmt::format("{} ({}); default {}", meaning, range_text(), format_number(default_value));
}

bool VerifierParameter::admits(double value) const {
  return std::isfinite(value) && value > lower && value <= upper;
}

std::span<const VerifierParameter> verifier_parameters() { return kParameters; }

const VerifierParameter& verifier_parameter(std::string_view key) {
  for (const VerifierParameter& p : kParameters) {
    if (p.key == key) return p;
  }
  throw Error(fmt::format("verifier registry: no parameter \"{}\"", key));
}

std::span<const VerifierEntry> verifier_registry() { return kRegistry; }

const VerifierEntry* find_verifier(std::string_view name) {
  for (const VerifierEntry& e : kRegistry) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const VerifierEntry& verifier_entry(std::string_view name, std::string_view what) {
  if (const VerifierEntry* e = find_verifier(name)) return *e;
  throw InvalidInput(fmt::format("{} is \"{}\"{}; expected one of {}", what, name,
                                 did_you_mean(name, verifier_names()),
                                 quoted_names([](const VerifierEntry&) { return true; })));
}

std::vector<std::string> verifier_names() {
  std::vector<std::string> names;
  for (const VerifierEntry& e : kRegistry) names.emplace_back(e.name);
  return names;
}

std::string verifier_names_text(std::string_view separator) {
  std::string text;
  for (const VerifierEntry& e : kRegistry) {
    if (!text.empty()) text += separator;
    text += e.name;
  }
  return text;
}

VerifierSpec make_verifier(std::string_view name, std::vector<int64_t> branches) {
  const VerifierEntry& e = verifier_entry(name);
  switch (e.family) {
    case VerifierFamily::kChain:
      return ChainVerifier{.method = e.chain_method, .vocab = e.vocab_rule};
    case VerifierFamily::kBlock:
      return BlockVerifier{};
    case VerifierFamily::kTypical:
      return TypicalVerifier{};
    case VerifierFamily::kTree:
      return TreeVerifier{.method = e.tree_method, .branches = std::move(branches)};
    case VerifierFamily::kMatch:
      return MatchVerifier{.method = e.match_method, .vocab = e.vocab_rule};
  }
  throw Error("verifier registry: unknown family");
}

VocabRule vocab_rule_of(const VerifierSpec& spec) {
  if (const auto* chain = std::get_if<ChainVerifier>(&spec)) return chain->vocab;
  if (const auto* match = std::get_if<MatchVerifier>(&spec)) return match->vocab;
  return VocabRule::kShared;
}

const VerifierEntry& entry_of(const VerifierSpec& spec) {
  const VerifierFamily family = family_of(spec);
  if (const auto* chain = std::get_if<ChainVerifier>(&spec)) {
    if (chain->vocab == VocabRule::kShared) return method_entry(family, chain->method);
    return entry_where(
        [&](const VerifierEntry& e) { return e.family == family && e.vocab_rule == chain->vocab; });
  }
  if (const auto* tree = std::get_if<TreeVerifier>(&spec))
    return method_entry(family, tree->method);
  if (const auto* match = std::get_if<MatchVerifier>(&spec)) {
    return entry_where([&](const VerifierEntry& e) {
      return e.family == family && e.match_method == match->method && e.vocab_rule == match->vocab;
    });
  }
  return entry_where([&](const VerifierEntry& e) { return e.family == family; });
}

int64_t tree_node_count(std::span<const int64_t> branches) {
  int64_t nodes = 0, level = 1;
  for (const int64_t k : branches) {
    // Clamped first: a config may hold k up to 2^63 - 1, and level · k would overflow.
    level = std::min(level * std::clamp<int64_t>(k, 0, kMaxTreeNodes + 1), kMaxTreeNodes + 1);
    nodes = std::min(nodes + level, kMaxTreeNodes + 1);
  }
  return nodes;
}

void validate_tree_branches(std::span<const int64_t> branches, int64_t vocab) {
  if (branches.empty()) {
    throw InvalidInput(
        "decode.branches is empty; a tree verifier needs candidates per depth, e.g. [2, 2, 1]");
  }
  for (size_t d = 0; d < branches.size(); ++d) {
    if (branches[d] < 1 || branches[d] > vocab) {
      throw InvalidInput(
          fmt::format("decode.branches[{}] is {}; expected 1 ≤ k ≤ V = {}", d, branches[d], vocab));
    }
  }
  if (tree_node_count(branches) > kMaxTreeNodes) {
    throw InvalidInput(
        fmt::format("decode.branches makes a tree of more than {} nodes", kMaxTreeNodes));
  }
}

// The chain and tree verifiers' names are the registry's.

namespace {

const VerifierEntry& family_entry(std::string_view name, VerifierFamily family,
                                  std::string_view what) {
  // A chain method names a shared-vocabulary row: "tli" is a rule for reaching a draft, not a
  // method of the chain verifier.
  const auto in_family = [&](const VerifierEntry& c) {
    return c.family == family && c.vocab_rule == VocabRule::kShared;
  };
  const VerifierEntry* e = find_verifier(name);
  if (e == nullptr || !in_family(*e)) {
    throw InvalidInput(
        fmt::format("{} is \"{}\"; expected one of {}", what, name, quoted_names(in_family)));
  }
  return *e;
}

}  // namespace

std::string_view to_string(ChainMethod method) {
  return method_entry(VerifierFamily::kChain, method).name;
}

ChainMethod parse_chain_method(std::string_view name) {
  return family_entry(name, VerifierFamily::kChain, "method").chain_method;
}

bool is_lossy(ChainMethod method) { return method_entry(VerifierFamily::kChain, method).lossy; }

std::string_view to_string(TreeMethod method) {
  return method_entry(VerifierFamily::kTree, method).name;
}

TreeMethod parse_tree_method(std::string_view name) {
  return family_entry(name, VerifierFamily::kTree, "tree method").tree_method;
}

bool is_lossy(TreeMethod method) { return method_entry(VerifierFamily::kTree, method).lossy; }

bool needs_draft_probs(TreeMethod method) {
  return method_entry(VerifierFamily::kTree, method).needs_draft_probs;
}

ChainResult verify(const VerifierSpec& spec, const ChainBatch& batch, uint64_t seed, uint32_t step,
                   bool reference) {
  switch (family_of(spec)) {
    case VerifierFamily::kChain: {
      const auto& chain = std::get<ChainVerifier>(spec);
      const ChainParams params{
          .method = chain.method, .leniency = chain.leniency, .seed = seed, .step = step};
      return reference ? verify_chain_reference(batch, params) : verify_chain(batch, params);
    }
    case VerifierFamily::kBlock:
      return verify_block(batch, BlockParams{.seed = seed, .step = step});
    case VerifierFamily::kTypical: {
      const auto& typical = std::get<TypicalVerifier>(spec);
      return verify_typical(
          batch,
          TypicalParams{
              .epsilon = typical.epsilon, .delta = typical.delta, .seed = seed, .step = step});
    }
    case VerifierFamily::kMatch: {
      const auto& match = std::get<MatchVerifier>(spec);
      return verify_match(
          batch, MatchParams{.method = match.method, .sampling = match.sampling, .seed = seed});
    }
    case VerifierFamily::kTree:
      break;
  }
  throw InvalidInput(
      fmt::format("verifier \"{}\" is a tree verifier: its step verifies a tree "
                  "(verify_tree), not a chain",
                  verifier_name(spec)));
}

}  // namespace speclab
