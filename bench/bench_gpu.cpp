// `speclab bench gpu`: the device kernels' effective bandwidth (the bytes each must move, from
// gpu/README.md, over its cudaEvent time) beside the device-to-device copy bandwidth measured in
// the same run, the verifiers on logits fused and as two kernels (softmax, then the verifier), and
// the device LinearSoftmax decoding loop's tokens/s beside core's. Inputs are
// generated on the device in a pool larger than the L2 cache and rotated, so every timed launch
// reads from HBM. Without a device (or without CUDA in the build) it says so and measures nothing.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_gpu_bytes.hpp"
#include "bench/benches.hpp"
#include "core/base/error.hpp"
#include "core/base/philox.hpp"
#include "core/decode/decode.hpp"
#include "core/io/json.hpp"
#include "core/models/linear_softmax.hpp"
#include "core/probe/machine.hpp"

#if defined(SPECLAB_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "gpu/base/cuda_check.hpp"
#include "gpu/decode/speculative_decode.hpp"
#include "gpu/models/linear_softmax.hpp"
#include "gpu/models/synthetic_logits.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/sampling/sampling.hpp"
#include "gpu/verify/verify_block.hpp"
#include "gpu/verify/verify_chain.hpp"
#endif

namespace speclab::cli {

namespace {

// The shapes of a run: the options' lists, or the defaults; each value checked, and --only
// checked against the kernel rows' names (`kernels`; empty: not checked), before any device
// memory is touched.
struct GpuShapes {
  std::vector<int64_t> vocab, batch, gamma;
};
GpuShapes gpu_shapes(const BenchGpuOptions& o, std::vector<std::string> kernels) {
  const auto checked = [](const std::vector<int64_t>& given, std::vector<int64_t> fallback,
                          std::string_view option, int64_t lowest, int64_t highest) {
    for (const int64_t v : given) {
      if (v < lowest || v > highest) {
        throw InvalidInput(fmt::format("bench gpu: {} {} is out of range; expected {} ≤ value ≤ {}",
                                       option, v, lowest, highest));
      }
    }
    return given.empty() ? fallback : given;
  };
  GpuShapes shapes{checked(o.vocab, {32000, 128256}, "--vocab", 1, int64_t{1} << 30),
                   checked(o.batch, {1, 8, 64, 256}, "--batch", 1, 4096),
                   checked(o.gamma, {1, 5, 8}, "--gamma", 0, 64)};
  if (!o.only.empty() && !kernels.empty() &&
      std::none_of(kernels.begin(), kernels.end(), [&](const std::string& name) {
        return name.find(o.only) != std::string::npos;
      })) {
    std::sort(kernels.begin(), kernels.end());
    kernels.erase(std::unique(kernels.begin(), kernels.end()), kernels.end());
    throw InvalidInput(fmt::format("bench gpu: --only \"{}\" matches no kernel; the kernels: {}",
                                   o.only, fmt::join(kernels, ", ")));
  }
  return shapes;
}

}  // namespace

#if !defined(SPECLAB_HAVE_CUDA)

void run_bench_gpu(const BenchGpuOptions& o) {
  if (o.repeats < 3) {
    throw InvalidInput(fmt::format("bench gpu needs --repeats ≥ 3 (got {})", o.repeats));
  }
  gpu_shapes(o, {});  // nothing is measured, but a bad option is still an error
  const char* message = "speclab was built without CUDA (SPECLAB_ENABLE_CUDA=OFF or no nvcc)";
  if (o.json) {
    std::printf("%s\n", json_text({{"device", nullptr}, {"message", message}}).c_str());
  } else {
    std::printf("speclab bench gpu: %s; nothing measured\n", message);
  }
}

#else

namespace {

// The L2 of an H200 is 50 MB: inputs of one configuration span at least 4× that.
constexpr double kPoolBytes = 200e6;
// Device memory the inputs of one configuration may take.
constexpr double kMaxInputBytes = 32e9;

template <typename T>
class Device {
 public:
  explicit Device(int64_t n) : n_(std::max<int64_t>(n, 1)) {
    SPECLAB_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
    SPECLAB_CUDA_CHECK(cudaMemset(p_, 0, n_ * sizeof(T)));
  }
  ~Device() { cudaFree(p_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() { return p_; }
  std::span<T> span(int64_t offset, int64_t n) { return {p_ + offset, static_cast<size_t>(n)}; }
  std::vector<T> host() {
    std::vector<T> out(n_);
    SPECLAB_CUDA_CHECK(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  T* p_ = nullptr;
  int64_t n_;
};

class Events {
 public:
  explicit Events(int n) : events_(2 * n) {
    for (auto& e : events_) SPECLAB_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto e : events_) cudaEventDestroy(e);
  }
  void start(int i, cudaStream_t s) { SPECLAB_CUDA_CHECK(cudaEventRecord(events_[2 * i], s)); }
  void stop(int i, cudaStream_t s) { SPECLAB_CUDA_CHECK(cudaEventRecord(events_[2 * i + 1], s)); }
  double seconds(int i) {
    float ms = 0.0f;
    SPECLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
    return ms * 1e-3;
  }

 private:
  std::vector<cudaEvent_t> events_;
};

// Device-to-device cudaMemcpy of 1 GiB: (read + write bytes) / time, median of the repeats.
double copy_gbps(cudaStream_t stream, int repeats) {
  const int64_t bytes = int64_t{1} << 30;
  Device<char> a(bytes), b(bytes);
  Events ev(repeats);
  SPECLAB_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  for (int r = 0; r < repeats; ++r) {
    ev.start(r, stream);
    SPECLAB_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    ev.stop(r, stream);
  }
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) t.push_back(ev.seconds(r));
  return 2.0 * bytes / median(t) / 1e9;
}

// One launch's cost on the stream: a 4-byte cudaMemsetAsync (a one-block kernel) between events,
// median of the repeats, in seconds. The floor of a kernel is its bytes ÷ the copy bandwidth plus
// this.
double launch_seconds(cudaStream_t stream, int repeats) {
  Device<char> word(4);
  Events ev(repeats);
  SPECLAB_CUDA_CHECK(cudaMemsetAsync(word.get(), 0, 4, stream));
  for (int r = 0; r < repeats; ++r) {
    ev.start(r, stream);
    SPECLAB_CUDA_CHECK(cudaMemsetAsync(word.get(), 0, 4, stream));
    ev.stop(r, stream);
  }
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) t.push_back(ev.seconds(r));
  return median(t);
}

// What one row times: a verifier on probabilities, the softmax alone, the softmax followed by a
// probability verifier (two kernels), or the verifier on logits with the softmax fused.
enum class Verifier { kV1, kV2, kV3, kV5, kNone };
enum class Stage { kProbs, kSoftmax, kTwoKernels, kFused };
struct Path {
  Verifier verifier;
  Stage stage;
  gpu::LogitsFormat format = gpu::LogitsFormat::kFloat32;  ///< of the logits (not kProbs)
  /// With a workspace: kProbs V1/V3/V5 split the vocabulary over CTAs (V2: rows in parallel),
  /// kFused reduces the rows' statistics in parallel (both only at B < SMs).
  bool split = false;
};

std::vector<Path> bench_paths() {
  using F = gpu::LogitsFormat;
  std::vector<Path> paths = {{Verifier::kV1, Stage::kProbs},
                             {Verifier::kV1, Stage::kProbs, F::kFloat32, true},
                             {Verifier::kV2, Stage::kProbs},
                             {Verifier::kV2, Stage::kProbs, F::kFloat32, true},
                             {Verifier::kV3, Stage::kProbs},
                             {Verifier::kV3, Stage::kProbs, F::kFloat32, true},
                             {Verifier::kV5, Stage::kProbs},
                             {Verifier::kV5, Stage::kProbs, F::kFloat32, true},
                             {Verifier::kNone, Stage::kSoftmax, F::kFloat32}};
  for (F format : {F::kFloat32, F::kBFloat16}) {
    if (format != F::kFloat32) paths.push_back({Verifier::kNone, Stage::kSoftmax, format});
    for (Verifier v : {Verifier::kV1, Verifier::kV2, Verifier::kV5}) {
      paths.push_back({v, Stage::kTwoKernels, format});
      paths.push_back({v, Stage::kFused, format});
      paths.push_back({v, Stage::kFused, format, true});
    }
  }
  return paths;
}

std::string path_kernel(const Path& p) {
  const char* verifiers[] = {"verify_chain V1", "verify_chain V2", "verify_chain V3",
                             "verify_block V5", ""};
  const std::string verifier = verifiers[static_cast<int>(p.verifier)];
  if (p.stage == Stage::kSoftmax) return "probs_from_logits";
  if (p.split) return verifier + (p.stage == Stage::kFused ? " rows" : " split");
  return p.stage == Stage::kTwoKernels ? "probs_from_logits + " + verifier : verifier;
}

std::string path_input(const Path& p) {
  if (p.stage == Stage::kProbs) return "probs_fp32";
  return p.format == gpu::LogitsFormat::kFloat32 ? "logits_fp32" : "logits_bf16";
}

struct KernelRow {
  std::string kernel, input;
  int64_t batch, gamma, vocab;
  double seconds, gbps, bytes;
};

// One (B, γ, V): a pool of `copies` input sets (target logits [B, γ+1, V] and draft logits
// [B, γ, V] as fp32 and as bf16 (the fp32 values rounded), the probabilities of the fp32 logits,
// draft tokens x_i ~ q_i), then every path timed over them.
void bench_config(int64_t batch, int64_t gamma, int64_t vocab, int repeats, int multiprocessors,
                  std::string_view only, cudaStream_t stream, std::vector<KernelRow>& rows) {
  using F = gpu::LogitsFormat;
  const int64_t target_rows = batch * (gamma + 1), draft_rows = batch * gamma;
  // fp32 and bf16 logits and fp32 probabilities of every row: 4 + 2 + 4 bytes per entry.
  const double set_bytes = 10.0 * vocab * (target_rows + draft_rows);
  // Launches rotate through the copies; the least a launch reads is one bf16 row per request
  // (V2 on logits accepting nothing: 2V·B bytes), so between two reads of a copy at least
  // kPoolBytes pass through the L2 (unless kMaxInputBytes caps the pool).
  const int64_t copies = std::clamp<int64_t>(
      std::min<int64_t>(static_cast<int64_t>(kPoolBytes / (2.0 * vocab * batch)) + 1,
                        static_cast<int64_t>(kMaxInputBytes / set_bytes)),
      1, 4096);
  const int64_t n_t = copies * target_rows * vocab, n_d = copies * draft_rows * vocab;
  Device<float> logits_target(n_t), logits_draft(n_d), probs_target(n_t), probs_draft(n_d);
  Device<uint16_t> bf16_target(n_t), bf16_draft(n_d);
  // probs_from_logits' row status: the target rows of every copy, then the draft rows.
  Device<uint32_t> status(copies * (target_rows + draft_rows));
  Device<int32_t> tokens(copies * draft_rows);
  for (F format : {F::kFloat32, F::kBFloat16}) {
    const bool fp32 = format == F::kFloat32;
    gpu::SyntheticLogitsArgs t{.seed = 11,
                               .rows = copies * target_rows,
                               .vocab = vocab,
                               .scale = 2.5f,
                               .out = fp32 ? static_cast<void*>(logits_target.get())
                                           : static_cast<void*>(bf16_target.get()),
                               .format = format};
    SPECLAB_CUDA_CHECK(gpu::synthetic_logits(t, stream));
    gpu::SyntheticLogitsArgs d{
        .seed = 12,
        .rows = copies * draft_rows,
        .vocab = vocab,
        .scale = 0.6f,
        .base = logits_target.get(),
        .group = gamma,
        .base_group_stride = gamma + 1,
        .out = fp32 ? static_cast<void*>(logits_draft.get()) : static_cast<void*>(bf16_draft.get()),
        .format = format};
    SPECLAB_CUDA_CHECK(gpu::synthetic_logits(d, stream));
  }
  auto logits_of = [&](F format, bool target, int64_t k) {
    const int64_t n = (target ? target_rows : draft_rows) * vocab;
    if (format == F::kFloat32) {
      return std::as_bytes((target ? logits_target : logits_draft).span(k * n, n));
    }
    return std::as_bytes((target ? bf16_target : bf16_draft).span(k * n, n));
  };
  // Copy k's probabilities from its logits (the fp32 ones while generating the pool).
  auto softmax = [&](F format, bool target, int64_t k) {
    const int64_t r = target ? target_rows : draft_rows, n = r * vocab;
    return gpu::probs_from_logits(format, logits_of(format, target, k), r, vocab, 1.0,
                                  (target ? probs_target : probs_draft).span(k * n, n),
                                  status.span(target ? k * r : copies * target_rows + k * r, r),
                                  stream);
  };
  SPECLAB_CUDA_CHECK(gpu::probs_from_logits(
      F::kFloat32, std::as_bytes(logits_target.span(0, n_t)), copies * target_rows, vocab, 1.0,
      probs_target.span(0, n_t), status.span(0, copies * target_rows), stream));
  SPECLAB_CUDA_CHECK(gpu::probs_from_logits(
      F::kFloat32, std::as_bytes(logits_draft.span(0, n_d)), copies * draft_rows, vocab, 1.0,
      probs_draft.span(0, n_d), status.span(copies * target_rows, copies * draft_rows), stream));
  for (int64_t i = 0; i < gamma; ++i) {
    gpu::SampleRowsArgs s{.probs = probs_draft.get() + i * vocab,
                          .probs_stride = gamma * vocab,
                          .rows = copies * batch,
                          .vocab = vocab,
                          .seed = 13,
                          .position = static_cast<uint32_t>(i + 1),
                          .tokens = tokens.get() + i,
                          .token_stride = gamma};
    SPECLAB_CUDA_CHECK(gpu::sample_rows(s, stream));
  }
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  // Outputs per repeat, read back after all launches to count the bytes each had to read.
  Device<int32_t> emitted(repeats * batch * (gamma + 1)), n_accepted(repeats * batch);
  Device<uint8_t> mask(repeats * draft_rows), fallback(repeats * batch);
  Device<uint32_t> out_status(repeats * batch);
  // The split rows' workspace (zeroed; every launch leaves it so), shared by their launches.
  const auto workspace_bytes =
      static_cast<int64_t>(gpu::chain_workspace_bytes(batch, gamma, vocab));
  Device<std::byte> workspace(workspace_bytes);
  auto batch_of = [&](int64_t k) {
    return ChainBatch{batch,
                      gamma,
                      vocab,
                      probs_target.span(k * target_rows * vocab, target_rows * vocab),
                      probs_draft.span(k * draft_rows * vocab, draft_rows * vocab),
                      tokens.span(k * draft_rows, draft_rows),
                      {},
                      {}};
  };
  auto logits_batch_of = [&](F format, int64_t k) {
    return gpu::LogitsBatch{.batch = batch,
                            .gamma = gamma,
                            .vocab = vocab,
                            .target = {format, logits_of(format, true, k), 1.0},
                            .draft = {format, logits_of(format, false, k), 1.0},
                            .draft_tokens = tokens.span(k * draft_rows, draft_rows)};
  };
  auto output_of = [&](int r) {
    return gpu::ChainDeviceOutput{
        emitted.span(r * batch * (gamma + 1), batch * (gamma + 1)),
        n_accepted.span(r * batch, batch), mask.span(r * draft_rows, draft_rows),
        fallback.span(r * batch, batch), out_status.span(r * batch, batch)};
  };
  auto chain_params = [](Verifier v, uint32_t step) {
    if (v == Verifier::kV2) return ChainParams{.method = ChainMethod::kGreedy, .seed = 5};
    if (v == Verifier::kV3) {
      return ChainParams{.method = ChainMethod::kLenient, .leniency = 0.7, .seed = 5, .step = step};
    }
    return ChainParams{.seed = 5, .step = step};
  };
  // Bytes that must be read for one request with n accepted (gpu/README.md tables).
  auto request_bytes = [&](const Path& p, int32_t n) {
    const int64_t s = gpu::logit_bytes(p.format);
    if (p.stage == Stage::kSoftmax) return probs_from_logits_bytes(gamma + 1, vocab, s);
    // Split and rows-parallel launches read more rows only where they run so (B < SMs).
    const bool parallel = p.split && batch < multiprocessors && gamma > 0;
    if (p.stage == Stage::kFused && parallel) {
      return p.verifier == Verifier::kV2   ? greedy_logits_rows_bytes(gamma, vocab, s)
             : p.verifier == Verifier::kV5 ? block_logits_rows_bytes(gamma, vocab, s, n)
                                           : chain_logits_rows_bytes(gamma, vocab, s, n);
    }
    if (p.stage == Stage::kProbs && parallel && p.verifier == Verifier::kV5) {
      return block_probs_split_bytes(gamma, vocab, n);
    }
    if (p.stage == Stage::kFused) {
      return p.verifier == Verifier::kV2   ? greedy_logits_bytes(gamma, vocab, s, n)
             : p.verifier == Verifier::kV5 ? block_logits_bytes(gamma, vocab, s, n)
                                           : chain_logits_bytes(gamma, vocab, s, n);
    }
    const double verify = p.verifier == Verifier::kV2   ? greedy_probs_bytes(gamma, vocab, n)
                          : p.verifier == Verifier::kV5 ? block_probs_bytes(gamma, vocab, n)
                                                        : chain_probs_bytes(gamma, vocab, n);
    if (p.stage == Stage::kProbs) return verify;
    // Two kernels: V2 needs only the target's probabilities, the others the draft's too.
    const int64_t softmax_rows = p.verifier == Verifier::kV2 ? gamma + 1 : 2 * gamma + 1;
    return probs_from_logits_bytes(softmax_rows, vocab, s) + verify;
  };
  int64_t next_copy = 0;
  for (const Path& path : bench_paths()) {
    const std::string kernel = path_kernel(path);
    if (kernel.find(only) == std::string::npos) continue;
    Events ev(repeats);
    auto launch = [&](int r, int64_t k) -> cudaError_t {
      const auto step = static_cast<uint32_t>(r);
      gpu::ChainDeviceOutput output = output_of(r);
      if (path.split) output.workspace = {workspace.span(0, workspace_bytes), 0};
      if (path.stage == Stage::kSoftmax) return softmax(path.format, true, k);
      if (path.stage == Stage::kFused) {
        if (path.verifier == Verifier::kV5) {
          return gpu::verify_block(logits_batch_of(path.format, k), {.seed = 5, .step = step},
                                   output, stream);
        }
        return gpu::verify_chain(logits_batch_of(path.format, k), chain_params(path.verifier, step),
                                 output, stream);
      }
      if (path.stage == Stage::kTwoKernels) {
        if (const cudaError_t e = softmax(path.format, true, k); e != cudaSuccess) return e;
        if (path.verifier != Verifier::kV2) {
          if (const cudaError_t e = softmax(path.format, false, k); e != cudaSuccess) return e;
        }
      }
      if (path.verifier == Verifier::kV5) {
        return gpu::verify_block(batch_of(k), {.seed = 5, .step = step}, output, stream);
      }
      return gpu::verify_chain(batch_of(k), chain_params(path.verifier, step), output, stream);
    };
    SPECLAB_CUDA_CHECK(launch(0, next_copy++ % copies));  // warm-up
    for (int r = 0; r < repeats; ++r) {
      ev.start(r, stream);
      SPECLAB_CUDA_CHECK(launch(r, next_copy++ % copies));
      ev.stop(r, stream);
    }
    SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> times, gbps, bytes_list;
    const std::vector<int32_t> accepted = n_accepted.host();
    const std::vector<uint32_t> st = out_status.host();
    for (int r = 0; r < repeats; ++r) {
      double bytes = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        if (path.stage != Stage::kSoftmax && st[r * batch + b] != 0) {
          throw Error(fmt::format("bench gpu: {} on {} reported status {} for request {}", kernel,
                                  path_input(path), st[r * batch + b], b));
        }
        bytes += request_bytes(path, accepted[r * batch + b]);
      }
      const double t = ev.seconds(r);
      times.push_back(t);
      gbps.push_back(bytes / t / 1e9);
      bytes_list.push_back(bytes);
    }
    rows.push_back({kernel, path_input(path), batch, gamma, vocab, median(times), median(gbps),
                    median(bytes_list)});
  }
}

struct LoopRow {
  int64_t batch = 0;
  double gpu_tokens_per_s = 0, core_tokens_per_s = 0, emitted_per_step = 0;
};

LoopRow bench_loop(int64_t batch, int64_t tokens, cudaStream_t stream) {
  auto target = make_linear_softmax_model("lsm-target");
  auto draft = make_linear_softmax_model("lsm-draft");
  gpu::LinearSoftmaxDevice target_device(*target, stream), draft_device(*draft, stream);
  std::vector<std::vector<int32_t> > prompts;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<int32_t> p(16);
    for (size_t i = 0; i < p.size(); ++i) {
      const RandomAddress a{
          3, static_cast<uint32_t>(b), 0, static_cast<uint32_t>(i), Purpose::kPlainSample, 1};
      p[i] = static_cast<int32_t>(philox_bits(a) % static_cast<uint32_t>(target->vocab()));
    }
    prompts.push_back(p);
  }
  const DecodeConfig config{.max_new_tokens = tokens, .seed = 3, .gamma = 5};
  gpu::speculative_decode(target_device, draft_device, prompts,
                          {.max_new_tokens = 8, .seed = 4, .gamma = 5});  // warm-up
  const DecodeResult on_gpu = gpu::speculative_decode(target_device, draft_device, prompts, config);
  const DecodeResult on_cpu = speculative_decode(*target, *draft, prompts, config);
  return {batch, on_gpu.metrics.tokens / on_gpu.metrics.decode_seconds,
          on_cpu.metrics.tokens / on_cpu.metrics.decode_seconds, on_gpu.metrics.emitted_per_step()};
}

}  // namespace

