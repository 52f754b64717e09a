// The device decoding loop of gpu/decode/speculative_decode.hpp. Device state per request b: its
// sequence (prompt, accepted tokens, and this step's drafts past the end), its length, tokens
// generated, γ_b and a finished flag; a step log (n_accepted, γ_b, fallback per request) that the
// host reads once at the end to fill the metrics; and the seed and step word (DeviceSeedStep)
// that every sampler and verifier reads and the last kernel of a step advances, so that a step
// captured in a CUDA graph replays as the next step.
#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/decode/decode.hpp"
#include "gpu/base/cuda_check.hpp"
#include "gpu/base/simt.cuh"
#include "gpu/decode/speculative_decode.hpp"
#include "gpu/sampling/logits.hpp"
#include "gpu/sampling/sampling.hpp"
#include "gpu/verify/verify_block.hpp"
#include "gpu/verify/verify_chain.hpp"

namespace speclab::gpu {
namespace {

constexpr int kThreads = 128;

struct LoopState {
  int32_t* sequences = nullptr;  // [B × stride]
  int64_t stride = 0;
  int32_t* lengths = nullptr;           // [B]
  int32_t* generated = nullptr;         // [B]
  int32_t* n_draft = nullptr;           // [B]
  int32_t* finished = nullptr;          // [B]
  int32_t* active = nullptr;            // [1] requests still active after the step
  DeviceSeedStep* seed_step = nullptr;  // [1] the seed and the step being run
  int64_t batch = 0, gamma = 0, max_new = 0;
};

// γ_b = min(γ, tokens left − 1) for an active request, 0 (and nothing committed) otherwise.
__global__ void __launch_bounds__(kThreads) plan_kernel(LoopState s) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (b == 0) *s.active = 0;
  if (b >= s.batch) return;
  const int64_t left = s.max_new - s.generated[b];
  s.n_draft[b] = s.finished[b] ? 0 : static_cast<int32_t>(left - 1 < s.gamma ? left - 1 : s.gamma);
}

struct CommitArgs {
  LoopState s;
  const int32_t* emitted = nullptr;        // [B × (γ+1)]
  const int32_t* n_accepted = nullptr;     // [B]
  const uint8_t* fallback = nullptr;       // [B]
  const uint32_t* status = nullptr;        // [B] verifier status
  const uint32_t* draft_status = nullptr;  // [B] sampling status
  int32_t* log = nullptr;      // [max_new × B × 3]; the step's rows at s.seed_step->step: n, γ_b
                               // (−1 = inactive), fallback
  uint32_t* errors = nullptr;  // [1] ORed status bits of active requests
};

__global__ void __launch_bounds__(kThreads) commit_kernel(CommitArgs a) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (b >= a.s.batch) return;
  int32_t* log = a.log + (static_cast<int64_t>(a.s.seed_step->step) * a.s.batch + b) * 3;
  if (a.s.finished[b]) {
    log[0] = 0;
    log[1] = -1;
    log[2] = 0;
    return;
  }
  const uint32_t bad = a.status[b] | a.draft_status[b];
  if (bad != 0) atomicOr(a.errors, bad);
  const int32_t n = bad != 0 ? 0 : a.n_accepted[b];
  const int64_t g = a.s.gamma;
  int32_t* seq = a.s.sequences + b * a.s.stride + a.s.lengths[b];
  for (int32_t i = 0; i <= n; ++i) seq[i] = a.emitted[b * (g + 1) + i];
  a.s.lengths[b] += n + 1;
  a.s.generated[b] += n + 1;
  log[0] = n;
  log[1] = a.s.n_draft[b];
  log[2] = a.fallback[b];
  if (a.s.generated[b] >= a.s.max_new) {
    a.s.finished[b] = 1;
  } else {
    atomicAdd(a.s.active, 1);
  }
}

// The step's last kernel: the next step samples and verifies at step + 1 and logs into its row.
__global__ void advance_step_kernel(DeviceSeedStep* seed_step) { seed_step->step += 1; }

