// gpu::LinearSoftmaxDevice (gpu/models/linear_softmax.hpp): weights uploaded once, then per call
// a hidden-state kernel, two cublasSgemm (column-major: every [rows × cols] row-major host matrix
// is its transpose, hence CUBLAS_OP_T), the bias broadcast into the logits (the second GEMM adds
// onto it with beta = 1), and gpu::probs_from_logits.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/models/linear_softmax_embedding.hpp"
#include "gpu/base/cublas_check.hpp"
#include "gpu/base/cuda_check.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/models/linear_softmax.hpp"
#include "gpu/base/simt.cuh"

namespace speclab::gpu {
namespace {

constexpr int kHiddenThreads = 128;
constexpr int kBiasThreads = 256;

struct HiddenArgs {
  DeviceTokens sequences;
  int64_t m = 1, offset = 0;
  int64_t hidden = 0, context = 0;
  uint32_t key32 = 0;
  const float* weights = nullptr;  // [context]
  float* out = nullptr;            // [S·m × d]
};

// Column c = s·m + j: the context is the first lengths[s] + offset + j tokens of sequence s; its
// last n tokens are hashed exactly as LinearSoftmaxFamily::hidden_state does.
__global__ void __launch_bounds__(kHiddenThreads) hidden_kernel(HiddenArgs a) {
  const int64_t column = blockIdx.x;
  const int64_t k = static_cast<int64_t>(blockIdx.y) * kHiddenThreads + threadIdx.x;
  if (k >= a.hidden) return;
  const int64_t s = column / a.m, j = column % a.m;
  const int32_t* tokens = a.sequences.tokens + s * a.sequences.stride;
  int64_t end = a.sequences.lengths[s] + a.offset + j;
  end = end < 1 ? 1 : end;
  const int64_t n = end < a.context ? end : a.context;
  float sum = 0.0f;
  for (int64_t t = 0; t < n; ++t) {
    const uint32_t key = lsm::token_key(tokens[end - 1 - t], a.key32);
    sum += a.weights[t] * lsm::embedding_value(key, k);
  }
  a.out[column * a.hidden + k] = tanhf(sum);
}

__global__ void __launch_bounds__(kBiasThreads)
    bias_kernel(const float* bias, int64_t vocab, int64_t columns, float* logits) {
  const int64_t total = vocab * columns;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kBiasThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kBiasThreads + threadIdx.x; i < total;
       i += stride) {
    logits[i] = bias[i % vocab];
  }
}

template <typename T>
T* upload(const std::vector<T>& host, cudaStream_t stream) {
  T* device = nullptr;
  SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), host.size() * sizeof(T)));
  SPECLAB_CUDA_CHECK(cudaMemcpyAsync(device, host.data(), host.size() * sizeof(T),
                                     cudaMemcpyHostToDevice, stream));
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vector is about to go away
  return device;
}

cublasHandle_t handle_of(void* p) { return static_cast<cublasHandle_t>(p); }

}  // namespace

void check_temperature_only(const SamplingParams& sampling, const char* argument) {
  validate_sampling_params(sampling);
  if (sampling.top_k != 0 || sampling.top_p != 1.0 || sampling.min_p != 0.0) {
    throw InvalidInput(std::string(argument) + " has top_k " + std::to_string(sampling.top_k) +
                       ", top_p " + std::to_string(sampling.top_p) + ", min_p " +
                       std::to_string(sampling.min_p) +
                       "; the device pipeline is temperature only: expected top_k 0, top_p 1, "
                       "min_p 0");
  }
}

LinearSoftmaxDevice::LinearSoftmaxDevice(const LinearSoftmaxModel& model, cudaStream_t stream)
    : name_(model.name()), stream_(stream) {
  const LinearSoftmaxFamily& family = model.family();
  vocab_ = family.config().vocab;
  hidden_ = family.config().hidden;
  rank_ = model.rank();
  context_ = family.config().context;
  embedding_key_ = family.embedding_key();
  std::vector<float> g(vocab_ * rank_), h(rank_ * hidden_);
  for (int64_t i = 0; i < vocab_; ++i) {
    for (int64_t k = 0; k < rank_; ++k) g[i * rank_ + k] = family.g().at(i, k);
  }
  const auto sigma = family.sigma();
  for (int64_t k = 0; k < rank_; ++k) {
    for (int64_t j = 0; j < hidden_; ++j) h[k * hidden_ + j] = sigma[k] * family.h().at(k, j);
  }
  const auto bias = family.bias();
  const auto weights = family.context_weights();
  cublasHandle_t handle = nullptr;
  SPECLAB_CUBLAS_CHECK(cublasCreate(&handle));
  cublas_ = handle;
  SPECLAB_CUBLAS_CHECK(cublasSetStream(handle, stream_));
  g_ = upload(g, stream_);
  h_ = upload(h, stream_);
  bias_ = upload(std::vector<float>(bias.begin(), bias.end()), stream_);
  context_weights_ = upload(std::vector<float>(weights.begin(), weights.end()), stream_);
}

