// Markov-chain stream instances and a stream sampler for the statistical layer (docs/testing.md
// "Statistical checks"): the law of the first L tokens that speculative decoding emits over a
// Markov target and draft is the target chain's (or, for a lossy verifier, its own exact law), and
// a bug in context handling, rollback, the residual's shape or a uniform shared between steps
// changes it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/philox.hpp"
#include "core/exact/exact.hpp"
#include "core/models/markov.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verify_chain.hpp"
#include "tests/support/chain_fixture.hpp"

namespace speclab::testing {

/// A Markov pair as integer weights: rows[t] is the law of the next token after t.
struct MarkovPair {
  std::vector<std::vector<int>> target, draft;
  int vocab() const { return static_cast<int>(target.size()); }
};

/// V = 4, every row sums to 16 (exact in float). In every context the residual (p − q)⁺ has
/// support ≥ 2, so a stream check sees the residual's shape, not only its support:
///   after 0: p − q = (3, 3, −2, −4)    after 1: (−4, 2, −2, 4)
///   after 2: (3, 2, −7, 2)             after 3: (−4, 4, −2, 2)
/// The draft proposes 1 → 0 and 3 → 2, which the target forbids (always rejected), and never
/// proposes 2 → 1, which the target allows (only the residual emits it). Σ min(p, q) = 10/16,
/// 10/16, 9/16, 10/16: both accepted drafts (and bonuses) and rejections are frequent.
inline MarkovPair stream_pair_v4() {
  return {{{6, 5, 4, 1}, {0, 4, 6, 6}, {5, 2, 3, 6}, {4, 8, 0, 4}},
          {{3, 2, 6, 5}, {4, 2, 8, 2}, {2, 0, 10, 4}, {8, 4, 2, 2}}};
}

inline exact::Row exact_weights_row(const std::vector<int>& weights) {
  exact::Q total = 0;
  for (int w : weights) total += w;
  exact::Row row;
  for (int w : weights) row.push_back(exact::Q(w) / total);
  return row;
}

inline exact::MarkovChain exact_chain(const std::vector<std::vector<int>>& weights) {
  exact::MarkovChain chain{static_cast<int>(weights.size()), {}};
  for (const auto& w : weights) chain.transition.push_back(exact_weights_row(w));
  return chain;
}

/// The table model of `weights` (core/models/markov.hpp), for the decoding engines.
inline MarkovModel markov_model(const char* name, const std::vector<std::vector<int>>& weights) {
  std::vector<double> table;
  for (const auto& w : weights) {
    double total = 0.0;
    for (int x : w) total += x;
    for (int x : w) table.push_back(x / total);
  }
  return MarkovModel(name, static_cast<int64_t>(weights.size()), 1, table);
}

/// The category of a stream of `length` tokens: Σ_k token_k·V^k.
inline int64_t stream_code(const int32_t* tokens, int vocab, int length) {
  int64_t code = 0;
  for (int k = length - 1; k >= 0; --k) code = code * vocab + tokens[k];
  return code;
}

inline int64_t stream_categories(int vocab, int length) {
  int64_t n = 1;
  for (int k = 0; k < length; ++k) n *= vocab;
  return n;
}

/// An exact law of `length`-token streams as probabilities indexed by stream_code, plus one last
/// category of probability 0 for a malformed stream (a verifier that emitted a −1 token).
inline std::vector<double> stream_probs(const exact::Distribution& dist, int vocab, int length) {
  std::vector<double> probs(stream_categories(vocab, length) + 1, 0.0);
  for (const auto& [seq, prob] : dist) {
    const std::vector<int32_t> tokens(seq.begin(), seq.end());
    probs[stream_code(tokens.data(), vocab, length)] = prob.convert_to<double>();
  }
  return probs;
}

/// "impossible sequence a,b,c" when a χ² result flags a probability-0 stream, else "".
inline std::string impossible_stream(int64_t category, int vocab, int length) {
  if (category < 0) return {};
  if (category == stream_categories(vocab, length)) return "a stream with a −1 token";
  exact::Sequence seq;
  for (int64_t code = category; static_cast<int>(seq.size()) < length; code /= vocab) {
    seq.push_back(static_cast<int>(code % vocab));
  }
  return "impossible sequence " + exact::sequence_key(seq);
}

/// One verification step of a chain verifier at decoding step `step`.
using ChainStepVerifier = std::function<ChainResult(const ChainBatch&, uint32_t step)>;

/// Speculative decoding of n_samples independent streams of `length` tokens after `start`, with
/// the verifier called directly (so the reference and the fast path can both be tested): each
/// step drafts γ tokens autoregressively from the draft chain from the last emitted token, takes
/// p_1 = T[last], p_{i+1} = T[x_i], verifies, appends the emitted tokens and continues; the stream
/// is then cut to `length` tokens. Stream s is request id s in every step, the step counter goes
/// into every address, drafts use kDraftSample at (seed; s, step, i). Returns counts indexed by
/// stream_code, and in the last category the streams in which the verifier emitted a −1 (the
/// category stream_probs gives probability 0). `batch_size` streams are verified per call.
inline std::vector<int64_t> sample_chain_stream(const MarkovPair& pair, int start, int gamma,
                                                int length, uint64_t seed, int64_t n_samples,
                                                const ChainStepVerifier& verify,
                                                int64_t batch_size = 65536) {
  const int v = pair.vocab();
  std::vector<std::vector<float>> target(v, std::vector<float>(v)), draft = target;
  for (int t = 0; t < v; ++t) {
    fill_row(target[t].data(), pair.target[t]);
    fill_row(draft[t].data(), pair.draft[t]);
  }
  const int64_t malformed = stream_categories(v, length);
  std::vector<int64_t> counts(malformed + 1, 0);
  std::vector<std::vector<int32_t>> streams;
  std::vector<char> bad;
  std::vector<int64_t> active;
  for (int64_t chunk = 0; chunk < n_samples; chunk += batch_size) {
    const int64_t b = std::min(batch_size, n_samples - chunk);
    streams.assign(b, {});
    bad.assign(b, 0);
    for (uint32_t step = 0;; ++step) {
      active.clear();
      for (int64_t r = 0; r < b; ++r) {
        if (static_cast<int>(streams[r].size()) < length) active.push_back(r);
      }
      if (active.empty()) break;
      OwnedChainBatch batch(static_cast<int64_t>(active.size()), gamma, v);
      batch.request_ids.resize(active.size());
      for (size_t j = 0; j < active.size(); ++j) {
        const int64_t r = active[j];
        const auto id = static_cast<uint32_t>(chunk + r);
        batch.request_ids[j] = id;
        int prev = streams[r].empty() ? start : streams[r].back();
        for (int i = 0; i < gamma; ++i) {
          std::copy(target[prev].begin(), target[prev].end(), batch.target_row(j, i));
          std::copy(draft[prev].begin(), draft[prev].end(), batch.draft_row(j, i));
          const RandomAddress a{seed, id, step, static_cast<uint32_t>(i + 1), Purpose::kDraftSample,
                                0};
          prev = sample_categorical(draft[prev], philox_bits(a));
          batch.token(j, i) = prev;
        }
        std::copy(target[prev].begin(), target[prev].end(), batch.target_row(j, gamma));
      }
      const ChainResult res = verify(batch.view(), step);
      for (size_t j = 0; j < active.size(); ++j) {
        const int32_t* emitted = &res.emitted_tokens[j * (gamma + 1)];
        auto& s = streams[active[j]];
        s.insert(s.end(), emitted, emitted + res.n_emitted(static_cast<int64_t>(j)));
        if (std::any_of(s.begin(), s.end(), [](int32_t t) { return t < 0; })) {
          bad[active[j]] = 1;
          s.assign(length, 0);  // ends the stream; counted as malformed below
        }
      }
    }
    for (int64_t r = 0; r < b; ++r) {
      ++counts[bad[r] ? malformed : stream_code(streams[r].data(), v, length)];
    }
  }
  return counts;
}

}  // namespace speclab::testing
