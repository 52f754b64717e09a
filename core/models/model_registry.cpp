// The model registry (see model_registry.hpp).
#include "core/models/model_registry.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/base/error.hpp"
#include "core/base/source_tree.hpp"
#include "core/io/gguf.hpp"
#include "core/models/layer_skip.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/models/llama.hpp"
#include "core/models/ngram.hpp"
#include "core/models/prompt_lookup.hpp"
#include "core/models/tokenizer.hpp"
#include "core/models/vocab_map.hpp"

namespace speclab {

namespace {

constexpr std::string_view kSmolLM2 = "smollm2-135m";
// The same model with its weights dequantised to fp32 at load and float activations: the
// reference the quantised model is checked against (tests/model/llama_storage_test.cpp), at
// several times its time per step (it streams 538 MB instead of 96 MB).
constexpr std::string_view kSmolLM2Fp32 = "smollm2-135m-f32";
// Prompt lookup over SmolLM2's vocabulary (the byte-level `prompt-lookup` has V = 256).
constexpr std::string_view kSmolLM2PromptLookup = "prompt-lookup-smollm2";
constexpr int64_t kSmolLM2Vocab = 49152;
constexpr std::string_view kLayerSkipPrefix = "layerskip:";
// Token n-grams over SmolLM2's vocabulary: ngram{N}-smollm2. 16-bit token ids allow order ≤ 4.
constexpr int kSmolLM2NGramMinOrder = 2, kSmolLM2NGramMaxOrder = 4;

// data/models/ of the source tree (where `speclab fetch-model` writes), or $SPECLAB_MODELS.
std::filesystem::path models_dir() {
  if (const char* env = std::getenv("SPECLAB_MODELS"); env != nullptr && *env != '\0') return env;
  return source_tree_path("data/models");
}

std::string smollm2_ngram_name(int order) { return fmt::format("ngram{}-smollm2", order); }

// The SmolLM2 GGUF; InvalidInput naming the fetch command when it is absent.
std::filesystem::path smollm2_file() {
  const auto path = models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) {
    throw InvalidInput(fmt::format("model file {} not found; run `speclab fetch-model {}`",
                                   path.string(), kSmolLM2));
  }
  return path;
}

std::unique_ptr<LanguageModel> make_smollm2(WeightStorage storage) {
  return std::make_unique<LlamaModel>(smollm2_file(), LayerSkip{}, storage);
}

// SmolLM2 with the sublayers of `spec` skipped. The spec's syntax is checked before the model
// file is needed; its layer bounds against the file's block count.
std::unique_ptr<LanguageModel> make_layerskip(std::string_view spec) {
  const std::vector<LayerSkipRange> ranges = parse_layer_skip(spec);
  const auto path = smollm2_file();
  const int64_t n_layer = GgufFile::open(path).get_int("llama.block_count");
  return std::make_unique<LlamaModel>(path, layer_skip_mask(ranges, n_layer, spec));
}

// The order-N Kneser–Ney model over SmolLM2's tokens of the corpus's training part. Tokenising
// (~1.6 MB) and counting happen once per process; the models are shared afterwards.
std::unique_ptr<LanguageModel> make_smollm2_ngram(int order) {
  static std::mutex mutex;
  static std::vector<int32_t> tokens;
  static std::map<int, std::shared_ptr<const KneserNey>> models;
  const auto path = smollm2_file();
  std::lock_guard lock(mutex);
  auto& lm = models[order];
  if (!lm) {
    if (tokens.empty()) {
      const BpeTokenizer tokenizer(GgufFile::open(path));
      tokens = tokenizer.encode(load_corpus(default_corpus_path())->train_text());
    }
    lm = std::make_shared<const KneserNey>(tokens, order, kSmolLM2Vocab);
  }
  return std::make_unique<NGramModel>(lm, smollm2_ngram_name(order));
}

}  // namespace

