// The verifier registry: every verifier speclab implements, written once (name, family, whether it
// is lossy, whether it reads the draft's probabilities, its parameters with their defaults and
// bounds), and VerifierSpec, the one value that selects a verifier and carries its parameters.
// Decoding, the exact enumerators, configs, `speclab exact`, `speclab verify-batch` and every
// `--help` read this table (docs/verifiers.md has the mathematics of each).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/base/rules.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "core/verify/verify_match.hpp"
#include "core/verify/verify_tree.hpp"
#include "core/verify/verify_typical.hpp"

namespace speclab {

/// The shape of a verification step, which fixes the verify function a step calls.
enum class VerifierFamily {
  kChain,    ///< V1-V3 over a draft chain: verify_chain
  kBlock,    ///< V5 block verification of a draft chain: verify_block
  kTypical,  ///< V4 typical acceptance of a draft chain (lossy): verify_typical
  kTree,     ///< V6 recursive rejection, K-SEQ or V7 traversal over a drafted token tree:
             ///< verify_tree
  kMatch,    ///< V8 coupled / sampled-match over a draft chain: verify_match
};

/// How the engine draws a step's draft tokens for a verifier: the drafting half of a verifier,
/// which the registry states beside the verification half.
enum class DraftRule {
  kOwnNoise,     ///< x_i ~ q_i with the draft's own uniform (kDraftSample), independent of the
                 ///< target's noise
  kOutputNoise,  ///< x_i = sample_gumbel(q_i) with the noise of x_i's output position, the noise
                 ///< the target's token there is drawn with (coupled)
};

/// How a verifier reaches a draft whose vocabulary is not the target's (docs/verifiers.md V9,
/// "Drafts from another vocabulary"). With one shared vocabulary each rule reduces to a verifier of
/// its family: the intersection is every token and needs no renormalisation (V1), re-tokenising a
/// draft token gives the token (sampled-match), and a token proposed as a whole string is the
/// draft's token with its own probability (V1). The engine for two vocabularies is
/// core/decode/decode_vocab.hpp.
enum class VocabRule {
  kShared,           ///< draft and target share the vocabulary
  kIntersection,     ///< TLI: q restricted and renormalised to the tokens both spell alike, V1
  kStringMatch,      ///< SLEM: the draft's text re-tokenised by the target, sampled-match
  kStringRejection,  ///< SLRS: one target token per proposal, accepted with min(1, p/ψ) over the
                     ///< string's probability ψ under the draft
};

/// Parameters of each family; the defaults are the registry's.
struct ChainVerifier {
  ChainMethod method = ChainMethod::kToken;
  double leniency = kDefaultLeniency;    ///< l in (0, 1], read by kLenient only
  VocabRule vocab = VocabRule::kShared;  ///< tli, slrs: kToken with their rule
};
struct BlockVerifier {};
struct TypicalVerifier {
  double epsilon = kTypicalEpsilon;  ///< ε > 0
  double delta = kTypicalDelta;      ///< δ > 0
};
struct TreeVerifier {
  TreeMethod method = TreeMethod::kIid;
  /// Candidates drafted under each node at depth 0, 1, ... (e.g. {2, 2, 1} drafts 2 children of
  /// the root, 2 under each, 1 under each of the 4); its length is the depth, which plays γ's role.
  std::vector<int64_t> branches;
};

struct MatchVerifier {
  MatchMethod method = MatchMethod::kCoupled;
  /// The target's rule at each output position; the engines set it to
  /// DecodeConfig::token_sampling() so that the verifier reproduces plain decoding (coupled
  /// requires Gumbel).
  TokenSampling sampling = TokenSampling::kGumbel;
  VocabRule vocab = VocabRule::kShared;  ///< slem: kSampledMatch with kStringMatch
};

/// Which verifier, with its parameters. The variant's index is the VerifierFamily.
using VerifierSpec =
    std::variant<ChainVerifier, BlockVerifier, TypicalVerifier, TreeVerifier, MatchVerifier>;

/// A numeric parameter a verifier reads: its config key (`verifier.KEY`), its `speclab exact`
/// option, its default and the open/closed interval it must lie in.
struct VerifierParameter {
  std::string_view key;     ///< "leniency", "typical_epsilon", "typical_delta"
  std::string_view option;  ///< "--leniency", "--epsilon", "--delta"
  std::string_view symbol;  ///< "l", "ε", "δ"
  double default_value;
  double lower;  ///< exclusive
  double upper;  ///< inclusive when finite
  std::string_view meaning;

