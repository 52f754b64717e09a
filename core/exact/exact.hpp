// Exact output distributions of the chain-draft verifiers (docs/verifiers.md V1 token, V2 greedy,
// V3 lenient, V4 typical, V5 block) by enumerating every draft, accept/reject, residual and bonus
// branch in rational arithmetic (docs/testing.md "Exact checks first"). Written from
// docs/verifiers.md alone, independent of the float verifiers, so that losslessness is checked by
// equality, not by statistics. Trees (V6) are in core/exact/exact_tree.hpp.
#pragma once

#include <boost/multiprecision/gmp.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/verify/verify_chain.hpp"
#include "core/verify/verify_match.hpp"
#include "core/verify/verify_typical.hpp"

namespace speclab::exact {

/// An exact rational (GMP). Beware expression templates: wrap a difference as Q(a - b) before
/// passing it to std::max or comparing it with auto-typed values.
using Q = boost::multiprecision::mpq_rational;
using Row = std::vector<Q>;                  ///< [V] a probability row
using Sequence = std::vector<int>;           ///< emitted token ids, in order
using Distribution = std::map<Sequence, Q>;  ///< only sequences of positive probability

/// Enumeration is exponential; these bound the work (the documented target is V ≤ 5, γ ≤ 3,
/// sequences ≤ 5 tokens).
inline constexpr int kMaxVocab = 8;
inline constexpr int kMaxGamma = 4;
inline constexpr int kMaxLength = 6;
inline constexpr int kMaxSequences = 4096;  ///< V^L for the multi-step stream

/// The verifier to enumerate. leniency l ∈ (0, 1] is read for kLenient only.
struct Method {
  ChainMethod method = ChainMethod::kToken;
  Q leniency = 1;
};

/// docs/verifiers.md V5 block verification (Sun et al. 2024); it has no parameters.
struct BlockMethod {};

/// docs/verifiers.md V4 typical acceptance (Medusa), lossy. The pass test p(x) > min(ε, δ·exp(−H))
/// involves ln and exp, so it is decided in double (H summed in token order from the rows converted
/// to double, as core/verify/verify_typical does); the probabilities of the branches stay exact
/// rationals. After the accepted run the next token is drawn from the target row at that position
/// (the bonus row when all γ pass): Medusa samples the token after the accepted candidate from the
/// base model.
struct TypicalMethod {
  double epsilon = kTypicalEpsilon;  ///< ε > 0
  double delta = kTypicalDelta;      ///< δ > 0
};

/// One verification step with context-free rows.
struct StepResult {
  int vocab = 0;
  int gamma = 0;
  Distribution distribution;       ///< emitted tokens (accepted prefix + one) → probability
  Q expected_accepted;             ///< E[n], draft tokens accepted per step (bonus not counted)
  Q expected_emitted;              ///< E[n + 1]
  Row first_token_marginal;        ///< [V] P(first emitted token = a)
  std::vector<Q> accepted_length;  ///< [γ+1] P(n = k), k = 0..γ
  /// [γ] P(position i is accepted) = P(n ≥ i), i = 1..γ (run files: position/acceptance_marginal)
  std::vector<Q> position_acceptance_marginal;
  /// [γ] P(position i is accepted | position i is reached) = P(n ≥ i) / P(n ≥ i − 1); empty where
  /// position i is never reached (run files: position/acceptance_conditional)
  std::vector<std::optional<Q>> position_acceptance_conditional;
};

/// Enumerates one step: drafts x_i ~ probs_draft[i] independently (rows do not depend on the
/// context), verified against probs_target with `method`.
/// @param[in] probs_target  [γ+1][V] p_1..p_{γ+1}, each non-negative and summing exactly to 1
/// @param[in] probs_draft   [γ][V] q_1..q_γ, likewise
/// Throws InvalidInput naming the row and value for bad rows, γ > kMaxGamma or V > kMaxVocab.
StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          const Method& method);

/// The same for V5 block verification: n is τ, the last passing position.
StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          const BlockMethod& method);

/// The same for V4 typical acceptance: n is the longest run of passes.
StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          const TypicalMethod& method);

/// The same for the match verifiers (docs/verifiers.md V8): the target's token y at each position
/// is drawn from p; the draft is accepted iff it equals y, jointly with probability
/// coupled_agreement_at (coupled: one Gumbel noise for both) or p_y·q_y (sampled-match).
StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          MatchMethod method);

/// P(both Gumbel-max races of p and q under one noise pick y) = 1 / Σ_u max(p_u/p_y, q_u/q_y)
/// for p_y, q_y > 0, else 0 (proofs/match_verifiers.md §3).
Q coupled_agreement_at(const Row& p, const Row& q, int y);
/// Σ_y coupled_agreement_at: coupled's acceptance probability at a position.
Q coupled_agreement(const Row& p, const Row& q);
/// (1 − TV)/(1 + TV) with TV = 1 − Σ min(p, q): the lower bound on coupled_agreement.
Q coupled_agreement_bound(const Row& p, const Row& q);
/// Σ_y p_y·q_y: sampled-match's acceptance probability at a position.
Q sampled_match_agreement(const Row& p, const Row& q);

/// V4's pass test for token x of `probs_target` (converted to double): p(x) > min(ε, δ·exp(−H)),
/// H = −Σ p ln(p + 1e-5). Throws InvalidInput for ε ≤ 0 or δ ≤ 0 (or not finite).
bool typical_passes(const Row& probs_target, int x, const TypicalMethod& method);

/// One-hot at the argmax of `row`, lowest id on ties (docs/verifiers.md V2): the target that greedy
/// verification is lossless against.
Row one_hot_argmax(const Row& row);

