// The LinearSoftmax model (core/models/linear_softmax.hpp, docs/architecture.md "core/models") on
// the device: the same weights as a CPU LinearSoftmaxModel (copied from its family), the hashed
// context embedding of core/models/linear_softmax_embedding.hpp computed by a kernel, and the two
// products z = σ_r ⊙ (H_r·h) and logits = G_r·z + b as one cublasSgemm each over all m positions
// of all B requests, then gpu::probs_from_logits (temperature softmax). cuBLAS sums in another
// order than core's skinny GEMM, so probabilities equal the CPU model's within float rounding,
// not bit for bit.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/models/linear_softmax.hpp"
#include "core/models/model.hpp"
#include "core/sampling/sampling.hpp"

namespace speclab::gpu {

/// Token sequences in device memory: sequence s is tokens[s·stride, s·stride + lengths[s]).
struct DeviceTokens {
  const int32_t* tokens = nullptr;
  int64_t stride = 0;
  const int32_t* lengths = nullptr;  ///< [sequences], each ≥ 1
  int64_t sequences = 0;
};

/// A LinearSoftmax model resident on the device. Not thread-safe (one stream, one scratch).
class LinearSoftmaxDevice {
 public:
  /// Uploads `model`'s weights: G_r [V × r] and σ_r ⊙ H_r [r × d] row-major, b [V], the context
  /// weights and the embedding key. Work is queued on `stream`.
  explicit LinearSoftmaxDevice(const LinearSoftmaxModel& model, cudaStream_t stream = nullptr);
  ~LinearSoftmaxDevice();
  LinearSoftmaxDevice(const LinearSoftmaxDevice&) = delete;
  LinearSoftmaxDevice& operator=(const LinearSoftmaxDevice&) = delete;

  int64_t vocab() const { return vocab_; }
  int64_t hidden() const { return hidden_; }
  int64_t rank() const { return rank_; }
  const std::string& name() const { return name_; }
  cudaStream_t stream() const { return stream_; }
  /// Queues later work (kernels and cuBLAS) on `stream`. Synchronises the old stream first, so no
  /// earlier call's work can overlap the new stream's.
  void set_stream(cudaStream_t stream);
  /// Bytes one call streams: G_r, σ⊙H_r and b in fp32 (as LinearSoftmaxModel::weight_bytes).
  int64_t weight_bytes() const;

  /// Logits [S·m, V] (device) for m positions of each of S sequences: row s·m + j follows the
  /// first lengths[s] + offset + j tokens of sequence s (at least 1). One hidden-state kernel,
  /// then one cublasSgemm for z and one for the logits over all S·m columns. No host sync.
  void logits(const DeviceTokens& sequences, int64_t m, int64_t offset, float* logits);

  /// logits() followed by gpu::probs_from_logits at `temperature` into probs [S·m, V] (device)
  /// with status [S·m] (LogitsStatus bits). The logits live in this model's scratch.
  void probs(const DeviceTokens& sequences, int64_t m, int64_t offset, double temperature,
             float* probs, uint32_t* status);

  /// As LanguageModel::score on the host: the rows of every request's last n_positions
  /// positions, through the sampling pipeline. Only the temperature stage runs on the device:
  /// top_k, top_p and min_p must be off (InvalidInput otherwise). Token ids and m are validated
  /// as core does. Synchronises the stream.
  std::vector<float> score(std::span<const ScoreRequest> requests, const SamplingParams& sampling);

 private:
  float* scratch(int index, int64_t floats);

  std::string name_;
  int64_t vocab_ = 0, hidden_ = 0, rank_ = 0, context_ = 0;
  uint32_t embedding_key_ = 0;
  cudaStream_t stream_ = nullptr;
  void* cublas_ = nullptr;            // cublasHandle_t
  float* g_ = nullptr;                // [V × r] row-major
  float* h_ = nullptr;                // [r × d] row-major, row k scaled by σ_k
  float* bias_ = nullptr;             // [V]
  float* context_weights_ = nullptr;  // [n]
  struct Scratch {
    float* data = nullptr;
    int64_t floats = 0;
  };
  Scratch scratch_[4];  // hidden, z, logits, host-API probs
};

/// Throws InvalidInput unless the pipeline is temperature-only (what the device applies).
void check_temperature_only(const SamplingParams& sampling, const char* argument);

}  // namespace speclab::gpu