// Device allocations of one run, freed together.
class Buffers {
 public:
  ~Buffers() {
    for (void* p : owned_) cudaFree(p);
  }
  template <typename T>
  T* get(int64_t n) {
    void* p = nullptr;
    SPECLAB_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
    owned_.push_back(p);
    SPECLAB_CUDA_CHECK(cudaMemset(p, 0, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
    return static_cast<T*>(p);
  }

 private:
  std::vector<void*> owned_;
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What the device loop cannot run: models of different vocabularies or streams, a verifier other
// than the chain and block families, sampling beyond a temperature, request ids other than b.
void check_inputs(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft,
                  std::span<const std::vector<int32_t>> prompts, const DecodeConfig& config) {
  if (target.vocab() != draft.vocab()) {
    throw InvalidInput("draft " + draft.name() + " has vocabulary size " +
                       std::to_string(draft.vocab()) + " but target " + target.name() + " has " +
                       std::to_string(target.vocab()) +
                       "; speculative decoding needs the same "
                       "vocabulary");
  }
  validate_decode_config(config, prompts, target.vocab(), true);
  const VerifierFamily family = family_of(config.verifier);
  if (family != VerifierFamily::kChain && family != VerifierFamily::kBlock) {
    throw InvalidInput("verifier is \"" + std::string(verifier_name(config.verifier)) +
                       "\"; the device loop runs \"token\", \"greedy\", \"lenient\" or \"block\"");
  }
  if (config.first_step != 0 || !config.generated.empty()) {
    throw InvalidInput(
        "decode.first_step / decode.generated resume a run; the device loop starts every request "
        "at its first token");
  }
  check_temperature_only(config.sampling, "decode.sampling");
  check_temperature_only(config.draft_sampling, "decode.draft_sampling");
  for (size_t b = 0; b < config.request_ids.size(); ++b) {
    if (config.request_ids[b] != b) {
      throw InvalidInput("decode.request_ids[" + std::to_string(b) + "] is " +
                         std::to_string(config.request_ids[b]) +
                         "; the device loop addresses request b's random numbers by b, so it "
                         "takes request_ids empty or 0, 1, ..., B-1");
    }
  }
  if (target.stream() != draft.stream()) {
    throw InvalidInput("target and draft run on different streams; expected one stream");
  }
}

// The loop state with every prompt uploaded at the start of its sequence; room for the longest
// prompt, the token budget and one step's drafts past it.
LoopState make_loop_state(Buffers& buffers, std::span<const std::vector<int32_t>> prompts,
                          int64_t gamma, int64_t max_new, cudaStream_t stream) {
  const int64_t batch = static_cast<int64_t>(prompts.size());
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, p.size());
  LoopState s;
  s.batch = batch;
  s.gamma = gamma;
  s.max_new = max_new;
  s.stride = longest + max_new + gamma + 1;
  s.sequences = buffers.get<int32_t>(batch * s.stride);
  s.lengths = buffers.get<int32_t>(batch);
  s.generated = buffers.get<int32_t>(batch);
  s.n_draft = buffers.get<int32_t>(batch);
  s.finished = buffers.get<int32_t>(batch);
  s.active = buffers.get<int32_t>(1);
  std::vector<int32_t> sequences(batch * s.stride, 0), lengths(batch);
  for (int64_t b = 0; b < batch; ++b) {
    std::copy(prompts[b].begin(), prompts[b].end(), sequences.begin() + b * s.stride);
    lengths[b] = static_cast<int32_t>(prompts[b].size());
  }
  SPECLAB_CUDA_CHECK(cudaMemcpyAsync(s.sequences, sequences.data(),
                                     sequences.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                     stream));
  SPECLAB_CUDA_CHECK(cudaMemcpyAsync(s.lengths, lengths.data(), lengths.size() * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream));
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return s;
}

// The device memory of one run: the loop state, one step's rows (logits when the softmax is
// fused, probabilities otherwise) and verifier outputs, and the step log of the whole run.
struct DeviceRun {
  LoopState s;
  int64_t vocab = 0;
  bool fused = true;
  float* draft_logits = nullptr;      // fused: [B, γ, V] (not for V2, which never reads q)
  float* target_logits = nullptr;     // fused: [B, γ+1, V]
  float* step_logits = nullptr;       // fused: [B, V] the draft's logits at one position
  float* probs_draft = nullptr;       // [B, γ, V]
  float* probs_target = nullptr;      // [B, γ+1, V]
  float* q_step = nullptr;            // [B, V] the draft's rows at one position
  uint32_t* logits_status = nullptr;  // [B × (γ+1)]
  uint32_t* draft_status = nullptr;   // [B]
  int32_t* draft_tokens = nullptr;    // [B, γ]
  int32_t* emitted = nullptr;         // [B, γ+1]
  int32_t* n_accepted = nullptr;      // [B]
  uint8_t* accept_mask = nullptr;     // [B, γ]
  uint8_t* fallback = nullptr;        // [B]
  uint32_t* status = nullptr;         // [B]
  uint32_t* errors = nullptr;         // [1]
  int32_t* log = nullptr;             // [max_new × B × 3]
  std::byte* workspace = nullptr;     // the verifier's vocabulary splitting (zeroed)
  size_t workspace_bytes = 0;

  ChainBatch chain() const {
    const int64_t batch = s.batch, gamma = s.gamma, v = vocab;
    return {batch,
            gamma,
            v,
            {probs_target, static_cast<size_t>(batch * (gamma + 1) * v)},
            {probs_draft, static_cast<size_t>(batch * gamma * v)},
            {draft_tokens, static_cast<size_t>(batch * gamma)},
            {s.n_draft, static_cast<size_t>(batch)},
            {}};
  }
  // Both models' logits as the verifiers on logits read them (V2: the target's only).
  LogitsBatch logits_batch(const DecodeConfig& config) const {
    const int64_t batch = s.batch, gamma = s.gamma, v = vocab;
    const auto bytes = [](const float* p, int64_t n) {
      return p == nullptr ? std::span<const std::byte>()
                          : std::as_bytes(std::span<const float>(p, static_cast<size_t>(n)));
    };
    return {batch,
            gamma,
            v,
            {LogitsFormat::kFloat32, bytes(target_logits, batch * (gamma + 1) * v),
             config.sampling.temperature},
            {LogitsFormat::kFloat32, bytes(draft_logits, batch * gamma * v),
             config.draft_sampling.temperature},
            {draft_tokens, static_cast<size_t>(batch * gamma)},
            {s.n_draft, static_cast<size_t>(batch)},
            {}};
  }
  ChainDeviceOutput output() const {
    const int64_t batch = s.batch, gamma = s.gamma;
    return {{emitted, static_cast<size_t>(batch * (gamma + 1))},
            {n_accepted, static_cast<size_t>(batch)},
            {accept_mask, static_cast<size_t>(batch * gamma)},
            {fallback, static_cast<size_t>(batch)},
            {status, static_cast<size_t>(batch)},
            {{workspace, workspace_bytes}, 0}};
  }
};

bool is_greedy(const DecodeConfig& config) {
  const auto* v = std::get_if<ChainVerifier>(&config.verifier);
  return v != nullptr && v->method == ChainMethod::kGreedy;
}

DeviceRun allocate_run(Buffers& buffers, std::span<const std::vector<int32_t>> prompts,
                       const DecodeConfig& config, int64_t v, bool fused, cudaStream_t stream) {
  const int64_t gamma = config.gamma, max_new = config.max_new_tokens;
  DeviceRun d;
  d.s = make_loop_state(buffers, prompts, gamma, max_new, stream);
  d.s.seed_step = buffers.get<DeviceSeedStep>(1);
  const DeviceSeedStep first{config.seed, 0, 0};
  SPECLAB_CUDA_CHECK(cudaMemcpy(d.s.seed_step, &first, sizeof first, cudaMemcpyHostToDevice));
  d.vocab = v;
  d.fused = fused;
  const int64_t batch = d.s.batch;
  if (fused) {
    if (!is_greedy(config)) d.draft_logits = buffers.get<float>(batch * gamma * v);
    d.target_logits = buffers.get<float>(batch * (gamma + 1) * v);
    d.step_logits = buffers.get<float>(batch * v);
  } else {
    d.probs_draft = buffers.get<float>(batch * gamma * v);
    d.probs_target = buffers.get<float>(batch * (gamma + 1) * v);
    d.q_step = buffers.get<float>(batch * v);
    d.logits_status = buffers.get<uint32_t>(batch * (gamma + 1));
    // The vocabulary splitting of the verifiers on probabilities.
    d.workspace_bytes = chain_workspace_bytes(batch, gamma, v);
    d.workspace = buffers.get<std::byte>(static_cast<int64_t>(d.workspace_bytes));
  }
  d.draft_status = buffers.get<uint32_t>(batch);
  d.draft_tokens = buffers.get<int32_t>(batch * gamma);
  d.emitted = buffers.get<int32_t>(batch * (gamma + 1));
  d.n_accepted = buffers.get<int32_t>(batch);
  d.accept_mask = buffers.get<uint8_t>(batch * gamma);
  d.fallback = buffers.get<uint8_t>(batch);
  d.status = buffers.get<uint32_t>(batch);
  d.errors = buffers.get<uint32_t>(1);
  // Every step emits ≥ 1 token per active request, so max_new steps always suffice.
  d.log = buffers.get<int32_t>(max_new * batch * 3);
  return d;
}

// Draft position i of every request in one pass (requests past their γ_b are scored but not
// sampled): x_i lands in draft_tokens and in the sequence past its end. Fused: sampled from the
// draft's logits, which are copied into draft_logits [B, γ, V] for the verifier (not for V2);
// otherwise q_i is computed and copied into probs_draft [B, γ, V]. `step` is the host's count,
// used only where the device word is not read.
void draft_position(LinearSoftmaxDevice& draft, const DeviceRun& d, const DecodeConfig& config,
                    uint32_t step, int64_t i, cudaStream_t stream) {
  const LoopState& s = d.s;
  const DeviceTokens sequences{s.sequences, s.stride, s.lengths, s.batch};
  SampleRowsArgs sample;
  sample.rows = s.batch;
  sample.vocab = d.vocab;
  sample.seed = config.seed;
  sample.step = step;
  sample.seed_step = s.seed_step;
  sample.position = static_cast<uint32_t>(i + 1);
  sample.purpose = Purpose::kDraftSample;
  sample.limit = s.n_draft;
  sample.tokens = d.draft_tokens + i;
  sample.token_stride = s.gamma;
  sample.sequences = s.sequences;
  sample.seq_stride = s.stride;
  sample.lengths = s.lengths;
  sample.seq_offset = i;
  sample.status = d.draft_status;
  if (d.fused) {
    draft.logits(sequences, 1, i, d.step_logits);
    SampleLogitsArgs fused;
    fused.logits = {LogitsFormat::kFloat32,
                    std::as_bytes(std::span<const float>(d.step_logits,
                                                         static_cast<size_t>(s.batch * d.vocab))),
                    config.draft_sampling.temperature};
    fused.sample = sample;
    if (d.draft_logits != nullptr) {
      fused.copy_logits_to = d.draft_logits + i * d.vocab;
      fused.copy_logits_stride = s.gamma * d.vocab;
    }
    SPECLAB_CUDA_CHECK(sample_logits_rows(fused, stream));
    return;
  }
  draft.probs(sequences, 1, i, config.draft_sampling.temperature, d.q_step, d.logits_status);
  sample.probs = d.q_step;
  sample.copy_to = d.probs_draft + i * d.vocab;
  sample.copy_stride = s.gamma * d.vocab;
  SPECLAB_CUDA_CHECK(sample_rows(sample, stream));
}

// One whole step on `stream`, nothing but asynchronous launches, copies and memsets (so it can be
// captured): plan, the γ draft positions, the target, the verifier, the commit and the step
// advance. Samplers and verifiers read seed and step from the device word; `step` (the host's
// count) is also passed as their argument, which only an uncaptured launch reads correctly.
void issue_step(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft, const DeviceRun& d,
                const DecodeConfig& config, uint32_t step, cudaStream_t stream) {
  const LoopState& s = d.s;
  const int64_t batch = s.batch, gamma = s.gamma;
  const DeviceTokens sequences{s.sequences, s.stride, s.lengths, batch};
  const dim3 grid(static_cast<unsigned>((batch + kThreads - 1) / kThreads));
  SPECLAB_CUDA_CHECK(launch_kernel(plan_kernel, grid, dim3(kThreads), 0, stream, s));
  SPECLAB_CUDA_CHECK(cudaMemsetAsync(d.draft_status, 0, batch * sizeof(uint32_t), stream));
  for (int64_t i = 0; i < gamma; ++i) draft_position(draft, d, config, step, i, stream);
  // Target: the γ+1 positions of every request, one GEMM pair.
  if (d.fused) {
    target.logits(sequences, gamma + 1, 0, d.target_logits);
  } else {
    target.probs(sequences, gamma + 1, 0, config.sampling.temperature, d.probs_target,
                 d.logits_status);
  }
  const ChainDeviceOutput output = d.output();  // fused: no workspace (logits verifiers)
  if (const auto* v = std::get_if<ChainVerifier>(&config.verifier)) {
    const ChainParams params{
        .method = v->method, .leniency = v->leniency, .seed = config.seed, .step = step};
    SPECLAB_CUDA_CHECK(
        d.fused ? verify_chain(d.logits_batch(config), params, output, stream, s.seed_step)
                : verify_chain(d.chain(), params, output, stream, s.seed_step));
  } else {
    const BlockParams params{.seed = config.seed, .step = step};
    const BlockKernelOptions options{.seed_step = s.seed_step};
    SPECLAB_CUDA_CHECK(d.fused
                           ? verify_block(d.logits_batch(config), params, output, stream, options)
                           : verify_block(d.chain(), params, output, stream, options));
  }
  CommitArgs commit{.s = s,
                    .emitted = d.emitted,
                    .n_accepted = d.n_accepted,
                    .fallback = d.fallback,
                    .status = d.status,
                    .draft_status = d.draft_status,
                    .log = d.log,
                    .errors = d.errors};
  SPECLAB_CUDA_CHECK(launch_kernel(commit_kernel, grid, dim3(kThreads), 0, stream, commit));
  SPECLAB_CUDA_CHECK(launch_kernel(advance_step_kernel, dim3(1), dim3(1), 0, stream, s.seed_step));
}

// One step captured on a stream and instantiated; destroyed with the run.
class StepGraph {
 public:
  ~StepGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  bool ready() const { return exec_ != nullptr; }
  template <class Issue>
  void capture(cudaStream_t stream, const Issue& issue) {
    SPECLAB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    cudaGraph_t graph = nullptr;
    try {
      issue();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);  // leaves the stream usable; the capture is dropped
      if (graph != nullptr) cudaGraphDestroy(graph);
      throw;
    }
    SPECLAB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t instantiated = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    SPECLAB_CUDA_CHECK(instantiated);
  }
  void launch(cudaStream_t stream) const { SPECLAB_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// Runs steps until no request is active; returns how many ran (the step log's length). With
// `graph`, step 0 runs uncaptured (it sizes the models' scratch and makes any one-time host call
// of a launcher), step 1 is captured, and every step from 1 on is a replay of that graph.
int64_t run_steps(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft, const DeviceRun& d,
                  const DecodeConfig& config, bool graph, cudaStream_t stream) {
  const LoopState& s = d.s;
  StepGraph step_graph;
  for (int64_t steps = 0; steps < s.max_new;) {
    const auto step = static_cast<uint32_t>(steps);
    if (!graph || steps == 0) {
      issue_step(target, draft, d, config, step, stream);
    } else {
      if (!step_graph.ready()) {
        step_graph.capture(stream, [&] { issue_step(target, draft, d, config, step, stream); });
      }
      step_graph.launch(stream);
    }
    ++steps;
    int32_t active = 0;
    SPECLAB_CUDA_CHECK(
        cudaMemcpyAsync(&active, s.active, sizeof active, cudaMemcpyDeviceToHost, stream));
    SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (active == 0) return steps;
  }
  return s.max_new;
}

// While the loop runs, both models on one stream the loop can capture: their own unless it is
// the legacy stream 0, then a stream of the loop's, put back when the call ends.
class LoopStream {
 public:
  LoopStream(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft, bool graph)
      : target_(target), draft_(draft), stream_(target.stream()) {
    if (!graph || stream_ != nullptr) return;
    SPECLAB_CUDA_CHECK(cudaStreamCreate(&owned_));
    target_.set_stream(owned_);
    draft_.set_stream(owned_);
    stream_ = owned_;
  }
  ~LoopStream() {
    if (owned_ == nullptr) return;
    try {
      target_.set_stream(nullptr);
      draft_.set_stream(nullptr);
    } catch (...) {  // a sticky device error: the models are unusable either way
    }
    cudaStreamDestroy(owned_);
  }
  LoopStream(const LoopStream&) = delete;
  LoopStream& operator=(const LoopStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  LinearSoftmaxDevice& target_;
  LinearSoftmaxDevice& draft_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t owned_ = nullptr;
};

// What the host reads once the loop is done.
struct HostCopy {
  uint32_t error_bits = 0;
  std::vector<int32_t> log;        // [steps × B × 3]
  std::vector<int32_t> lengths;    // [B]
  std::vector<int32_t> sequences;  // [B × stride]
};

HostCopy download(const DeviceRun& d, int64_t steps) {
  const LoopState& s = d.s;
  HostCopy h{0, std::vector<int32_t>(steps * s.batch * 3), std::vector<int32_t>(s.batch),
             std::vector<int32_t>(s.batch * s.stride)};
  SPECLAB_CUDA_CHECK(
      cudaMemcpy(&h.error_bits, d.errors, sizeof h.error_bits, cudaMemcpyDeviceToHost));
  SPECLAB_CUDA_CHECK(
      cudaMemcpy(h.log.data(), d.log, h.log.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  SPECLAB_CUDA_CHECK(cudaMemcpy(h.lengths.data(), s.lengths, h.lengths.size() * sizeof(int32_t),
                                cudaMemcpyDeviceToHost));
  SPECLAB_CUDA_CHECK(cudaMemcpy(h.sequences.data(), s.sequences,
                                h.sequences.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return h;
}

// The metrics of the step log, in (step, request) order over the active requests.
DecodeMetrics metrics_from_log(const std::vector<int32_t>& log, int64_t steps, int64_t batch,
                               int64_t gamma) {
  DecodeMetrics m;
  m.requests = batch;
  m.start_positions(gamma);
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t* e = &log[(t * batch + b) * 3];
      if (e[1] < 0) continue;
      const int32_t n = e[0], drafted = e[1];
      // A chain tests positions up to the first rejection; the device loop has no EOS cut.
      m.record_step(drafted, std::min(n + 1, drafted), n, n + 1, e[2] != 0);
    }
  }
  return m;
}

}  // namespace

DecodeResult speculative_decode(LinearSoftmaxDevice& target, LinearSoftmaxDevice& draft,
                                std::span<const std::vector<int32_t>> prompts,
                                const DecodeConfig& config, const DeviceDecodeOptions& options) {
  check_inputs(target, draft, prompts, config);
  const double start = now();
  const LoopStream loop_stream(target, draft, options.graph);
  const cudaStream_t stream = loop_stream.get();
  Buffers buffers;
  const DeviceRun run =
      allocate_run(buffers, prompts, config, target.vocab(), options.fused_softmax, stream);
  // The device models keep no per-sequence state, so the prompt pass is the prompts' upload.
  SPECLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double decode_start = now();
  const int64_t steps = run_steps(target, draft, run, config, options.graph, stream);
  const HostCopy host = download(run, steps);
  if (host.error_bits != 0) {
    throw Error("device speculative decoding: a request reported status bits " +
                std::to_string(host.error_bits) +
                " (ChainStatus, or kSampleZeroRow from the draft sampler): a bad probability row");
  }
  DecodeResult result;
  result.metrics = metrics_from_log(host.log, steps, run.s.batch, config.gamma);
  result.tokens.resize(run.s.batch);
  for (int64_t b = 0; b < run.s.batch; ++b) {
    const int32_t* seq = &host.sequences[b * run.s.stride];
    result.tokens[b].assign(seq + prompts[b].size(), seq + host.lengths[b]);
  }
  DecodeMetrics& m = result.metrics;
  m.decode_seconds = now() - decode_start;
  m.request_prefill_seconds.assign(prompts.size(), (decode_start - start) / prompts.size());
  // Requests finish inside the graph, unseen by the host: each is charged the whole decode.
  m.request_decode_seconds.assign(prompts.size(), m.decode_seconds);
  for (const auto& p : prompts) m.prompt_tokens += static_cast<int64_t>(p.size());
  return result;
}

}  // namespace speclab::gpu
