// Decoding engines (docs/architecture.md "core/decode"): plain decoding and speculative decoding
// (draft γ tokens, one target call over γ+1 positions, verify with docs/verifiers.md V1-V3),
// batched over requests, with every uniform Philox-addressed per docs/randomness.md and the metrics
// of docs/verifiers.md "Metrics every run records".
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/model.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verifier.hpp"

namespace speclab {

struct DecodeConfig {
  int64_t max_new_tokens = 64;    ///< tokens generated per request (fewer if EOS comes first)
  SamplingParams sampling;        ///< the target's pipeline (and plain decoding's)
  SamplingParams draft_sampling;  ///< the draft's pipeline; q is what the draft sampled from
  uint64_t seed = 0;
  int64_t gamma = 4;  ///< draft tokens per step (chain verifiers; a tree's depth plays its role)
  /// Which verifier a speculative step uses, with its parameters (core/verify/verifier.hpp).
  VerifierSpec verifier = ChainVerifier{};
  /// The id that addresses prompt b's random numbers (docs/randomness.md), distinct per prompt;
  /// empty means b. A request given the same id, seed and settings gets the same tokens whatever
  /// else is in the batch and wherever it sits (the device loop, gpu/decode, takes only the
  /// default).
  std::vector<uint32_t> request_ids;

  /// How plain decoding draws the token at each output position (`decode.sampling`): inverse CDF
  /// from one uniform, or Gumbel-max with noise addressed by (seed, request, output position)
  /// (core/sampling/sampling.hpp sample_output_token). The match verifiers (coupled,
  /// sampled-match) draw the target's tokens by the same rule, so they emit plain decoding's
  /// tokens; coupled requires kGumbel. Unset: Gumbel when the verifier is coupled, else inverse
  /// CDF (token_sampling()), so a plain run of a coupled config is plain Gumbel decoding.
  std::optional<TokenSampling> sampling_rule;
  /// Resuming a run that stopped after `first_step` steps: prompt b is the original prompt with
  /// the generated[b] tokens it had committed appended, max_new_tokens stays the whole budget,
  /// steps count on from first_step and output positions from generated[b]. The resumed run then
  /// emits exactly the tokens the uninterrupted run would have (every engine: its noise is
  /// addressed by step and output position, never by where a run started). Empty: 0 each.
  uint32_t first_step = 0;
  std::vector<int64_t> generated;

  /// The id of prompt b: request_ids[b], or b when none are given.
  uint32_t request_id(int64_t b) const {
    return request_ids.empty() ? static_cast<uint32_t>(b) : request_ids[b];
  }
  /// The rule in force: sampling_rule, or its default for the verifier.
  TokenSampling token_sampling() const {
    if (sampling_rule) return *sampling_rule;
    const auto* match = std::get_if<MatchVerifier>(&verifier);
    return match != nullptr && match->method == MatchMethod::kCoupled ? TokenSampling::kGumbel
                                                                      : TokenSampling::kInverseCdf;
  }
  /// Tokens request b had generated before this run: generated[b], or 0.
  int64_t generated_before(int64_t b) const { return generated.empty() ? 0 : generated[b]; }
};

/// The metrics every run records (docs/verifiers.md). "accepted" never counts the bonus token;
/// "emitted" counts every token appended (accepted drafts plus the residual or bonus token, cut at
/// EOS).
struct DecodeMetrics {
  int64_t requests = 0;
  int64_t steps = 0;   ///< per-request steps (plain: tokens; speculative: verifications)
  int64_t tokens = 0;  ///< tokens generated over all requests
  std::vector<int32_t> step_accepted;  ///< per request-step, in order of (step, request)
  std::vector<int32_t> step_emitted;
  std::vector<int32_t> step_drafted;       ///< γ_b of that step (ragged near max_new_tokens)
  std::vector<int64_t> position_reached;   ///< [γ] steps whose position i was tested
  std::vector<int64_t> position_accepted;  ///< [γ] of those, accepted (conditional rate = a/r)
  std::vector<int64_t> position_offered;   ///< [γ] steps that drafted at least i tokens
  std::vector<int64_t> accepted_length_histogram;  ///< [γ+1] steps by accepted count n
  int64_t residual_fallbacks = 0;
  double alpha_sum_min = 0.0;  ///< Σ over tested positions of Σ_x min(p, q)
  /// The price of reproducibility, recorded by runs of the match verifiers (coupled,
  /// sampled-match) at the same tested positions: Σ of coupled's exact acceptance probability,
  /// of its bound (1 − TV)/(1 + TV), and of sampled-match's Σ p·q (coupled_acceptance and the
  /// others in core/verify/verify_match.hpp). Zero in other runs.
  double coupled_sum = 0.0, coupled_bound_sum = 0.0, sampled_match_sum = 0.0;
  int64_t tested_positions = 0;
  int64_t accepted_positions = 0;  ///< accepted draft tokens as verified (before any EOS cut)
  /// Bytes of the accepted draft tokens as emitted (a draft of another vocabulary,
  /// core/decode/decode_vocab.hpp; zero in other runs).
  int64_t accepted_bytes = 0;
  ModelStats target, draft;  ///< the models' work while decoding (the prompt pass not counted)
  double verify_seconds = 0.0;
  /// The prompt pass (LanguageModel::prefill of every model over every request) and the decoding
  /// after it: tokens per second and speedups are rates of decode_seconds, as a serving engine's
  /// decode rate is; a workload's long prompts would otherwise hide the decoding speed.
  int64_t prompt_tokens = 0;      ///< Σ prompt lengths
  int64_t prefill_positions = 0;  ///< positions the prompt pass computed, over every model
  double decode_seconds = 0.0;
  /// Per request: its prompt pass, and the decoding time until its last token.
  std::vector<double> request_prefill_seconds, request_decode_seconds;

