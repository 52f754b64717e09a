// This host as the planner's hardware: its read bandwidth, fp32 FLOP rate, sampling cost and
// model-call overhead, measured with speclab's own kernels, for `speclab plan --gpu this-machine`
// and the planner's validation against measured decoding runs.
#pragma once

#include <optional>
#include <string_view>

#include "core/models/model.hpp"
#include "core/plan/cost_model.hpp"
#include "core/plan/hardware.hpp"

namespace speclab {

/// Measures this host: read bandwidth (measure_read_bandwidth), fp32 FLOP rate (the
/// LinearSoftmax skinny GEMM, 64 columns, on a matrix that stays in the last-level cache), the
/// sampling pipeline's time per logit (one thread, as the decode engine runs it) and the fixed
/// cost of a model call (the 16-token LinearSoftmax model). Memory is the host's RAM.
/// threads = 0: all cores (the GEMM on a 16 MiB matrix, the smallest it splits over threads);
/// threads = 1: one core (a 4 MiB matrix, which the GEMM runs on one thread).
HardwareSpec measure_this_machine(int threads = 0);

/// A GPU preset by name (find_gpu), or this host measured for kThisMachine (a second or two,
/// once per process).
HardwareSpec find_hardware(std::string_view name);

/// This host measured on one core (measure_this_machine(1)), once per process.
HardwareSpec this_machine_on_one_core();

/// The planner's cost model (core/plan/cost_model.hpp) of a pair on this host from what its models
/// are made of, for the pairs whose passes it can price; nullopt for any other pair.
/// - A LinearSoftmax pair: each model's pass profile, at this host's rates measured with the
///   threads the skinny GEMM gives that model's matrix (all cores from
///   kSkinnyGemmParallelElements elements, one below); `context` is unused (no KV cache).
/// - A Llama target read from GGUF (SmolLM2) with a Llama draft (a layer-skip draft: the
///   sublayers it runs) or a table draft (n-gram, prompt lookup: no weights, a call and the
///   sampling of its rows, on one core). A Llama pass streams the bytes its weights take in the
///   file's storage (LlamaModel::pass_weights), does two FLOPs per multiply-add at this host's
///   measured fp32 rate (all cores: the LM head splits), and reads a KV cache of `context`
///   positions per sequence (fp32 keys and values).
/// The rates are measured once per process.
std::optional<PairCostModel> pair_on_this_machine(const LanguageModel& target,
                                                  const LanguageModel& draft, int64_t context);

}  // namespace speclab
