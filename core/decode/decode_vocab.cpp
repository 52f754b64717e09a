// Speculative decoding with a draft of another vocabulary (see decode_vocab.hpp).
#include "core/decode/decode_vocab.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode_detail.hpp"
#include "core/models/model_registry.hpp"
#include "core/verify/verify_string.hpp"

namespace speclab {
namespace {

using namespace detail;

// One request's proposals for a step.
struct Proposal {
  std::vector<int32_t> tokens;  // target ids t_1..t_k
  std::vector<double> psi;      // tli, slrs: ψ_i(t_i)
  bool failed_last = false;     // slrs: proposal k+1 failed (⊥)
  std::vector<float> psi_rows;  // tli: [k+1, V_target] ψ_i over the target's tokens
  // slrs: per position i ≤ k, the draft sequence's length when proposal i began and the byte it
  // began with (drawn by proposal i − 1 as its lookahead), or -1.
  std::vector<size_t> start;
  std::vector<int> carried;
  std::vector<int32_t> context;  // slrs: the draft sequence after the last draw
};

class VocabEngine {
 public:
  VocabEngine(LanguageModel& target, LanguageModel& draft, const VocabBridge& bridge,
              const DecodeConfig& config)
      : target_(target), draft_(draft), bridge_(bridge), config_(config) {}

  DecodeResult run(std::span<const std::vector<int32_t>> prompts);

 private:
  // The draft's tokens for the text of target tokens.
  void append_draft_tokens(std::vector<int32_t>& out, std::span<const int32_t> target_tokens) const;
  // Draft row after `context` (one position).
  std::vector<float> draft_row(std::span<const int32_t> context, int64_t b);

  Proposal propose_tli(int64_t b, uint32_t id, uint32_t step, int64_t gamma);
  Proposal propose_slem(int64_t b, uint32_t id, uint32_t step, int64_t gamma);
  Proposal propose_slrs(int64_t b, uint32_t id, uint32_t step, int64_t gamma);
  // slrs: ψ_i(t) conditional on what proposal i began with.
  double slrs_psi(int64_t b, const Proposal& proposal, int64_t i, int32_t t);