  double prefill_seconds() const {
    double total = 0.0;
    for (double s : request_prefill_seconds) total += s;
    return total;
  }
  double seconds() const { return prefill_seconds() + decode_seconds; }  ///< both phases

  double alpha_estimate() const {
    return tested_positions ? alpha_sum_min / tested_positions : 0.0;
  }
  /// Records the three acceptance probabilities above at one tested position whose
  /// Σ min(p, q) is `overlap` (match_acceptance: one pass besides).
  void record_match_position(std::span<const float> p, std::span<const float> q, double overlap);

  double acceptance_rate() const {
    return tested_positions ? static_cast<double>(accepted_positions) / tested_positions : 0.0;
  }
  double emitted_per_step() const { return steps ? static_cast<double>(tokens) / steps : 0.0; }

  /// Sizes the per-position counters for `depth` draft positions (γ, or a tree's depth).
  void start_positions(int64_t depth);
  /// Counts one request's verification step, the one accounting of every speculative engine (the
  /// CPU engines and the device loop): `drafted` positions offered, the first `tested` of them
  /// tested (min(n + 1, drafted) on a chain), n accepted, `emitted` tokens appended (n + 1, fewer
  /// where EOS cuts the step) and whether the residual fell back to p. alpha_sum_min is the
  /// caller's: only an engine that sees the rows has the β_i.
  void record_step(int64_t drafted, int64_t tested, int64_t n, int64_t emitted,
                   bool residual_fallback);
};

struct DecodeResult {
  std::vector<std::vector<int32_t>> tokens;  ///< generated tokens per request (prompt excluded)
  DecodeMetrics metrics;
};

/// Checks the prompts (non-empty, token ids in [0, vocab)), the token budget, γ (speculative
/// only), the request ids (one per prompt, distinct), the resume point (one count per prompt,
/// each below max_new_tokens), coupled's Gumbel rule and both sampling pipelines; throws
/// InvalidInput naming what is wrong. Every engine, including the device loop
/// (gpu/decode/speculative_decode.hpp), starts with it.
void validate_decode_config(const DecodeConfig& config,
                            std::span<const std::vector<int32_t>> prompts, int64_t vocab,
                            bool speculative);

/// Every engine first runs the prompt pass (LanguageModel::prefill, one request at a time, timed
/// per request), then starts the decode clock; DecodeMetrics keeps the two apart.
///
/// Plain decoding: one target call (m = 1) per token; token t of request b (t counted from the
/// request's start, generated_before(b) included) is sample_output_token(p, token_sampling(), seed,
/// id(b), t): inverse CDF with the uniform at (seed; id(b), t, 0, kPlainSample), or Gumbel-max
/// with output position t's noise; id(b) = config.request_id(b) (as everywhere below). Under
/// T = 0 this is greedy decoding.
DecodeResult plain_decode(LanguageModel& model, std::span<const std::vector<int32_t>> prompts,
                          const DecodeConfig& config);

/// Speculative decoding (chain verifiers V1-V5; with VerifierFamily::kTree, tree decoding as
/// below). Step s of request b: γ_b = min(γ, tokens left - 1) draft tokens, each
/// x_i ~ q_i with the uniform at (seed; id(b), s, i, kDraftSample); one target call over γ_b+1
/// positions; verify_chain with request id id(b) and step s; append the accepted prefix and one
/// token, cutting after EOS; truncate both models to the new length. A verifier whose registry
/// row drafts with DraftRule::kOutputNoise (coupled) draws x_i = sample_gumbel(q_i) with the
/// noise of x_i's output position instead; the match verifiers read each request's output
/// position (ChainBatch::positions).
DecodeResult speculative_decode(LanguageModel& target, LanguageModel& draft,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config);

/// Tree decoding (docs/verifiers.md V6), what speculative_decode runs for VerifierFamily::kTree.
/// Step s of request b drafts a tree of depth D_b = min(depth, tokens left - 1) breadth-first: one
/// draft call per depth over every frontier node of every request; the children of a node are drawn
/// from its q by the tree method's law (i.i.d. and K-SEQ: independent draws; without replacement:
/// sequential draws with drawn tokens removed; top-k: the k most probable, lowest id on ties),
/// each draw with the uniform at (seed; id(b), s, depth, kDraftSample, index = draws so far in the
/// step). Then one target call over all nodes of all trees (each node's context is its path,
/// which is what a tree attention mask computes), verify_tree, append the accepted path and one
/// token. "Drafted" per step is the tree depth; position i counts depth-i candidates.
DecodeResult tree_speculative_decode(LanguageModel& target, LanguageModel& draft,
                                     std::span<const std::vector<int32_t>> prompts,
                                     const DecodeConfig& config);

}  // namespace speclab