void run_bench_gpu(const BenchGpuOptions& o) {
  if (o.repeats < 3) {
    throw InvalidInput(fmt::format("bench gpu needs --repeats ≥ 3 (got {})", o.repeats));
  }
  std::vector<std::string> kernels;
  for (const Path& path : bench_paths()) kernels.push_back(path_kernel(path));
  const GpuShapes shapes = gpu_shapes(o, kernels);
  if (gpu::device_count() == 0) {
    const char* message = "no CUDA device (cudaGetDeviceCount failed or returned 0)";
    if (o.json) {
      std::printf("%s\n", json_text({{"device", nullptr}, {"message", message}}).c_str());
    } else {
      std::printf("speclab bench gpu: %s; nothing measured\n", message);
    }
    return;
  }
  cudaDeviceProp prop{};
  SPECLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream = nullptr;
  SPECLAB_CUDA_CHECK(cudaStreamCreate(&stream));
  const double copy = copy_gbps(stream, 9);
  const double launch = launch_seconds(stream, 101);
  // The floor of a row: its bytes at the copy bandwidth plus one launch.
  const auto floor_seconds = [&](const KernelRow& r) { return r.bytes / (copy * 1e9) + launch; };
  std::vector<KernelRow> rows;
  for (int64_t vocab : shapes.vocab) {
    for (int64_t batch : shapes.batch) {
      for (int64_t gamma : shapes.gamma) {
        bench_config(batch, gamma, vocab, o.repeats, prop.multiProcessorCount, o.only, stream,
                     rows);
      }
    }
  }
  std::vector<LoopRow> loops;
  if (o.only.empty()) {
    for (int64_t batch : {int64_t{1}, int64_t{8}})
      loops.push_back(bench_loop(batch, o.tokens, stream));
  }
  SPECLAB_CUDA_CHECK(cudaStreamDestroy(stream));

  if (o.json) {
    Json kernels = Json::array(), decode = Json::array();
    for (const auto& r : rows) {
      kernels.push_back({{"kernel", r.kernel},
                         {"input", r.input},
                         {"batch", r.batch},
                         {"gamma", r.gamma},
                         {"vocab", r.vocab},
                         {"seconds", r.seconds},
                         {"bytes", r.bytes},
                         {"gbps", r.gbps},
                         {"ratio_to_copy", r.gbps / copy},
                         {"floor_seconds", floor_seconds(r)},
                         {"ratio_to_floor", r.seconds / floor_seconds(r)}});
    }
    for (const auto& l : loops) {
      decode.push_back({{"model", "lsm-target/lsm-draft"},
                        {"batch", l.batch},
                        {"gamma", 5},
                        {"gpu_tokens_per_s", l.gpu_tokens_per_s},
                        {"core_tokens_per_s", l.core_tokens_per_s},
                        {"speedup_over_core", l.gpu_tokens_per_s / l.core_tokens_per_s},
                        {"emitted_per_step", l.emitted_per_step}});
    }
    Json json = machine_json(machine_identity());
    json.update(Json{{"device", prop.name},
                     {"copy_gbps", copy},
                     {"launch_seconds", launch},
                     {"repeats", o.repeats},
                     {"kernels", kernels},
                     {"decode", decode}});
    std::printf("%s\n", json_text(json).c_str());
    return;
  }
  std::printf("speclab bench gpu on %s\n", prop.name);
  std::printf("  host: %s\n", machine_line(machine_identity()).c_str());
  std::printf("  device-to-device cudaMemcpy: %.1f GB/s (read + write)\n", copy);
  std::printf("  one launch (a 4-byte cudaMemsetAsync): %.2f µs\n", launch * 1e6);
  std::printf(
      "  floor = bytes / copy bandwidth + one launch; goals: ≥ 80%% of copy at B = 64, "
      "≤ 2× the floor at B = 1 and 8\n");
  std::printf(
      "  effective GB/s = bytes the kernel must move (gpu/README.md) / median event time\n");
  std::printf(
      "  two kernels (probs_from_logits + verifier) and fused (the verifier on logits) read the "
      "same logits\n");
  std::printf("  %-35s %-11s %4s %3s %7s %10s %10s %8s %8s\n", "kernel", "input", "B", "γ", "V",
              "µs", "GB/s", "vs copy", "x floor");
  for (const auto& r : rows) {
    // A fused row: how many times faster than the two kernels on the same inputs.
    std::string versus;
    for (const auto& two : rows) {
      if (r.input != "probs_fp32" && two.kernel == "probs_from_logits + " + r.kernel &&
          two.input == r.input && two.batch == r.batch && two.gamma == r.gamma &&
          two.vocab == r.vocab) {
        versus = fmt::format("  {:.2f}x the two kernels' speed", two.seconds / r.seconds);
      }
    }
    const double to_floor = r.seconds / floor_seconds(r);
    const char* goal =
        r.batch == 64 ? (r.gbps >= 0.8 * copy ? "  (goal ≥ 80%: met)" : "  (goal ≥ 80%: not met)")
        : to_floor <= 2.0 ? "  (goal ≤ 2× floor: met)"
                          : "  (goal ≤ 2× floor: not met)";
    std::printf("  %-35s %-11s %4lld %3lld %7lld %10.2f %10.1f %7.0f%% %7.2fx%s%s\n",
                r.kernel.c_str(), r.input.c_str(), static_cast<long long>(r.batch),
                static_cast<long long>(r.gamma), static_cast<long long>(r.vocab), r.seconds * 1e6,
                r.gbps, 100.0 * r.gbps / copy, to_floor, goal, versus.c_str());
  }
  std::printf("  LinearSoftmax decoding, lsm-target / lsm-draft, γ = 5, %lld tokens per request:\n",
              static_cast<long long>(o.tokens));
  for (const auto& l : loops) {
    std::printf(
        "    B=%-3lld device %10.1f tokens/s   core %8.1f tokens/s   %.1fx   (%.2f emitted/step)\n",
        static_cast<long long>(l.batch), l.gpu_tokens_per_s, l.core_tokens_per_s,
        l.gpu_tokens_per_s / l.core_tokens_per_s, l.emitted_per_step);
  }
}

#endif

}  // namespace speclab::cli
