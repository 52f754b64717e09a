// The prompts `speclab bench decode` and `speclab plan --validate` decode from, by the target's
// kind: held-out corpus text for byte-vocabulary models, a chat workload (or one message) in the
// chat template for models with a tokenizer, random token ids otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/models/model.hpp"

namespace speclab::cli {

/// What to build the prompts from.
struct PromptChoice {
  std::string target;    ///< the target's registry name (its tokenizer, if any)
  int64_t batch = 1;     ///< one prompt per request
  int64_t tokens = 0;    ///< tokens each request will generate (the context a workload leaves)
  uint64_t seed = 0;     ///< random ids' seed
  std::string workload;  ///< models with a tokenizer: a data/workloads name or file ("" = rewrite)
  std::string prompt;    ///< models with a tokenizer: one user message instead of a workload
};

struct BenchPrompts {
  std::vector<std::vector<int32_t>> tokens;
  std::string source;  ///< what the prompts are, for the report
};

/// The prompts for `choice`: request b takes conversation b mod n of a workload, corpus text
/// from offset 4096·b (64 bytes), or 16 random ids addressed by (seed, b). Throws InvalidInput
/// for a workload or prompt given to a target without a tokenizer, or both given.
BenchPrompts bench_prompts(const PromptChoice& choice, const LanguageModel& target);

}  // namespace speclab::cli
