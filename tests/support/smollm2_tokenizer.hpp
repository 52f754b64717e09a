// The real SmolLM2-135M GGUF for the unit tests that read its tokenizer: the file, a skip when
// `speclab fetch-model smollm2-135m` has not put it in data/models/, and the tokenizer parsed once.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "core/io/gguf.hpp"
#include "core/models/tokenizer.hpp"

namespace speclab::testing {

inline const std::filesystem::path kSmolLM2File =
    std::filesystem::path(SPECLAB_SOURCE_DIR) / "data/models/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The tokenizer of kSmolLM2File, parsed on first use (the vocabulary and merges take a moment).
inline const BpeTokenizer& smollm2() {
  static const std::unique_ptr<BpeTokenizer> tokenizer =
      std::make_unique<BpeTokenizer>(GgufFile::open(kSmolLM2File));
  return *tokenizer;
}

}  // namespace speclab::testing

/// Skips the running test when the SmolLM2 file is absent, saying how to fetch it.
#define SPECLAB_REQUIRE_MODEL()                                                              \
  if (!std::filesystem::exists(::speclab::testing::kSmolLM2File)) {                          \
    GTEST_SKIP() << ::speclab::testing::kSmolLM2File.string()                                \
                 << " is absent; run `speclab fetch-model smollm2-135m` (downloads ~98 MB)"; \
  }