LinearSoftmaxDevice::~LinearSoftmaxDevice() {
  if (cublas_ != nullptr) cublasDestroy(handle_of(cublas_));
  for (float* p : {g_, h_, bias_, context_weights_}) cudaFree(p);
  for (auto& s : scratch_) cudaFree(s.data);
}

void LinearSoftmaxDevice::set_stream(cudaStream_t stream) {
  if (stream == stream_) return;
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  SPECLAB_CUBLAS_CHECK(cublasSetStream(handle_of(cublas_), stream));
  stream_ = stream;
}

int64_t LinearSoftmaxDevice::weight_bytes() const {
  return static_cast<int64_t>(sizeof(float)) * (vocab_ * rank_ + rank_ * hidden_ + vocab_);
}

float* LinearSoftmaxDevice::scratch(int index, int64_t floats) {
  Scratch& s = scratch_[index];
  if (s.floats < floats) {
    SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may still be in use
    SPECLAB_CUDA_CHECK(cudaFree(s.data));
    s.data = nullptr;
    s.floats = 0;
    SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&s.data), floats * sizeof(float)));
    s.floats = floats;
  }
  return s.data;
}

void LinearSoftmaxDevice::logits(const DeviceTokens& sequences, int64_t m, int64_t offset,
                                 float* logits) {
  if (sequences.sequences < 1 || m < 1 || sequences.tokens == nullptr ||
      sequences.lengths == nullptr || logits == nullptr) {
    throw InvalidInput(name_ + ": logits of " + std::to_string(sequences.sequences) +
                       " sequences × m = " + std::to_string(m) +
                       "; expected ≥ 1 sequence, m ≥ 1 and device pointers for tokens, lengths "
                       "and logits");
  }
  const int64_t columns = sequences.sequences * m;
  if (columns > (int64_t{1} << 31) - 1 || vocab_ * columns > (int64_t{1} << 40)) {
    throw InvalidInput(name_ + ": " + std::to_string(columns) +
                       " columns of V = " + std::to_string(vocab_) + " is too many for one call");
  }
  float* hidden = scratch(0, columns * hidden_);
  float* z = scratch(1, columns * rank_);
  HiddenArgs args{sequences,        m,     offset, hidden_, context_, embedding_key_,
                  context_weights_, hidden};
  const dim3 grid(static_cast<unsigned>(columns),
                  static_cast<unsigned>((hidden_ + kHiddenThreads - 1) / kHiddenThreads));
  SPECLAB_CUDA_CHECK(launch_kernel(hidden_kernel, grid, dim3(kHiddenThreads), 0, stream_, args));
  const int64_t bias_blocks =
      std::min<int64_t>((vocab_ * columns + kBiasThreads - 1) / kBiasThreads, int64_t{65535});
  SPECLAB_CUDA_CHECK(launch_kernel(bias_kernel, dim3(static_cast<unsigned>(bias_blocks)),
                                   dim3(kBiasThreads), 0, stream_, static_cast<const float*>(bias_),
                                   vocab_, columns, logits));
  const float one = 1.0f, zero = 0.0f;
  const int r = static_cast<int>(rank_), d = static_cast<int>(hidden_),
            v = static_cast<int>(vocab_), n = static_cast<int>(columns);
  // z [r × n] = (σ⊙H_r) [r × d] · h [d × n]; H_r row-major is a column-major d × r matrix.
  SPECLAB_CUBLAS_CHECK(cublasSgemm(handle_of(cublas_), CUBLAS_OP_T, CUBLAS_OP_N, r, n, d, &one, h_,
                                   d, hidden, d, &zero, z, r));
  // logits [V × n] = G_r [V × r] · z [r × n] + b; G_r row-major is a column-major r × V matrix.
  SPECLAB_CUBLAS_CHECK(cublasSgemm(handle_of(cublas_), CUBLAS_OP_T, CUBLAS_OP_N, v, n, r, &one, g_,
                                   r, z, r, &one, logits, v));
}