/// The losslessness of one step for context-free rows: for every emitted prefix π of j−1
/// accepted tokens with P(π accepted) > 0, P(next emitted token = a | π accepted) must equal
/// expected_rows[j−1][a] exactly, j = 1..γ+1. Pass p_1..p_{γ+1} for V1 and one_hot_argmax of
/// each for V2. Returns a description of the first violation, or nothing when the property holds.
std::optional<std::string> find_conditional_violation(const StepResult& step,
                                                      const std::vector<Row>& expected_rows);

/// A first-order Markov chain over tokens 0..vocab−1: transition[t] is the distribution of the
/// next token given the previous token t.
struct MarkovChain {
  int vocab = 0;
  std::vector<Row> transition;  ///< [V][V], rows non-negative and summing exactly to 1
};

/// The exact distribution of the first `length` tokens of speculative decoding with a Markov
/// target and draft, starting after `start`. Each step drafts γ tokens autoregressively from the
/// draft chain from the last emitted token, takes p_i as the target chain's row for the token
/// before position i (p_1 from the last emitted token, p_2 from x_1, …, p_{γ+1} from x_γ),
/// verifies with `method`, appends the emitted tokens, and repeats until `length` tokens exist;
/// the stream is then cut to `length` tokens. Context and rollback therefore matter.
/// Throws InvalidInput for bad chains, start outside [0, V), γ outside [0, kMaxGamma], length
/// outside [1, kMaxLength] or V^length > kMaxSequences.
/// With cap_gamma, a step drafts min(γ, tokens still missing - 1) tokens, as core/decode's engine
/// does near max_new_tokens (a lossy method's law depends on it; a lossless one's does not).
Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, const Method& method, bool cap_gamma = false);

/// The stream of V5 block verification (same drafting, rows and cut as above).
Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, const BlockMethod& method,
                              bool cap_gamma = false);

/// The stream of V4 typical acceptance (lossy; its law depends on cap_gamma).
Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, const TypicalMethod& method,
                              bool cap_gamma = false);

/// The stream of the match verifiers (lossless: the target chain's law for every draft).
Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, MatchMethod method, bool cap_gamma = false);

/// Plain decoding: the joint distribution of `length` tokens of `chain` after `start`.
Distribution chain_distribution(const MarkovChain& chain, int start, int length);

/// Plain greedy decoding: `length` tokens, each the argmax (lowest id on ties) of the row of the
/// token before it.
Sequence greedy_chain(const MarkovChain& chain, int start, int length);

/// The rows of one step as a function of the position (0-based; γ is the bonus position) and the
/// token before that position. Context-free rows ignore the token; Markov rows ignore the position.
using RowAt = std::function<const Row&(int position, int previous)>;
/// Receives each leaf of a step: the emitted tokens, the number accepted, the leaf's probability.
using EmitLeaf = std::function<void(const Sequence& emitted, int n_accepted, const Q& probability)>;
/// The law of one verifier: calls `emit` once per leaf of one step of depth γ that starts after
/// token `previous`. Leaves may repeat a sequence (their probabilities add).
using StepLaw = std::function<void(const RowAt& target, const RowAt& draft, int gamma, int previous,
                                   const EmitLeaf& emit)>;

/// enumerate_step for any step law: validates γ+1 target rows and γ draft rows of one V, calls
/// `law` with context-free rows and summarises the leaves.
StepResult enumerate_step_with(const std::vector<Row>& probs_target,
                               const std::vector<Row>& probs_draft, const StepLaw& law);

/// Receives one step's outcome: the tokens it emits and their probability.
using EmitStep = std::function<void(const Sequence& emitted, const Q& probability)>;
/// One step of a stream after `previous` (the last emitted token, or the start) with `produced`
/// tokens already emitted: calls `emit` once per outcome.
using StreamStep = std::function<void(int previous, int produced, const EmitStep& emit)>;
/// The law of the first `length` tokens of the stream that repeats `step` from `start` until
/// `length` tokens exist (the last step's tokens cut there): breadth-first over steps, equal
/// partial outputs merged. The one stream enumeration of every exact law (chains, trees,
/// vocabularies).
Distribution enumerate_steps(int start, int length, const StreamStep& step);

/// enumerate_stream for any step law (chains validated, γ ≤ kMaxGamma, V^L ≤ kMaxSequences).
Distribution enumerate_stream_with(const MarkovChain& target, const MarkovChain& draft, int start,
                                   int gamma, int length, const StepLaw& law, bool cap_gamma);

/// Checks one exact probability row: V entries, each ≥ 0, summing exactly to 1. Throws
/// InvalidInput "ARGUMENT row INDEX (WHERE) ...".
void validate_row(const Row& row, int vocab, std::string_view argument, int index,
                  std::string_view where);

/// Parses "1/3", "2", "0.25" (also ".5", "3.") exactly. Throws InvalidInput naming `argument` and
/// the text when it is none of these or the denominator is zero. Signs are accepted, so that a
/// negative value reaches validation and is reported as negative.
Q parse_rational(std::string_view text, std::string_view argument);

/// Parses a comma-separated row of rationals, e.g. "1/3,2/3"; entries may be padded with spaces.
Row parse_rational_row(std::string_view text, std::string_view argument);

/// "num/den" in lowest terms, always with a denominator ("1/1", "0/1").
std::string to_fraction_string(const Q& value);

/// Joins token ids with commas: {0, 1} → "0,1".
std::string sequence_key(const Sequence& sequence);

}  // namespace speclab::exact
