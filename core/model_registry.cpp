// The model registry (see model_registry.hpp).
#include "core/model_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/models/llama.hpp"
#include "core/models/ngram.hpp"
#include "core/models/prompt_lookup.hpp"

namespace speclab {

namespace {

constexpr std::string_view kSmolLM2 = "smollm2-135m";
// The same model with its weights dequantised to fp32 at load: the same logits, bit for bit, at
// ~2.7× the time per step at m = 1 and ~2× at m = 8 (it streams 538 MB instead of 96 MB;
// bench/llama_bench.cpp, one thread).
constexpr std::string_view kSmolLM2Fp32 = "smollm2-135m-f32";
// Prompt lookup over SmolLM2's vocabulary (the byte-level `prompt-lookup` has V = 256).
constexpr std::string_view kSmolLM2PromptLookup = "prompt-lookup-smollm2";
constexpr int64_t kSmolLM2Vocab = 49152;

// data/models/ of the source tree (where `speclab fetch-model` writes), or $SPECLAB_MODELS.
std::filesystem::path models_dir() {
  if (const char* env = std::getenv("SPECLAB_MODELS"); env != nullptr && *env != '\0') return env;
  constexpr std::string_view file = __FILE__;
  constexpr std::string_view suffix = "core/model_registry.cpp";
  const std::string root(file.ends_with(suffix) ? file.substr(0, file.size() - suffix.size())
                                                : std::string_view());
  return std::filesystem::path(root) / "data/models";
}

std::unique_ptr<LanguageModel> make_smollm2(WeightStorage storage) {
  const auto path = models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) {
    throw InvalidInput(fmt::format("model file {} not found; run `speclab fetch-model {}`",
                                   path.string(), kSmolLM2));
  }
  return std::make_unique<LlamaModel>(path, storage);
}

}  // namespace

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& preset : linear_softmax_presets()) names.push_back(preset.name);
  for (const auto& name : ngram_model_presets()) names.push_back(name);
  names.emplace_back(kSmolLM2);
  names.emplace_back(kSmolLM2Fp32);
  names.emplace_back(kSmolLM2PromptLookup);
  return names;
}

std::unique_ptr<LanguageModel> make_model(std::string_view name) {
  for (const auto& preset : linear_softmax_presets()) {
    if (preset.name == name) return make_linear_softmax_model(name);
  }
  for (const auto& ngram : ngram_model_presets()) {
    if (ngram == name) return make_ngram_model(name);
  }
  if (name == kSmolLM2) return make_smollm2(WeightStorage::kQuantised);
  if (name == kSmolLM2Fp32) return make_smollm2(WeightStorage::kFp32);
  if (name == kSmolLM2PromptLookup) {
    return std::make_unique<PromptLookupModel>(3, 1, ' ', kSmolLM2Vocab);
  }
  throw InvalidInput(
      fmt::format("unknown model \"{}\"; known models: {}", name, fmt::join(model_names(), ", ")));
}

}  // namespace speclab
