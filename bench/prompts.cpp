#include "bench/prompts.hpp"

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/models/model_registry.hpp"
#include "core/models/ngram.hpp"
#include "experiments/workload.hpp"

namespace speclab::cli {
namespace {

constexpr std::string_view kDefaultWorkload = "rewrite";

}  // namespace

// Byte-vocabulary models: held-out corpus text. Models with a tokenizer: a chat workload (or
// --prompt) in their chat template; request b takes conversation b mod n. Others: random ids.
BenchPrompts bench_prompts(const PromptChoice& o, const LanguageModel& target) {
  BenchPrompts prompts;
  const bool chat = !tokenizer_file(o.target).empty();
  if (!chat && (!o.workload.empty() || !o.prompt.empty())) {
    throw InvalidInput(fmt::format(
        "{} needs a target with a tokenizer (such as smollm2-135m); target {} has vocabulary "
        "size {} and no tokenizer",
        o.workload.empty() ? "--prompt" : "--workload", o.target, target.vocab()));
  }
  if (chat && !o.workload.empty() && !o.prompt.empty()) {
    throw InvalidInput("--workload and --prompt are exclusive: give one");
  }
  if (chat && !o.prompt.empty()) {
    const experiments::ChatTokenizer t = experiments::chat_tokenizer(o.target);
    const std::vector<ChatMessage> conversation = {{"user", o.prompt}};
    const auto ids = experiments::tokenize_conversation(t, conversation, o.tokens, "--prompt");
    prompts.tokens.assign(static_cast<size_t>(o.batch), ids);
    prompts.source = fmt::format("--prompt, {} tokens in the chat template", ids.size());
    return prompts;
  }
  if (chat) {
    const experiments::Workload w =
        experiments::load_workload(o.workload.empty() ? kDefaultWorkload : o.workload);
    prompts.tokens = experiments::workload_prompts(w, o.target, o.batch, o.tokens);
    std::string lengths;
    for (size_t b = 0; b < prompts.tokens.size(); ++b) {
      lengths += fmt::format("{}{}", b ? ", " : "", prompts.tokens[b].size());
    }
    prompts.source = fmt::format(
        "workload {} ({} conversations; request b takes b mod {}), "
        "prompt tokens {}",
        w.name, w.conversations.size(), w.conversations.size(), lengths);
    return prompts;
  }
  const bool text = target.vocab() == kByteVocab;
  for (int64_t b = 0; b < o.batch; ++b) {
    if (text) {
      prompts.tokens.push_back(corpus_prompt(4096 * b, 64));
    } else {
      std::vector<int32_t> p(16);
      for (size_t i = 0; i < p.size(); ++i) {
        const RandomAddress a{
            o.seed, static_cast<uint32_t>(b), 0, static_cast<uint32_t>(i), Purpose::kPlainSample,
            1};
        p[i] = static_cast<int32_t>(philox_bits(a) % static_cast<uint32_t>(target.vocab()));
      }
      prompts.tokens.push_back(p);
    }
  }
  prompts.source =
      text ? "held-out corpus text, 64 bytes per request" : "random token ids, 16 per request";
  return prompts;
}

}  // namespace speclab::cli
