// Every named model speclab can build: the LinearSoftmax presets (data/models.toml), the n-gram
// family (ngram-1 … ngram-5, prompt-lookup), and the real SmolLM2-135M (`smollm2-135m`, fetched
// with `speclab fetch-model smollm2-135m`) with prompt lookup over its vocabulary.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/model.hpp"

namespace speclab {

/// All model names, in a stable order.
std::vector<std::string> model_names();

/// Builds a model by name; throws InvalidInput listing every known name for an unknown one.
std::unique_ptr<LanguageModel> make_model(std::string_view name);

/// The GGUF file holding the tokenizer of a model's vocabulary (the SmolLM2 file for
/// `smollm2-135m` and the drafts over its vocabulary), or an empty path for models whose tokens
/// are bytes or synthetic ids. InvalidInput naming `speclab fetch-model` when the file is absent.
std::filesystem::path tokenizer_file(std::string_view name);

}  // namespace speclab
