// Hardware and model presets of the cost and memory planner (docs/architecture.md "core/plan"):
// GPUs from vendor datasheets (data/hardware.toml), transformer LLMs from their Hugging Face
// config.json (data/llm_models.toml), and `this-machine`, whose bandwidth and FLOP rate are
// measured when it is asked for.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

/// Storage type of a model's weights (and of the arithmetic the planner assumes for it).
enum class WeightDtype { kFp32, kFp16, kBf16, kFp8, kInt8, kInt4 };

/// "fp16", "int4", ...; parse_weight_dtype throws InvalidInput listing the known names.
std::string_view weight_dtype_name(WeightDtype dtype);
WeightDtype parse_weight_dtype(std::string_view name);

/// One accelerator (or this machine). Rates are peaks; the planner uses them as its roofline.
struct HardwareSpec {
  std::string name;                ///< preset name as typed on the command line: "rtx3090"
  std::string description;         ///< "NVIDIA GeForce RTX 3090"
  double memory_gib = 0.0;         ///< device memory, GiB (2^30 bytes)
  double bandwidth_gbps = 0.0;     ///< peak DRAM read bandwidth, 1e9 bytes/s
  double fp16_tflops = 0.0;        ///< dense fp16/bf16 tensor rate, fp32 accumulate (0: none)
  double fp16_acc16_tflops = 0.0;  ///< dense fp16 tensor rate with fp16 accumulate (reference only)
  double fp8_tflops = 0.0;         ///< dense fp8 tensor rate (0: no fp8 units)
  double int8_tops = 0.0;          ///< dense int8 tensor rate
  double fp32_tflops = 0.0;        ///< fp32 rate (non-tensor; this-machine: measured FMA rate)
  /// The GPU-to-GPU link tensor parallelism all-reduces over ("NVLink 4", "PCIe 4.0 x16"; empty:
  /// none, e.g. this-machine) and its bandwidth per direction, 1e9 bytes/s.
  std::string interconnect;
  double interconnect_gbps = 0.0;
  /// Time the sampling pipeline spends per logit (softmax over V, per scored row). 0 for GPUs:
  /// there it is part of the roofline's bytes. this-machine measures it (one thread, as the
  /// decode engine runs it).
  double seconds_per_logit = 0.0;
  /// Fixed cost of one forward pass (kernel launches, framework). GPUs: the planner's
  /// assumption kGpuLaunchOverheadSeconds; this-machine: measured.
  double launch_overhead_seconds = 0.0;
  /// Whether memory traffic and arithmetic proceed at the same time, so that a pass costs
  /// max(memory, compute) (a GPU: DMA and tensor pipes run concurrently). On this-machine the
  /// same two cores issue the loads and the FMAs, so the two add (the LinearSoftmax
  /// timings of bench/micro/linear_softmax_bench.cpp: T(m) grows by one column's FLOPs per column
  /// from m = 1).
  bool overlapped = true;
  bool measured = false;  ///< true for this-machine

  double memory_bytes() const { return memory_gib * 1073741824.0; }
  double bandwidth_bytes_per_second() const { return bandwidth_gbps * 1e9; }
  /// FLOP/s for arithmetic in `dtype`: fp8 uses fp8 units where present; int8/int4 weights are
  /// dequantised to fp16 (weight-only quantisation, as GPTQ and W8A16 kernels do); a device with
  /// no fp16 units (a CPU) computes in fp32.
  double flops_per_second(WeightDtype dtype) const;
};

/// Launch overhead the planner assumes for one forward pass on a GPU preset: an assumption (a
/// decode step replayed as a CUDA graph), not a datasheet number; `speclab plan --overhead-us`.
inline constexpr double kGpuLaunchOverheadSeconds = 20e-6;

