// Speculative decoding with a draft of another vocabulary (docs/verifiers.md V9): the draft writes
// text in its own tokens, the target verifies target tokens, and each side keeps its own token
// sequence, rolled back to the accepted text after every step. The three verifiers of the registry
// that cross vocabularies (VocabRule) differ in how the draft's text becomes target tokens:
//   tli   each draft token is drawn from q restricted to the tokens both vocabularies spell alike
//         and renormalised, and stands for the target token of the same bytes;
//   slem  the draft's text is re-tokenised by the target and verified by sampled-match;
//   slrs  the draft's bytes are cut into target tokens by maximal munch over the target's strings,
//         each accepted with min(1, p/ψ) over the string's probability ψ under the draft.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/models/vocab_map.hpp"

namespace speclab {

/// A tokenizer as the engine needs it: bytes → ids, stopping before bytes it cannot encode (the
/// ids spell a prefix of the input).
using EncodeBytes = std::function<std::vector<int32_t>(std::string_view bytes)>;

/// What the engine knows of two vocabularies: each side's strings and canonical tokenizer, their
/// intersection and the trie of the target's strings.
struct VocabBridge {
  TokenVocabulary target, draft;
  EncodeBytes encode_target;  ///< slem's re-tokenisation of the draft's text
  EncodeBytes encode_draft;   ///< the draft's tokens for the text of each committed target token
  VocabMap map;               ///< tli's intersection
  ByteTrie target_trie;       ///< slrs's prefix set
  /// The draft id of each byte when every draft token spells exactly one byte (byte drafters),
  /// else empty: slrs's engine needs it.
  std::vector<int32_t> draft_byte_ids;
};

/// Builds the bridge; an encoder left empty is greedy longest match over that side's strings
/// (encode_longest_match).
std::shared_ptr<const VocabBridge> make_vocab_bridge(TokenVocabulary target, TokenVocabulary draft,
                                                     EncodeBytes encode_target = {},
                                                     EncodeBytes encode_draft = {});

/// The bridge between two registered models of V_target and V_draft tokens
/// (core/models/model_registry.hpp vocabularies_to_join), or nullptr when they share one
/// vocabulary. InvalidInput naming the model whose tokens spell no text (LinearSoftmax) when the
/// vocabularies are not the same.
std::shared_ptr<const VocabBridge> model_vocab_bridge(std::string_view target_model,
                                                      int64_t target_vocab,
                                                      std::string_view draft_model,
                                                      int64_t draft_vocab);

/// speculative_decode, or vocab_speculative_decode when `bridge` is given: the one choice every
/// caller that may pair two vocabularies makes.
DecodeResult speculative_decode(LanguageModel& target, LanguageModel& draft,
                                const VocabBridge* bridge,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config);

/// Speculative decoding of target-token prompts with `config.verifier` one of tli, slem, slrs and a
/// draft of the bridge's draft vocabulary. Step s of request b proposes up to γ_b = min(γ, tokens
/// left − 1) target tokens:
///   tli   position i: q_i from the draft, x_i drawn from q_i restricted to the intersection with
///   the
///         uniform at (seed; id(b), s, i, kDraftSample); drafting stops early where q_i gives the
///         intersection no mass;
///   slem  draft tokens drawn one at a time (draw j at position j, kDraftSample) until the target's
///         tokenisation of the text has γ_b + 1 tokens (or the text reaches γ_b·L + 1 bytes, L the
///         longest target string, or holds a byte the target cannot encode); the first γ_b of them
///         are the proposals;
///   slrs  bytes drawn (proposal i, draw j: position i, kDraftSample, index j) while the text of
///         the proposal stays a prefix of a target string; it proposes the target token spelled
///         just before the byte that left (that byte starts the next proposal), or fails.
/// One target call scores every request's proposals; tli and slrs verify with
/// verify_string_rejection (core/verify/verify_string.hpp), slem with sampled-match (plain
/// decoding's tokens). The draft's sequence is then the draft's encoding of each committed target
/// token's text, appended in turn. Metrics as speculative_decode's, with accepted_bytes; the
/// Σ min(p, q) estimate is recorded for tli only (the others have no q row over the target's
/// tokens). Throws InvalidInput for a verifier that shares vocabularies, vocabulary sizes that do
/// not match the models, or slrs with a draft whose tokens are not single bytes.
DecodeResult vocab_speculative_decode(LanguageModel& target, LanguageModel& draft,
                                      const VocabBridge& bridge,
                                      std::span<const std::vector<int32_t>> prompts,
                                      const DecodeConfig& config);

}  // namespace speclab
