// The match verifiers' headline property on the real model (tests/support/match_equality.hpp):
// SmolLM2-135M with its layer-skip, token n-gram and prompt-lookup drafts emits plain decoding's
// tokens under coupled (plain Gumbel decoding) and sampled-match, token for token, at two draft
// lengths (the full sweep of γ, T, filters and batches runs on the smaller models in
// tests/property/match_decode_test.cpp).
// Skipped when `speclab fetch-model smollm2-135m` has not put the file in data/models/.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "core/models/model_registry.hpp"
#include "tests/support/match_equality.hpp"

namespace speclab {
namespace {

const std::filesystem::path kModel =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(MatchDecodeModel, SmolLM2DraftsEmitPlainDecodingsTokens) {
  if (!std::filesystem::exists(kModel)) {
    GTEST_SKIP() << kModel.string()
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)";
  }
  for (const std::string draft : {"layerskip:10-25", "ngram2-smollm2", "prompt-lookup-smollm2"}) {
    testing::DrafterCase drafter{draft + " for smollm2-135m",
                                 [] { return make_model("smollm2-135m"); },
                                 [draft](const DecodeConfig&) { return make_model(draft); }};
    drafter.accepts = draft != "prompt-lookup-smollm2";
    // γ = 3 and 4: one request at T = 0.5 with min-p, five at T = 1 with top-k (match_config).
    testing::expect_match_equals_plain(drafter, {3, 4});
  }
}

}  // namespace
}  // namespace speclab
