// The headline property of the match verifiers (docs/verifiers.md V8), shared by the property
// tests (LinearSoftmax, n-gram, prompt-lookup and synthetic drafts) and the model tests
// (SmolLM2-135M with its layer-skip, n-gram and prompt-lookup drafts): with one seed, speculative
// decoding with `coupled` emits exactly plain Gumbel decoding's tokens, and with `sampled-match`
// exactly plain decoding's tokens under either rule, for any drafter. No statistics: token for
// token.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/models/model.hpp"

namespace speclab::testing {

/// One drafter against one target; `make_draft` builds a fresh draft for a configuration (a
/// synthetic draft depends on the pipelines), `make_target` a fresh target.
struct DrafterCase {
  std::string name;
  std::function<std::unique_ptr<LanguageModel>()> make_target;
  std::function<std::unique_ptr<LanguageModel>(const DecodeConfig&)> make_draft;
  bool filters = true;  ///< whether the draft's pipeline may carry top-k / top-p / min-p
  bool accepts = true;  ///< whether coupled must accept some drafts on these short prompts
};

/// The configuration of γ: T ∈ {0.5, 1, 1.5}, no filter / top-k / top-p / min-p and batch sizes
/// {1, 5, 16} rotate with γ, so that γ = 1..8 covers every value of each; the token budget leaves
/// the last step of a request ragged, and request ids are not the slots.
inline DecodeConfig match_config(int64_t gamma, bool filters, int64_t vocab) {
  constexpr std::array<double, 3> kTemperatures = {0.5, 1.0, 1.5};
  DecodeConfig c;
  c.seed = 7000 + static_cast<uint64_t>(gamma);
  c.gamma = gamma;
  c.max_new_tokens = 11 + gamma % 3;
  c.sampling.temperature = kTemperatures[gamma % 3];
  switch (gamma % 4) {
    case 1:
      c.sampling.top_k = std::min<int64_t>(5, vocab);
      break;
    case 2:
      c.sampling.top_p = 0.9;
      break;
    case 3:
      c.sampling.min_p = 0.05;
      break;
    default:
      break;
  }
  // The draft samples at its own temperature (and filters): the emitted tokens must not care.
  c.draft_sampling.temperature = kTemperatures[(gamma + 1) % 3];
  if (filters) {
    c.draft_sampling.top_k = c.sampling.top_k;
    c.draft_sampling.top_p = c.sampling.top_p;
    c.draft_sampling.min_p = c.sampling.min_p;
  }
  const int64_t batch = std::array<int64_t, 3>{1, 5, 16}[gamma % 3];
  for (int64_t b = 0; b < batch; ++b) c.request_ids.push_back(static_cast<uint32_t>(100 + 7 * b));
  return c;
}

/// Prompts of 1 to 6 tokens, one per request id.
inline std::vector<std::vector<int32_t>> match_prompts(const DecodeConfig& c, int64_t vocab) {
  std::vector<std::vector<int32_t>> prompts;
  for (size_t b = 0; b < c.request_ids.size(); ++b) {
    std::vector<int32_t> p;
    for (size_t i = 0; i <= (b * 5 + c.gamma) % 6; ++i) {
      p.push_back(static_cast<int32_t>((b * 131 + i * 17 + c.gamma) % vocab));
    }
    prompts.push_back(std::move(p));
  }
  return prompts;
}

/// For γ in `gammas`: coupled against plain Gumbel decoding, and sampled-match against plain
/// decoding with the rule γ selects; every request's tokens must be equal.
inline void expect_match_equals_plain(const DrafterCase& drafter,
                                      const std::vector<int64_t>& gammas) {
  for (const int64_t gamma : gammas) {
    auto target = drafter.make_target();
    const int64_t v = target->vocab();
    for (const char* name : {"coupled", "sampled-match"}) {
      DecodeConfig c = match_config(gamma, drafter.filters, v);
      c.verifier = make_verifier(name);
      if (std::string(name) == "sampled-match") {
        c.sampling_rule = gamma % 2 ? TokenSampling::kGumbel : TokenSampling::kInverseCdf;
      }
      const auto prompts = match_prompts(c, v);
      const DecodeResult plain = plain_decode(*target, prompts, c);
      auto draft = drafter.make_draft(c);
      const DecodeResult spec = speculative_decode(*target, *draft, prompts, c);
      for (size_t b = 0; b < prompts.size(); ++b) {
        EXPECT_EQ(spec.tokens[b], plain.tokens[b])
            << drafter.name << ", " << name << " (" << to_string(c.token_sampling())
            << "), γ = " << gamma << ", T = " << c.sampling.temperature << ", request "
            << c.request_ids[b] << " of " << prompts.size();
      }
      // The property is not vacuous: drafts were accepted.
      if (std::string(name) == "coupled" && drafter.accepts) {
        EXPECT_GT(spec.metrics.accepted_positions, 0) << drafter.name << ", γ = " << gamma;
      }
    }
  }
}

}  // namespace speclab::testing