  LanguageModel& target_;
  LanguageModel& draft_;
  const VocabBridge& bridge_;
  const DecodeConfig& config_;
  std::vector<std::vector<int32_t>> target_seq_, draft_seq_;
};

void VocabEngine::append_draft_tokens(std::vector<int32_t>& out,
                                      std::span<const int32_t> target_tokens) const {
  for (const int32_t t : target_tokens) {
    const std::string& text = bridge_.target.bytes[static_cast<size_t>(t)];
    const std::vector<int32_t> ids = bridge_.encode_draft(text);
    out.insert(out.end(), ids.begin(), ids.end());
  }
}

std::vector<float> VocabEngine::draft_row(std::span<const int32_t> context, int64_t b) {
  const ScoreRequest request{context, 1, b};
  return draft_.score(std::span(&request, 1), config_.draft_sampling);
}

Proposal VocabEngine::propose_tli(int64_t b, uint32_t id, uint32_t step, int64_t gamma) {
  const int64_t vt = bridge_.target.size();
  const std::vector<int32_t>& map = bridge_.map.draft_to_target;
  Proposal out;
  std::vector<int32_t> context = draft_seq_[b];
  for (int64_t i = 0; i < gamma; ++i) {
    std::vector<float> restricted = draft_row(context, b);
    double mass = 0.0;
    for (size_t x = 0; x < restricted.size(); ++x) {
      if (map[x] < 0) restricted[x] = 0.0f;
      mass += restricted[x];
    }
    if (mass <= 0.0 || fixed_point_total(restricted) == 0) break;
    const RandomAddress a{config_.seed,          id, step, static_cast<uint32_t>(i + 1),
                          Purpose::kDraftSample, 0};
    const int32_t x = sample_categorical(restricted, philox_bits(a));
    // ψ_i(t) = Σ over the draft ids that spell t of q(x) / mass (mutant: without / mass).
    const double scale = mutant(Mutant::kTliUnnormalised) ? 1.0 : 1.0 / mass;
    out.psi_rows.resize((i + 1) * vt, 0.0f);
    float* row = &out.psi_rows[i * vt];
    for (size_t y = 0; y < restricted.size(); ++y) {
      if (restricted[y] > 0.0f) row[map[y]] += static_cast<float>(restricted[y] * scale);
    }
    out.tokens.push_back(map[x]);
    out.psi.push_back(row[map[x]]);
    context.push_back(x);
  }
  return out;
}

Proposal VocabEngine::propose_slem(int64_t b, uint32_t id, uint32_t step, int64_t gamma) {
  Proposal out;
  if (gamma == 0) return out;
  const int64_t max_bytes = gamma * bridge_.target_trie.max_length() + 1;
  std::vector<int32_t> context = draft_seq_[b];
  std::string text;
  std::vector<int32_t> encoded;
  for (uint32_t j = 0;; ++j) {
    const std::vector<float> q = draft_row(context, b);
    const RandomAddress a{config_.seed, id, step, j + 1, Purpose::kDraftSample, 0};
    const int32_t x = sample_categorical(q, philox_bits(a));
    text += bridge_.draft.bytes[static_cast<size_t>(x)];
    context.push_back(x);
    encoded = bridge_.encode_target(text);
    // The target's tokenizer stops before a byte it has no token for: more text cannot help.
    size_t spelled = 0;
    for (const int32_t t : encoded) spelled += bridge_.target.bytes[static_cast<size_t>(t)].size();
    if (static_cast<int64_t>(encoded.size()) >= gamma + 1 || spelled < text.size() ||
        static_cast<int64_t>(text.size()) >= max_bytes) {
      break;
    }
  }
  encoded.resize(std::min<size_t>(encoded.size(), static_cast<size_t>(gamma)));
  out.tokens = std::move(encoded);
  return out;
}

Proposal VocabEngine::propose_slrs(int64_t b, uint32_t id, uint32_t step, int64_t gamma) {
  const ByteTrie& trie = bridge_.target_trie;
  const std::vector<int32_t>& byte_id = bridge_.draft_byte_ids;
  Proposal out;
  std::vector<int32_t> context = draft_seq_[b];
  int carried = -1;  // the byte that ended the previous proposal
  for (int64_t i = 0; i < gamma; ++i) {
    out.start.push_back(context.size());
    out.carried.push_back(carried);
    int32_t node = ByteTrie::kRoot;
    double psi = 1.0;
    for (uint32_t draw = 0;; ++draw) {
      int byte = carried;
      std::vector<float> q;
      if (byte < 0) {
        q = draft_row(context, b);
        const RandomAddress a{config_.seed,          id,  step, static_cast<uint32_t>(i + 1),
                              Purpose::kDraftSample, draw};
        const int32_t x = sample_categorical(q, philox_bits(a));
        byte = static_cast<uint8_t>(bridge_.draft.bytes[static_cast<size_t>(x)][0]);
      }
      carried = -1;
      const int32_t child = trie.child(node, static_cast<uint8_t>(byte));
      if (child != ByteTrie::kNone) {
        if (!q.empty()) psi *= q[static_cast<size_t>(byte_id[byte])];
        context.push_back(byte_id[byte]);
        node = child;
        continue;
      }
      // The byte leaves the target's prefixes: P(leaving here) = 1 − Σ over the bytes that stay.
      if (!q.empty()) {
        double stay = 0.0;
        for (const uint8_t c : trie.next_bytes(node)) {
          if (byte_id[c] >= 0) stay += q[static_cast<size_t>(byte_id[c])];
        }
        psi *= std::max(0.0, 1.0 - stay);
      }
      carried = byte;
      break;
    }
    const int32_t token = node == ByteTrie::kRoot ? -1 : trie.token(node);
    if (token < 0 || psi <= 0.0) {
      out.failed_last = true;
      break;
    }
    out.tokens.push_back(token);
    out.psi.push_back(std::min(psi, 1.0));
  }
  out.context = std::move(context);
  return out;
}

double VocabEngine::slrs_psi(int64_t b, const Proposal& proposal, int64_t i, int32_t t) {
  if (bridge_.target.is_control(t)) return 0.0;
  const std::string& s = bridge_.target.bytes[static_cast<size_t>(t)];
  const int carried = proposal.carried[static_cast<size_t>(i)];
  size_t skip = 0;  // a byte proposal i began with is given: probability 1
  if (carried >= 0) {
    if (static_cast<uint8_t>(s[0]) != carried) return 0.0;
    skip = 1;
  }
  const std::vector<int32_t>& byte_id = bridge_.draft_byte_ids;
  std::vector<int32_t> sequence(proposal.context.begin(),
                                proposal.context.begin() + proposal.start[static_cast<size_t>(i)]);
  for (const char c : s) {
    const int32_t x = byte_id[static_cast<uint8_t>(c)];
    if (x < 0) return 0.0;  // a byte the draft cannot write
    sequence.push_back(x);
  }
  const int64_t rows = static_cast<int64_t>(s.size() - skip) + 1;
  const ScoreRequest request{sequence, rows, b};
  const std::vector<float> q = draft_.score(std::span(&request, 1), config_.draft_sampling);
  const int64_t v = bridge_.draft.size();
  double psi = 1.0;
  for (size_t j = skip; j < s.size(); ++j) {
    psi *= q[(j - skip) * v + byte_id[static_cast<uint8_t>(s[j])]];
  }
  const int32_t node = bridge_.target_trie.walk(ByteTrie::kRoot, s);
  double stay = 0.0;
  for (const uint8_t c : bridge_.target_trie.next_bytes(node)) {
    if (byte_id[c] >= 0) stay += q[(rows - 1) * v + byte_id[c]];
  }
  return psi * std::max(0.0, 1.0 - stay);
}

DecodeResult VocabEngine::run(std::span<const std::vector<int32_t>> prompts) {
  const VocabRule rule = vocab_rule_of(config_.verifier);
  const int64_t vt = target_.vocab();
  const int64_t batch = static_cast<int64_t>(prompts.size());
  DecodeResult result;
  DecodeMetrics& m = result.metrics;
  result.tokens.resize(prompts.size());
  m.requests = batch;
  target_seq_.assign(prompts.begin(), prompts.end());
  draft_seq_.assign(prompts.size(), {});
  for (int64_t b = 0; b < batch; ++b) {
    append_draft_tokens(draft_seq_[b], prompts[b]);
    if (draft_seq_[b].empty()) {
      throw InvalidInput(
          fmt::format("prompt {} spells nothing the draft's vocabulary ({}) can encode", b,
                      bridge_.draft.name));
    }
  }
  // The prompt pass of both models, each over its own tokens, timed per request.
  LanguageModel* const target_only[] = {&target_};
  LanguageModel* const draft_only[] = {&draft_};
  prefill_prompts(target_only, prompts, m);
  std::vector<double> target_prefill = m.request_prefill_seconds;
  const int64_t target_prompt_tokens = m.prompt_tokens;
  prefill_prompts(draft_only, draft_seq_, m);
  for (int64_t b = 0; b < batch; ++b) m.request_prefill_seconds[b] += target_prefill[b];
  m.prompt_tokens = target_prompt_tokens;
  const ModelStats target_before = target_.stats(), draft_before = draft_.stats();
  const double start = now_seconds();
  m.start_positions(config_.gamma);

  std::vector<uint8_t> finished(prompts.size(), 0);
  const auto output_position = [&](int64_t b) {
    return config_.generated_before(b) + static_cast<int64_t>(result.tokens[b].size());
  };
  for (uint32_t step = config_.first_step;; ++step) {
    std::vector<int64_t> active;
    for (int64_t b = 0; b < batch; ++b) {
      if (!finished[b]) active.push_back(b);
    }
    if (active.empty()) break;
    const int64_t n_active = static_cast<int64_t>(active.size());

    // Draft phase, request by request.
    std::vector<Proposal> proposals;
    for (const int64_t b : active) {
      const int64_t gamma =
          std::min(config_.gamma, config_.max_new_tokens - output_position(b) - 1);
      const uint32_t id = config_.request_id(b);
      switch (rule) {
        case VocabRule::kIntersection:
          proposals.push_back(propose_tli(b, id, step, gamma));
          break;
        case VocabRule::kStringMatch:
          proposals.push_back(propose_slem(b, id, step, gamma));
          break;
        case VocabRule::kStringRejection:
          proposals.push_back(propose_slrs(b, id, step, gamma));
          break;
        case VocabRule::kShared:
          throw Error("vocab_speculative_decode: a shared-vocabulary verifier");
      }
    }

    // Target phase: one call over k_b + 1 positions per request.
    std::vector<ScoreRequest> requests;
    for (int64_t k = 0; k < n_active; ++k) {
      std::vector<int32_t>& seq = target_seq_[active[k]];
      seq.insert(seq.end(), proposals[k].tokens.begin(), proposals[k].tokens.end());
      requests.push_back({seq, static_cast<int64_t>(proposals[k].tokens.size()) + 1, active[k]});
    }
    const std::vector<float> probs = target_.score(requests, config_.sampling);

    // Verification and commit, request by request.
    const double verify_start = now_seconds();
    int64_t row0 = 0;
    for (int64_t k = 0; k < n_active; ++k) {
      const int64_t b = active[k];
      Proposal& proposal = proposals[k];
      const int64_t drafted = static_cast<int64_t>(proposal.tokens.size());
      const std::span<const float> p(&probs[row0 * vt], (drafted + 1) * vt);
      row0 += drafted + 1;
      const uint32_t id = config_.request_id(b);
      std::vector<int32_t> emitted;
      int64_t n = 0;
      bool fallback = false;
      if (rule == VocabRule::kStringMatch) {
        const int32_t n_draft = static_cast<int32_t>(drafted);
        const int64_t position = output_position(b);
        const ChainBatch chain{1,
                               drafted,
                               vt,
                               p,
                               {},
                               proposal.tokens,
                               std::span(&n_draft, 1),
                               std::span(&id, 1),
                               std::span(&position, 1)};
        const ChainResult verdict = verify(MatchVerifier{.method = MatchMethod::kSampledMatch,
                                                         .sampling = config_.token_sampling(),
                                                         .vocab = VocabRule::kStringMatch},
                                           chain, config_.seed, step);
        n = verdict.n_accepted[0];
        emitted.assign(verdict.emitted_tokens.begin(), verdict.emitted_tokens.begin() + n + 1);
      } else {
        const StringRejectionStep string_step{
            .vocab = vt,
            .probs_target = p,
            .proposals = proposal.tokens,
            .proposal_psi = proposal.psi,
            .failed_last = proposal.failed_last,
            .psi =
                [&](int64_t i, int32_t t) {
                  return rule == VocabRule::kIntersection
                             ? static_cast<double>(proposal.psi_rows[i * vt + t])
                             : slrs_psi(b, proposal, i, t);
                },
            .seed = config_.seed,
            .request = id,
            .step = step};
        const StringRejectionResult verdict = verify_string_rejection(string_step);
        n = verdict.n_accepted;
        emitted = verdict.emitted;
        fallback = verdict.residual_fallback;
        if (rule == VocabRule::kIntersection) {
          for (int64_t i = 0; i < std::min(n + 1, drafted); ++i) {
            m.alpha_sum_min += overlap(&p[i * vt], &proposal.psi_rows[i * vt], vt);
          }
        }
      }

      // Commit: the target's sequence back to its verified prefix plus the emitted tokens; the
      // draft's rebuilt from the committed tokens' text.
      std::vector<int32_t>& seq = target_seq_[b];
      seq.resize(seq.size() - drafted);
      const int64_t verified = static_cast<int64_t>(seq.size());
      bool eos = false;
      const int64_t appended = append_until_eos(seq, emitted, target_.eos_token(), eos);
      result.tokens[b].insert(result.tokens[b].end(), seq.end() - appended, seq.end());
      for (int64_t i = 0; i < std::min(n, appended); ++i) {
        m.accepted_bytes += static_cast<int64_t>(bridge_.target.bytes[emitted[i]].size());
      }
      const int64_t draft_verified = static_cast<int64_t>(draft_seq_[b].size());
      append_draft_tokens(draft_seq_[b], std::span(seq).subspan(verified, appended));
      target_.truncate(b, verified + std::min(n, appended));
      draft_.truncate(b, draft_verified);
      finished[b] = eos || output_position(b) >= config_.max_new_tokens;
      if (finished[b]) m.request_decode_seconds[b] = now_seconds() - start;
      m.record_step(drafted, std::min(n + 1, drafted), n, appended, fallback);
    }
    m.verify_seconds += now_seconds() - verify_start;
  }
  for (int64_t b = 0; b < batch; ++b) {
    target_.release(b);
    draft_.release(b);
  }
  m.target = stats_since(target_.stats(), target_before);
  m.draft = stats_since(draft_.stats(), draft_before);
  m.decode_seconds = now_seconds() - start;
  return result;
}

}  // namespace

std::shared_ptr<const VocabBridge> make_vocab_bridge(TokenVocabulary target, TokenVocabulary draft,
                                                     EncodeBytes encode_target,
                                                     EncodeBytes encode_draft) {
  VocabMap map = intersect_vocabularies(target, draft);
  ByteTrie trie(target);
  auto bridge = std::make_shared<VocabBridge>(VocabBridge{.target = std::move(target),
                                                          .draft = std::move(draft),
                                                          .encode_target = std::move(encode_target),
                                                          .encode_draft = std::move(encode_draft),
                                                          .map = std::move(map),
                                                          .target_trie = std::move(trie),
                                                          .draft_byte_ids = {}});
  // Greedy longest match over a side's own strings, for an encoder not given.
  const auto longest_match = [](const TokenVocabulary& vocabulary) {
    auto trie = std::make_shared<const ByteTrie>(vocabulary);
    return [trie](std::string_view bytes) { return encode_longest_match(*trie, bytes); };
  };
  if (!bridge->encode_target) bridge->encode_target = longest_match(bridge->target);
  if (!bridge->encode_draft) bridge->encode_draft = longest_match(bridge->draft);
  bridge->draft_byte_ids = single_byte_ids(bridge->draft);
  return bridge;
}

DecodeResult vocab_speculative_decode(LanguageModel& target, LanguageModel& draft,
                                      const VocabBridge& bridge,
                                      std::span<const std::vector<int32_t>> prompts,
                                      const DecodeConfig& config) {
  const VocabRule rule = vocab_rule_of(config.verifier);
  if (rule == VocabRule::kShared) {
    throw InvalidInput(fmt::format(
        "verifier \"{}\" needs the draft's vocabulary to be the target's; with a draft of another "
        "vocabulary use tli, slem or slrs",
        verifier_name(config.verifier)));
  }
  if (target.vocab() != bridge.target.size() || draft.vocab() != bridge.draft.size()) {
    throw InvalidInput(fmt::format(
        "the vocabularies have {} (target {}) and {} (draft {}) tokens but the models have {} "
        "and {}",
        bridge.target.size(), bridge.target.name, bridge.draft.size(), bridge.draft.name,
        target.vocab(), draft.vocab()));
  }
  if (rule == VocabRule::kStringRejection && bridge.draft_byte_ids.empty()) {
    throw InvalidInput(fmt::format(
        "slrs decodes with a draft whose tokens are single bytes; {}'s tokens spell several bytes "
        "(its strings' probabilities would sum over their tokenizations): use tli or slem",
        bridge.draft.name));
  }
  validate_decode_config(config, prompts, target.vocab(), true);
  return VocabEngine(target, draft, bridge, config).run(prompts);
}

std::shared_ptr<const VocabBridge> model_vocab_bridge(std::string_view target_model,
                                                      int64_t target_vocab,
                                                      std::string_view draft_model,
                                                      int64_t draft_vocab) {
  const auto pair = vocabularies_to_join(target_model, target_vocab, draft_model, draft_vocab);
  if (!pair) return nullptr;
  const auto& [target, draft] = *pair;
  return make_vocab_bridge(*target.vocabulary, *draft.vocabulary, target.encode, draft.encode);
}

DecodeResult speculative_decode(LanguageModel& target, LanguageModel& draft,
                                const VocabBridge* bridge,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config) {
  return bridge != nullptr ? vocab_speculative_decode(target, draft, *bridge, prompts, config)
                           : speculative_decode(target, draft, prompts, config);
}

}  // namespace speclab