std::vector<ModelInfo> model_catalog() {
  std::vector<ModelInfo> models;
  for (const auto& preset : linear_softmax_presets()) {
    const LinearSoftmaxConfig& c = preset.config;
    const bool full = preset.rank == 0 || preset.rank >= c.hidden;
    models.push_back(
        {preset.name, c.vocab,
         full ? fmt::format("LinearSoftmax target, family {} (d = {})", c.family, c.hidden)
              : fmt::format("LinearSoftmax draft: rank {} of family {} (d = {})", preset.rank,
                            c.family, c.hidden)});
  }
  for (const auto& name : ngram_model_presets()) {
    models.push_back(
        {name, 256,
         name.starts_with("ngram-")
             ? fmt::format("byte-level Kneser–Ney, order {}, on data/corpus", name.substr(6))
             : std::string("prompt lookup over bytes (q one-hot)")});
  }
  const std::string fetch = fmt::format("; needs `speclab fetch-model {}`", kSmolLM2);
  models.push_back(
      {std::string(kSmolLM2), kSmolLM2Vocab, "SmolLM2-135M-Instruct (GGUF, Q4_1 weights)" + fetch});
  models.push_back({std::string(kSmolLM2Fp32), kSmolLM2Vocab,
                    "SmolLM2-135M-Instruct, weights dequantised to fp32 at load" + fetch});
  models.push_back({std::string(kSmolLM2PromptLookup), kSmolLM2Vocab,
                    "prompt lookup over SmolLM2's tokens (q one-hot)" + fetch});
  for (int n = kSmolLM2NGramMinOrder; n <= kSmolLM2NGramMaxOrder; ++n) {
    models.push_back({smollm2_ngram_name(n), kSmolLM2Vocab,
                      fmt::format("Kneser–Ney over SmolLM2's tokens, order {}", n) + fetch});
  }
  models.push_back({std::string(kLayerSkipPrefix) + "10-25", kSmolLM2Vocab,
                    "layerskip:SPEC, SmolLM2-135M with the layers of SPEC skipped (e.g. "
                    "layerskip:4,6,8-11, layerskip:attn12-20,ffn20-27)" +
                        fetch});
  return models;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (ModelInfo& model : model_catalog()) names.push_back(std::move(model.name));
  return names;
}

bool is_model_name(std::string_view name) {
  if (name.starts_with(kLayerSkipPrefix)) {
    try {
      parse_layer_skip(name.substr(kLayerSkipPrefix.size()));
      return true;
    } catch (const InvalidInput&) {
      return false;
    }
  }
  const std::vector<std::string> names = model_names();
  return std::find(names.begin(), names.end(), name) != names.end();
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
  for (int n = kSmolLM2NGramMinOrder; n <= kSmolLM2NGramMaxOrder; ++n) {
    if (name == smollm2_ngram_name(n)) return make_smollm2_ngram(n);
  }
  if (name.starts_with(kLayerSkipPrefix)) {
    return make_layerskip(name.substr(kLayerSkipPrefix.size()));
  }
  throw InvalidInput(
      fmt::format("unknown model \"{}\"; known models: {}, and layerskip:SPEC for any skip spec",
                  name, fmt::join(model_names(), ", ")));
}

std::filesystem::path tokenizer_file(std::string_view name) {
  // SmolLM2 itself and every draft over its vocabulary carry "smollm2" in their name, except
  // the layer-skip drafts, which are SmolLM2 itself.
  if (name.find("smollm2") != std::string_view::npos || name.starts_with(kLayerSkipPrefix)) {
    return smollm2_file();
  }
  return {};
}

std::optional<ModelVocabulary> model_vocabulary(std::string_view name) {
  if (!is_model_name(name)) make_model(name);  // the unknown-name error, with every known name
  const std::filesystem::path file = tokenizer_file(name);
  if (!file.empty()) {
    static std::mutex mutex;
    static std::shared_ptr<const BpeTokenizer> tokenizer;
    static std::shared_ptr<const TokenVocabulary> vocabulary;
    std::lock_guard lock(mutex);
    if (!tokenizer) {
      tokenizer = std::make_shared<const BpeTokenizer>(GgufFile::open(file));
      vocabulary =
          std::make_shared<const TokenVocabulary>(vocabulary_of(*tokenizer, std::string(kSmolLM2)));
    }
    return ModelVocabulary{vocabulary, [tokenizer = tokenizer](std::string_view bytes) {
                             return encode_bytes(*tokenizer, bytes);
                           }};
  }
  for (const auto& ngram : ngram_model_presets()) {
    if (ngram == name) {
      auto bytes = std::make_shared<const TokenVocabulary>(byte_vocabulary());
      return ModelVocabulary{bytes, [](std::string_view text) {
                               return std::vector<int32_t>(
                                   reinterpret_cast<const uint8_t*>(text.data()),
                                   reinterpret_cast<const uint8_t*>(text.data()) + text.size());
                             }};
    }
  }
  return std::nullopt;
}

std::optional<std::pair<ModelVocabulary, ModelVocabulary>> vocabularies_to_join(
    std::string_view target_model, int64_t target_vocab, std::string_view draft_model,
    int64_t draft_vocab) {
  std::optional<ModelVocabulary> target = model_vocabulary(target_model);
  std::optional<ModelVocabulary> draft = model_vocabulary(draft_model);
  if (target && draft) {
    if (target->vocabulary->bytes == draft->vocabulary->bytes) return std::nullopt;
    return std::pair{std::move(*target), std::move(*draft)};
  }
  if (!target && !draft && target_vocab == draft_vocab) return std::nullopt;  // one synthetic set
  throw InvalidInput(fmt::format(
      "model \"{}\" has synthetic token ids that spell no text, so no vocabulary map joins it to "
      "\"{}\"; a draft of another vocabulary needs both models to have one (a byte-level or "
      "SmolLM2 model)",
      target ? draft_model : target_model, target ? target_model : draft_model));
}

}  // namespace speclab