void LinearSoftmaxDevice::probs(const DeviceTokens& sequences, int64_t m, int64_t offset,
                                double temperature, float* probs, uint32_t* status) {
  const int64_t rows = sequences.sequences * m;
  float* logits_buffer = scratch(2, rows * vocab_);
  logits(sequences, m, offset, logits_buffer);
  SPECLAB_CUDA_CHECK(probs_from_logits(
      LogitsFormat::kFloat32,
      std::as_bytes(std::span<const float>(logits_buffer, static_cast<size_t>(rows * vocab_))),
      rows, vocab_, temperature, std::span<float>(probs, static_cast<size_t>(rows * vocab_)),
      std::span<uint32_t>(status, static_cast<size_t>(rows)), stream_));
}

std::vector<float> LinearSoftmaxDevice::score(std::span<const ScoreRequest> requests,
                                              const SamplingParams& sampling) {
  check_temperature_only(sampling, "sampling");
  if (requests.empty())
    throw InvalidInput(name_ + ": score of an empty batch; expected ≥ 1 request");
  // One column per scored position, holding the last n tokens of its prefix.
  std::vector<int32_t> tokens, lengths;
  for (size_t r = 0; r < requests.size(); ++r) {
    const auto& q = requests[r];
    const auto length = static_cast<int64_t>(q.tokens.size());
    if (q.n_positions < 1 || q.n_positions > length) {
      throw InvalidInput(name_ + ": request " + std::to_string(r) + " has n_positions " +
                         std::to_string(q.n_positions) + "; expected 1 ≤ m ≤ its " +
                         std::to_string(length) + " tokens");
    }
    for (int64_t i = 0; i < length; ++i) {
      if (q.tokens[i] < 0 || q.tokens[i] >= vocab_) {
        throw InvalidInput(name_ + ": request " + std::to_string(r) + " token " +
                           std::to_string(i) + " is " + std::to_string(q.tokens[i]) +
                           "; expected a token id in [0, " + std::to_string(vocab_) + ")");
      }
    }
    for (int64_t j = 0; j < q.n_positions; ++j) {
      const int64_t end = length - q.n_positions + 1 + j;
      const int64_t n = std::min(end, context_);
      for (int64_t t = 0; t < context_; ++t) tokens.push_back(t < n ? q.tokens[end - n + t] : 0);
      lengths.push_back(static_cast<int32_t>(n));
    }
  }
  const auto columns = static_cast<int64_t>(lengths.size());
  int32_t *tokens_device = nullptr, *lengths_device = nullptr;
  uint32_t* status_device = nullptr;
  std::vector<float> probs(columns * vocab_);
  std::vector<uint32_t> status(columns);
  try {
    tokens_device = upload(tokens, stream_);
    lengths_device = upload(lengths, stream_);
    SPECLAB_CUDA_CHECK(
        cudaMalloc(reinterpret_cast<void**>(&status_device), columns * sizeof(uint32_t)));
    float* probs_device = scratch(3, columns * vocab_);
    this->probs({tokens_device, context_, lengths_device, columns}, 1, 0, sampling.temperature,
                probs_device, status_device);
    SPECLAB_CUDA_CHECK(cudaMemcpyAsync(probs.data(), probs_device, probs.size() * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_));
    SPECLAB_CUDA_CHECK(cudaMemcpyAsync(status.data(), status_device,
                                       status.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                                       stream_));
    SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  } catch (...) {
    cudaFree(tokens_device);
    cudaFree(lengths_device);
    cudaFree(status_device);
    throw;
  }
  cudaFree(tokens_device);
  cudaFree(lengths_device);
  cudaFree(status_device);
  for (int64_t c = 0; c < columns; ++c) {
    if (status[c] != 0) {
      throw Error(name_ + ": device logits row " + std::to_string(c) + " has status " +
                  std::to_string(status[c]) + " (a non-finite logit)");
    }
  }
  return probs;
}

}  // namespace speclab::gpu