/// A decoder-only transformer (Llama layout: GQA attention, gated MLP, RMSNorm, no biases).
struct ModelSpec {
  std::string name;              ///< preset name: "llama3-8b"
  std::string description;       ///< "meta-llama/Meta-Llama-3-8B"
  int64_t layers = 0;            ///< num_hidden_layers
  int64_t hidden = 0;            ///< hidden_size
  int64_t intermediate = 0;      ///< intermediate_size
  int64_t heads = 0;             ///< num_attention_heads
  int64_t kv_heads = 0;          ///< num_key_value_heads
  int64_t head_dim = 0;          ///< head_dim (hidden / heads where config.json omits it)
  int64_t vocab = 0;             ///< vocab_size
  bool tied_embeddings = false;  ///< tie_word_embeddings: the LM head is the embedding matrix
  double parameters = 0.0;       ///< the published parameter count (checked against the layout)
  WeightDtype dtype = WeightDtype::kBf16;
  int64_t group_size = 0;  ///< int4: GPTQ quantisation group (one fp16 scale and 4-bit zero each)
  WeightDtype kv_dtype = WeightDtype::kFp16;

  /// Parameters of the quantisable linear layers of one block: q, k, v, o and gate, up, down.
  int64_t block_linear_parameters() const;
  /// Every parameter from the layout: embeddings, blocks, norms, LM head unless tied.
  int64_t layout_parameters() const;
  /// Bytes of the weights as stored: block linears at `dtype` (int4 with group scales and
  /// zeros), embeddings, LM head and norms at 16 bits (fp32 models: 32).
  double weight_bytes() const;
  /// Weight bytes one forward pass streams: everything but the embedding table (only b rows of
  /// it are gathered), which is read in full when it doubles as the LM head.
  double weight_bytes_read() const;
  /// Matmul FLOPs per scored token: 2 × (block linears + LM head).
  double flops_per_token() const;
  /// Attention FLOPs per scored token and context token: QKᵀ and AV, 4 × layers × heads × head_dim.
  double attention_flops_per_context_token() const;
  /// KV-cache bytes per token of one sequence: layers × kv_heads × head_dim × 2 (K and V) × bytes.
  int64_t kv_bytes_per_token() const;
  /// Activation workspace of a pass over `tokens` tokens (hidden states, q/k/v/o, MLP buffers)
  /// plus fp32 logits and probabilities for `logit_rows` rows.
  double workspace_bytes(int64_t tokens, int64_t logit_rows) const;
};

/// Reads a Hugging Face config.json (its text; `source` names it in messages) as a ModelSpec of
/// the Llama layout: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
/// intermediate_size, vocab_size and torch_dtype are required, head_dim (default hidden /
/// heads) and tie_word_embeddings (default false) optional; a quantization_config with
/// quant_method fp8, or bits 4 / 8 and group_size (gptq, awq), sets the weights' dtype. The
/// parameter count is the layout's. Throws InvalidInput naming the key and what was expected, or
/// the line and column of a JSON syntax error.
ModelSpec model_from_hf_config(std::string_view json, std::string_view source);
/// model_from_hf_config of a file; a missing or unreadable file is InvalidInput.
ModelSpec read_hf_config(const std::string& path);

/// Bytes per weight of the block linears, scales included (int4: 0.5 + 2.5 / group_size).
double bytes_per_weight(WeightDtype dtype, int64_t group_size);

/// Built-in presets, mirrored by data/hardware.toml and data/llm_models.toml (a unit test checks
/// that they agree).
std::span<const HardwareSpec> gpu_presets();
std::span<const ModelSpec> llm_presets();

/// Preset names as accepted on the command line (GPUs include "this-machine").
std::vector<std::string> gpu_preset_names();
std::vector<std::string> llm_preset_names();

/// The name of the host measured as a "GPU" (core/probe/this_machine.hpp's find_hardware).
inline constexpr std::string_view kThisMachine = "this-machine";

/// Lower-case lookup of a preset. Unknown names throw InvalidInput listing the known ones;
/// kThisMachine is measured, not looked up (find_hardware in core/probe/this_machine.hpp).
HardwareSpec find_gpu(std::string_view name);
const ModelSpec& find_llm(std::string_view name);

/// Parse the data files' layout ([gpus.NAME] / [models.NAME] tables). Throws InvalidInput with
/// `source:line:column` for a syntax error or naming the table and key.
std::vector<HardwareSpec> gpu_presets_from_toml(std::string_view text, std::string_view source);
std::vector<ModelSpec> llm_presets_from_toml(std::string_view text, std::string_view source);

}  // namespace speclab
