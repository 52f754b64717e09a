// Exact stream laws of speculative decoding with a draft whose vocabulary differs from the
// target's (proofs/heterogeneous_vocab.md): TLI (token-level intersection), SLEM (string-level
// exact match) and SLRS (string-level rejection sampling), over toy tokenizers and Markov chains,
// in rational arithmetic. Independent of core/models: the tokenizers here are a few lines of
// greedy longest match written for this file, so that the engine's heterogeneous-vocabulary code
// is measured against a separate derivation.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/exact/exact.hpp"

namespace speclab::exact {

/// Bounds of the heterogeneous-vocabulary enumerations (they are exponential in all of these).
inline constexpr int kMaxVocabTokens = 8;  ///< tokens per vocabulary
inline constexpr int kMaxTokenChars = 3;   ///< characters per token string
inline constexpr int kMaxVocabGamma = 3;   ///< proposals per step
inline constexpr int kMaxVocabLength = 4;  ///< target tokens in the stream

/// A toy tokenizer: token id → its string (non-empty, at most kMaxTokenChars characters). Its
/// canonical tokenizer is greedy longest match, lowest id among equal strings.
struct ToyVocabulary {
  std::vector<std::string> strings;
};

/// A target and a draft model with different vocabularies, both first-order Markov chains over
/// their own token ids: target_chain.transition[t] is p(· | previous target token t) and
/// draft_chain.transition[x] is q(· | previous draft token x).
struct ToyPair {
  ToyVocabulary target;
  ToyVocabulary draft;
  MarkovChain target_chain;
  MarkovChain draft_chain;
};

/// The three lossless verifiers of proofs/heterogeneous_vocab.md.
enum class VocabMethod {
  kIntersection,     ///< TLI: draft tokens whose string is a target token's, verified with V1
  kStringMatch,      ///< SLEM: the draft's text re-tokenized by the target, sampled-match
  kStringRejection,  ///< SLRS: target tokens read off the draft's text, exact ψ, V1-style test
};

/// Deliberately broken variants, which the tests show to be lossy.
enum class VocabMutant {
  kNone,
  /// TLI with ψ(t) = Σ_{m(x)=t} q(x), not divided by the intersection mass M (drafting unchanged).
  kTliUnnormalised,
  /// SLRS accepting with the probability of the drawn tokenization of the proposed string (the
  /// draft tokens that cover it, times the probability that the text then leaves the prefix set)
  /// instead of ψ(t), the sum over every tokenization; the residual keeps ψ. Exact for a drafter
  /// whose tokens are single characters.
  kSlrsOneTokenization,
  /// SLRS accepting with the probability of the whole drawn draft path, terminating character's
  /// token included: lossy even for single-character drafters (several terminating characters).
  kSlrsWholePath,
};

/// "tli", "slem", "slrs".
std::string_view vocab_method_name(VocabMethod method);

/// Greedy longest match of `text` over `vocabulary` (lowest id among equal strings). Throws
/// InvalidInput when a position of `text` starts no token.
std::vector<int> greedy_tokenize(const ToyVocabulary& vocabulary, std::string_view text);

/// Checks `pair` for `method`: 1..kMaxVocabTokens non-empty strings of at most kMaxTokenChars
/// characters per side, distinct target strings, chains of the vocabularies' sizes with rows
/// summing exactly to 1, every character of a target string a single-character draft token (the
/// draft context rule tokenizes committed target strings with the draft's tokenizer) and, for
/// SLEM, every character of a draft string a single-character target token (SLEM re-tokenizes the
/// draft's text with the target's tokenizer). Greedy longest match then never gets stuck.
/// Throws InvalidInput naming the vocabulary, the token and the value.
void validate_toy_pair(const ToyPair& pair, VocabMethod method);

/// The draft context rule: after target token t is committed the draft's Markov state is the
/// last token of greedy_tokenize(draft, str_T(t)).
int draft_state_after(const ToyPair& pair, int target_token);

/// The law of one SLRS proposal given the draft tokens drawn so far: `draft_state` is the last
/// draft token drawn and `pending` the characters already drawn beyond the proposal's start
/// offset (empty at the first proposal of a step). psi[t] = P(proposal is t), bottom = P(⊥);
/// Σ psi + bottom = 1.
struct ProposalLaw {
  Row psi;   ///< [V_T]
  Q bottom;  ///< P(⊥)
};
/// Computed by enumerating every draft-token continuation until the longest prefix of the text in
/// the target strings' prefix set is determined (a character beyond it is drawn). Throws
/// InvalidInput for a bad pair or draft_state, or `pending` longer than kMaxTokenChars.
ProposalLaw slrs_proposal_law(const ToyPair& pair, int draft_state, std::string_view pending = {});

/// The exact law of the first `length` target tokens emitted by speculative decoding with
/// `method` (and `mutant`), starting after target token `start`: steps of up to γ proposals
/// repeat until at least `length` tokens are emitted, and the stream is cut to `length`. Each step
/// starts the draft from draft_state_after(last committed target token); within a step the draft
/// continues from its own tokens. Lossless methods give chain_distribution(target_chain, start,
/// length). Throws InvalidInput for a bad pair (validate_toy_pair), start outside [0, V_T), γ
/// outside [1, kMaxVocabGamma], length outside [1, kMaxVocabLength], or a mutant of another
/// method.
Distribution enumerate_vocab_stream(const ToyPair& pair, int start, int gamma, int length,
                                    VocabMethod method, VocabMutant mutant = VocabMutant::kNone);

}  // namespace speclab::exact