  /// "ε > 0" or "l in (0, 1]".
  std::string range_text() const;
  /// "ε > 0 of typical acceptance; default 0.09".
  std::string help() const;
  bool admits(double value) const;
};

/// The numeric parameters, in documentation order.
std::span<const VerifierParameter> verifier_parameters();
/// The parameter with this key; throws Error for an unknown key (a programming error).
const VerifierParameter& verifier_parameter(std::string_view key);

/// One row of the registry.
struct VerifierEntry {
  std::string_view name;   ///< the name configs, options and result files use: "token"
  std::string_view label;  ///< the docs' label: "V1"
  VerifierFamily family;
  ChainMethod chain_method;  ///< kChain: which chain verifier
  TreeMethod tree_method;    ///< kTree: the candidates' law
  bool lossy;                ///< its output law differs from the target's (by design)
  bool needs_draft_probs;    ///< reads probs_draft (greedy and deterministic top-k do not)
  bool uses_branches;        ///< drafts a tree shaped by `branches`
  std::span<const std::string_view> parameters;  ///< keys of verifier_parameters() it reads
  std::string_view summary;
  MatchMethod match_method = MatchMethod::kCoupled;  ///< kMatch: which match verifier
  DraftRule draft_rule = DraftRule::kOwnNoise;       ///< how the engine draws the drafts
  VocabRule vocab_rule = VocabRule::kShared;         ///< how it reaches another vocabulary
};

/// Every verifier, in documentation order.
std::span<const VerifierEntry> verifier_registry();
/// The entry of a name, or nullptr.
const VerifierEntry* find_verifier(std::string_view name);
/// The entry of a name; throws InvalidInput "<what> is "X"; expected one of ..." (with a "did you
/// mean" for a near miss).
const VerifierEntry& verifier_entry(std::string_view name, std::string_view what = "verifier");
/// Every registered name, in registry order.
std::vector<std::string> verifier_names();
/// The names joined by `separator`: "token | greedy | ...".
std::string verifier_names_text(std::string_view separator = " | ");

/// The spec of a name with every parameter at its default; a tree verifier drafts `branches`
/// (which the chain verifiers have no use for). Throws InvalidInput for an unknown name.
VerifierSpec make_verifier(std::string_view name, std::vector<int64_t> branches = {});
/// The registry entry of a spec.
const VerifierEntry& entry_of(const VerifierSpec& spec);
inline std::string_view verifier_name(const VerifierSpec& spec) { return entry_of(spec).name; }
inline VerifierFamily family_of(const VerifierSpec& spec) {
  return static_cast<VerifierFamily>(spec.index());
}
inline bool is_lossy(const VerifierSpec& spec) { return entry_of(spec).lossy; }
/// The spec's VocabRule (kShared for the families without one).
VocabRule vocab_rule_of(const VerifierSpec& spec);
/// Whether the verifier decodes with a draft of another vocabulary (tli, slem, slrs).
inline bool crosses_vocabularies(const VerifierSpec& spec) {
  return vocab_rule_of(spec) != VocabRule::kShared;
}

/// One verification step of a batch of draft chains with the spec's verifier at (seed, step): the
/// one dispatch from a VerifierSpec to its verify function (verify_chain, verify_block,
/// verify_typical, verify_match, which reads batch.positions instead of the step), which the
/// engines and the Python package call. `reference` takes
/// verify_chain_reference for the chain family (the others have one implementation). A tree spec
/// is InvalidInput: its step verifies a tree (verify_tree).
ChainResult verify(const VerifierSpec& spec, const ChainBatch& batch, uint64_t seed, uint32_t step,
                   bool reference = false);

/// Nodes of a tree drafted with `branches` (root excluded), saturating at kMaxTreeNodes + 1.
int64_t tree_node_count(std::span<const int64_t> branches);
/// Checks a tree shape: non-empty, every k in [1, V], at most kMaxTreeNodes nodes
/// (core/base/rules.hpp). Throws InvalidInput naming decode.branches.
void validate_tree_branches(std::span<const int64_t> branches, int64_t vocab);

}  // namespace speclab
