// Every named model speclab can build: the LinearSoftmax presets (data/models.toml), the n-gram
// family (ngram-1 … ngram-5, prompt-lookup), and the real SmolLM2-135M (`smollm2-135m`, fetched
// with `speclab fetch-model smollm2-135m`) with its drafts:
//   prompt-lookup-smollm2   prompt lookup over its vocabulary (q one-hot);
//   ngram2-smollm2 … ngram4-smollm2
//                           Kneser–Ney n-grams over its tokens, trained on data/corpus/english.txt
//                           tokenised by its tokenizer;
//   layerskip:SPEC          SmolLM2-135M itself with the sublayers of SPEC skipped (weights shared
//                           with a live smollm2-135m, own KV caches). SPEC is a comma-separated
//                           list of 0-based layers (0–29) or inclusive ranges, each optionally
//                           prefixed `attn` (attention sublayers only) or `ffn` (feed-forward
//                           only): `layerskip:10-25`, `layerskip:4,6,8-11`,
//                           `layerskip:attn12-20,ffn20-27` (core/models/layer_skip.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/models/model.hpp"
#include "core/models/vocab_map.hpp"

namespace speclab {

/// A named model as `speclab models` lists it, known without building the model.
struct ModelInfo {
  std::string name;
  int64_t vocab = 0;
  std::string description;  ///< one line: what it is, and the file it needs if any
};

/// Every named model, in a stable order (`layerskip:SPEC` appears as one example).
std::vector<ModelInfo> model_catalog();

/// The names of model_catalog().
std::vector<std::string> model_names();

/// True when make_model accepts `name` without loading anything: a listed name, or `layerskip:`
/// followed by a spec of valid syntax (its layer bounds are checked when the model is built).
bool is_model_name(std::string_view name);

/// Builds a model by name; throws InvalidInput listing every known name for an unknown one, and
/// quoting SPEC and the bad item for a malformed or out-of-range `layerskip:SPEC`.
std::unique_ptr<LanguageModel> make_model(std::string_view name);

/// The GGUF file holding the tokenizer of a model's vocabulary (the SmolLM2 file for
/// `smollm2-135m` and the drafts over its vocabulary), or an empty path for models whose tokens
/// are bytes or synthetic ids. InvalidInput naming `speclab fetch-model` when the file is absent.
std::filesystem::path tokenizer_file(std::string_view name);

/// A model's vocabulary as the bytes its tokens spell, and its tokenizer over bytes (stopping
/// before bytes it cannot encode), for decoding with a draft of another vocabulary.
struct ModelVocabulary {
  std::shared_ptr<const TokenVocabulary> vocabulary;
  std::function<std::vector<int32_t>(std::string_view bytes)> encode;
};
/// The byte-level models (ngram-N, prompt-lookup) spell bytes; SmolLM2 and the drafts over its
/// vocabulary spell SmolLM2's tokens, encoded by its tokenizer (read once per process). Empty for
/// models whose tokens spell nothing (LinearSoftmax). InvalidInput for an unknown name.
std::optional<ModelVocabulary> model_vocabulary(std::string_view name);

/// The vocabularies of a target and a draft model (of V_target and V_draft tokens) that a draft of
/// another vocabulary joins, or nullopt when the two share one vocabulary (the same bytes, or
/// synthetic ids of one size). InvalidInput naming the model whose tokens spell no text otherwise.
std::optional<std::pair<ModelVocabulary, ModelVocabulary>> vocabularies_to_join(
    std::string_view target_model, int64_t target_vocab, std::string_view draft_model,
    int64_t draft_vocab);

}  // namespace speclab
