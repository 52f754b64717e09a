// Verifies a batch held in this program's own arrays with the installed speclab::verify, and
// checks what must hold whatever the uniforms: a draft equal to the target is accepted whole
// (every accept test passes: u·q(x) ≤ p(x) for u < 1), and a one-hot target at a token the draft
// did not propose rejects it and emits that token (the residual max(0, p − q) is one-hot there).
#include <cstdio>
#include <string>
#include <vector>

#include <speclab/core/verify/verifier.hpp>
#include <speclab/core/verify/verify_chain.hpp>

int main() {
  constexpr int64_t kBatch = 2, kGamma = 2, kVocab = 4;
  // Request 0: p = q = (0.1, 0.2, 0.3, 0.4) at every position, drafts 3, 1.
  // Request 1: p one-hot at token 2 everywhere, q = (0.5, 0.5, 0, 0), drafts 0, 1.
  const auto rows = [](std::vector<float> row, int times) {
    std::vector<float> out;
    for (int i = 0; i < times; ++i) out.insert(out.end(), row.begin(), row.end());
    return out;
  };
  std::vector<float> probs_target = rows({0.1f, 0.2f, 0.3f, 0.4f}, kGamma + 1);
  const std::vector<float> one_hot = rows({0.f, 0.f, 1.f, 0.f}, kGamma + 1);
  probs_target.insert(probs_target.end(), one_hot.begin(), one_hot.end());
  std::vector<float> probs_draft = rows({0.1f, 0.2f, 0.3f, 0.4f}, kGamma);
  const std::vector<float> half = rows({0.5f, 0.5f, 0.f, 0.f}, kGamma);
  probs_draft.insert(probs_draft.end(), half.begin(), half.end());
  const std::vector<int32_t> draft_tokens = {3, 1, 0, 1};

  const speclab::ChainBatch batch{.batch = kBatch,
                                  .gamma = kGamma,
                                  .vocab = kVocab,
                                  .probs_target = probs_target,
                                  .probs_draft = probs_draft,
                                  .draft_tokens = draft_tokens,
                                  .n_draft = {},
                                  .request_ids = {}};
  const speclab::ChainResult r = speclab::verify_chain(batch, {.seed = 1234});
  std::printf(
      "verifier %s: request 0 emitted %d %d %d (accepted %d); request 1 emitted %d "
      "(accepted %d)\n",
      std::string(speclab::verifier_name(speclab::make_verifier("token"))).c_str(),
      r.emitted_tokens[0], r.emitted_tokens[1], r.emitted_tokens[2], r.n_accepted[0],
      r.emitted_tokens[3], r.n_accepted[1]);
  const bool ok = r.n_accepted[0] == 2 && r.emitted_tokens[0] == 3 && r.emitted_tokens[1] == 1 &&
                  r.emitted_tokens[2] >= 0 && r.n_accepted[1] == 0 && r.emitted_tokens[3] == 2 &&
                  r.emitted_tokens[4] == -1 && !r.lossy;
  std::printf("%s\n", ok ? "outside project: ok" : "outside project: WRONG RESULT");
  return ok ? 0 : 1;
}
