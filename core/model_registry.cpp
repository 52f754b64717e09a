// The model registry (see model_registry.hpp).
#include "core/model_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/models/ngram.hpp"

namespace speclab {

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& preset : linear_softmax_presets()) names.push_back(preset.name);
  for (const auto& name : ngram_model_presets()) names.push_back(name);
  return names;
}

std::unique_ptr<LanguageModel> make_model(std::string_view name) {
  for (const auto& preset : linear_softmax_presets()) {
    if (preset.name == name) return make_linear_softmax_model(name);
  }
  for (const auto& ngram : ngram_model_presets()) {
    if (ngram == name) return make_ngram_model(name);
  }
  throw InvalidInput(
      fmt::format("unknown model \"{}\"; known models: {}", name, fmt::join(model_names(), ", ")));
}

}  // namespace speclab
