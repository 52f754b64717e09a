// LlamaModel: the LLaMA-architecture forward pass (RMSNorm, rotary embeddings, grouped-query
// attention with a per-sequence KV cache, SwiGLU FFN, tied or separate LM head) read from a GGUF
// file such as SmolLM2-135M. The target of docs/verifiers.md as a real model:
// scoring m positions at once streams the weights once, as a verification pass does. With a
// LayerSkip it is also its own layer-skip draft (core/models/layer_skip.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/models/layer_skip.hpp"
#include "core/models/model.hpp"
#include "core/models/weight_matrix.hpp"

namespace speclab {

/// Hyperparameters read from the GGUF metadata (llama.*).
struct LlamaConfig {
  int64_t n_layer = 0;
  int64_t n_embd = 0;     ///< d
  int64_t n_head = 0;     ///< query heads
  int64_t n_head_kv = 0;  ///< key/value heads (n_head is a multiple)
  int64_t head_dim = 0;   ///< d / n_head
  int64_t n_ff = 0;       ///< SwiGLU hidden width
  int64_t vocab = 0;
  int64_t context_length = 0;  ///< trained context; longer sequences are refused
  double rope_base = 10000.0;
  double rms_eps = 1e-5;
  int32_t eos_token = -1;
};

/// A LLaMA model whose linear layers are each one skinny product over the new positions, with the
/// weights kept in their Q4_1 / Q8_0 blocks and multiplied by 8-bit activations with integer dot
/// products (SmolLM2-135M: 96 MB), or dequantised to fp32 at load (538 MB), the reference: the
/// quantised storage's logits stay within the activation rounding of it (quant_matrix.hpp) and
/// it streams less memory and does less work per step.
/// Rotary embeddings use llama.cpp's rope type 0 (adjacent pairs (2i, 2i+1), θ_i =
/// base^(-2i/head_dim)), which is what GGUF's permuted Q/K weights expect.
///
/// Weights are immutable and shared: every LlamaModel loaded from the same file in the same
/// storage while another is alive reuses its weights (so a layer-skip draft beside its target
/// costs no second copy).
/// A model with a LayerSkip leaves the skipped attention / FFN sublayers out of the residual
/// stream (x ← x for that sublayer) and keeps no keys or values for skipped attention.
///
/// State: one KV cache per sequence_id, per model. score_logits() keeps the cached positions that
/// match the request's tokens (up to the first row it must output) and computes only the rest;
/// truncate() rolls a cache back, release() frees it. Not thread-safe.
class LlamaModel : public LanguageModel {
 public:
  /// Loads `gguf_path` (or shares the weights of a live model loaded from the same file).
  /// InvalidInput when the file is not a llama GGUF with the expected tensors and shapes, or when
  /// a non-empty `skip` does not have one entry per layer.
  explicit LlamaModel(const std::filesystem::path& gguf_path, LayerSkip skip = {},
                      WeightStorage storage = WeightStorage::kQuantised);

  int64_t vocab() const override { return config_.vocab; }
  std::string name() const override { return name_; }
  int32_t eos_token() const override { return config_.eos_token; }

  void truncate(int64_t sequence_id, int64_t length) override;
  void release(int64_t sequence_id) override;

  const LlamaConfig& config() const { return config_; }
  /// Σ m rows of vocab() raw logits, as score_logits() (validates like score()).
  std::vector<float> logits(std::span<const ScoreRequest> requests);
  /// Tokens whose keys/values are cached for a sequence (0 when none).
  int64_t cached_length(int64_t sequence_id) const;
  /// Seconds the constructor took (mapping, parsing, dequantisation; ~0 when weights are shared).
  double load_seconds() const { return load_seconds_; }
  /// The sublayers this model skips (empty masks: none).
  const LayerSkip& skip() const { return skip_; }
  WeightStorage weight_storage() const { return weights_->storage; }
  /// Bytes of the weight matrices (embedding and LM head included), as stored.
  int64_t weight_bytes() const;
  /// What one forward pass streams of the weights, whatever the number of positions: the matrices
  /// of every sublayer this model runs (skipped ones excluded) and the LM head (the embedding
  /// table when tied; otherwise the embedding is only gathered, a row per position).
  struct PassWeights {
    int64_t bytes = 0;     ///< as stored (quantised blocks or fp32)
    int64_t elements = 0;  ///< multiply-adds per position
  };
  PassWeights pass_weights() const;
  /// True when both models use the same weights in memory.
  bool shares_weights_with(const LlamaModel& other) const { return weights_ == other.weights_; }

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;
  int64_t prefill_state(std::span<const ScoreRequest> requests) override;

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;  // [d]
    WeightMatrix wq, wk, wv, wo;             // [d × d], [kv × d], [kv × d], [d × d]
    WeightMatrix w_gate, w_up, w_down;       // [ff × d], [ff × d], [d × ff]
  };
  // Everything read from the file; immutable once loaded.
  struct Weights {
    LlamaConfig config;
    std::string name;
    WeightStorage storage = WeightStorage::kQuantised;
    WeightMatrix token_embd;  // [vocab × d]
    WeightMatrix output;      // [vocab × d]; empty when tied to token_embd
    std::vector<float> output_norm;
    std::vector<Layer> layers;
    std::vector<float> rope_inv_freq;  // [head_dim / 2]
  };
  struct Cache {
    std::vector<int32_t> tokens;           // tokens whose k, v are stored
    std::vector<std::vector<float>> k, v;  // per layer: [position × n_head_kv·head_dim]
  };

  // Appends tokens[start, L) to `cache` (which holds exactly tokens[0, start)) and writes the
  // logits of the last m positions to `out` [m × vocab].
  void forward(Cache& cache, std::span<const int32_t> tokens, int64_t start, int64_t m,
               std::span<float> out) const;
  int64_t extend(int64_t sequence_id, std::span<const int32_t> tokens, int64_t reuse_limit,
                 int64_t m, std::span<float> out);

  // The weights of `gguf_path`, shared with any live model that loaded the same file in the same
  // storage.
  static std::shared_ptr<const Weights> load_weights(const std::filesystem::path& gguf_path,
                                                     WeightStorage storage);
  static std::shared_ptr<const Weights> read_weights(const std::filesystem::path& gguf_path,
                                                     WeightStorage storage);

  std::shared_ptr<const Weights> weights_;
  LlamaConfig config_;
  std::string name_;
  LayerSkip skip_;
  std::map<int64_t, Cache> caches_;
  double load_seconds_ = 0.0;
};

}  // namespace speclab
