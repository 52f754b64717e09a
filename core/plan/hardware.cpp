// Hardware and model presets (see hardware.hpp; sources in data/hardware.toml and
// data/llm_models.toml).
#include "core/plan/hardware.hpp"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "core/base/error.hpp"

namespace speclab {
namespace {

constexpr std::array<std::pair<WeightDtype, std::string_view>, 6> kDtypeNames{{
    {WeightDtype::kFp32, "fp32"},
    {WeightDtype::kFp16, "fp16"},
    {WeightDtype::kBf16, "bf16"},
    {WeightDtype::kFp8, "fp8"},
    {WeightDtype::kInt8, "int8"},
    {WeightDtype::kInt4, "int4"},
}};

// Bytes of the parts that stay unquantised (embeddings, LM head, norms): 16-bit, or 32 for an
// fp32 model.
double unquantised_bytes(WeightDtype dtype) { return dtype == WeightDtype::kFp32 ? 4.0 : 2.0; }

double element_bytes(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kFp32:
      return 4.0;
    case WeightDtype::kFp16:
    case WeightDtype::kBf16:
      return 2.0;
    case WeightDtype::kFp8:
    case WeightDtype::kInt8:
      return 1.0;
    case WeightDtype::kInt4:
      return 0.5;
  }
  return 0.0;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

std::string_view weight_dtype_name(WeightDtype dtype) {
  for (const auto& [d, name] : kDtypeNames) {
    if (d == dtype) return name;
  }
  return "?";
}

WeightDtype parse_weight_dtype(std::string_view name) {
  for (const auto& [d, n] : kDtypeNames) {
    if (n == name) return d;
  }
  throw InvalidInput(fmt::format(
      "unknown weight dtype '{}'; expected one of fp32, fp16, bf16, fp8, int8, int4", name));
}

double HardwareSpec::flops_per_second(WeightDtype dtype) const {
  if (dtype == WeightDtype::kFp32) return fp32_tflops * 1e12;
  if (dtype == WeightDtype::kFp8 && fp8_tflops > 0.0) return fp8_tflops * 1e12;
  return (fp16_tflops > 0.0 ? fp16_tflops : fp32_tflops) * 1e12;
}

// ---- model layout -------------------------------------------------------------------------------

double bytes_per_weight(WeightDtype dtype, int64_t group_size) {
  if (dtype != WeightDtype::kInt4) return element_bytes(dtype);
  if (group_size < 1) {
    throw InvalidInput(fmt::format("int4 weights need a GPTQ group_size ≥ 1 (got {})", group_size));
  }
  // Per group: one fp16 scale (2 bytes) and one packed 4-bit zero point (0.5 bytes).
  return 0.5 + 2.5 / static_cast<double>(group_size);
}

int64_t ModelSpec::block_linear_parameters() const {
  const int64_t q = hidden * heads * head_dim, kv = 2 * hidden * kv_heads * head_dim;
  const int64_t o = heads * head_dim * hidden, mlp = 3 * hidden * intermediate;
  return q + kv + o + mlp;
}

int64_t ModelSpec::layout_parameters() const {
  const int64_t embedding = vocab * hidden;
  const int64_t norms = layers * 2 * hidden + hidden;
  return embedding * (tied_embeddings ? 1 : 2) + layers * block_linear_parameters() + norms;
}

double ModelSpec::weight_bytes() const {
  const double linear = static_cast<double>(layers * block_linear_parameters());
  const double rest = static_cast<double>(layout_parameters()) - linear;
  return linear * bytes_per_weight(dtype, group_size) + rest * unquantised_bytes(dtype);
}

double ModelSpec::weight_bytes_read() const {
  const double linear = static_cast<double>(layers * block_linear_parameters());
  const double head = static_cast<double>(vocab * hidden);  // the LM head, tied or not
  const double norms = static_cast<double>(layers * 2 * hidden + hidden);
  return linear * bytes_per_weight(dtype, group_size) + (head + norms) * unquantised_bytes(dtype);
}

double ModelSpec::flops_per_token() const {
  return 2.0 * static_cast<double>(layers * block_linear_parameters() + vocab * hidden);
}

double ModelSpec::attention_flops_per_context_token() const {
  return 4.0 * static_cast<double>(layers * heads * head_dim);
}

int64_t ModelSpec::kv_bytes_per_token() const {
  return layers * kv_heads * head_dim * 2 * static_cast<int64_t>(element_bytes(kv_dtype));
}

double ModelSpec::workspace_bytes(int64_t tokens, int64_t logit_rows) const {
  // Per token and layer the live buffers are the residual stream, the normed input, q/k/v/o
  // (≈ 4·hidden) and the gate and up projections (2·intermediate), reused from layer to layer.
  const double per_token =
      unquantised_bytes(dtype) * static_cast<double>(4 * hidden + 2 * intermediate);
  const double logits = 2.0 * 4.0 * static_cast<double>(vocab);  // fp32 logits + probabilities
  return static_cast<double>(tokens) * per_token + static_cast<double>(logit_rows) * logits;
}

// ---- built-in presets (mirror of data/*.toml) ---------------------------------------------------

std::span<const HardwareSpec> gpu_presets() {
  static const std::vector<HardwareSpec> presets = [] {
    auto gpu = [](std::string name, std::string description, double memory, double bandwidth,
                  double fp16, double fp16_acc16, double fp8, double int8, double fp32,
                  std::string interconnect, double interconnect_gbps) {
      return HardwareSpec{.name = std::move(name),
                          .description = std::move(description),
                          .memory_gib = memory,
                          .bandwidth_gbps = bandwidth,
                          .fp16_tflops = fp16,
                          .fp16_acc16_tflops = fp16_acc16,
                          .fp8_tflops = fp8,
                          .int8_tops = int8,
                          .fp32_tflops = fp32,
                          .interconnect = std::move(interconnect),
                          .interconnect_gbps = interconnect_gbps,
                          .seconds_per_logit = 0.0,
                          .launch_overhead_seconds = kGpuLaunchOverheadSeconds};
    };
    return std::vector<HardwareSpec>{
        gpu("rtx3090", "NVIDIA GeForce RTX 3090", 24, 936, 71, 142, 0, 284, 35.6, "PCIe 4.0 x16",
            32),
        gpu("rtx4090", "NVIDIA GeForce RTX 4090", 24, 1008, 165.2, 330.3, 330.3, 660.6, 82.6,
            "PCIe 4.0 x16", 32),
        gpu("a100-80gb", "NVIDIA A100 80GB SXM", 80, 2039, 312, 312, 0, 624, 19.5, "NVLink 3", 300),
        gpu("h100-sxm", "NVIDIA H100 SXM5 80GB", 80, 3350, 989.5, 989.5, 1979, 1979, 67, "NVLink 4",
            450),
        gpu("h200", "NVIDIA H200 SXM 141GB", 141, 4800, 989.5, 989.5, 1979, 1979, 67, "NVLink 4",
            450),
        gpu("l40s", "NVIDIA L40S", 48, 864, 362.05, 362.05, 733, 733, 91.6, "PCIe 4.0 x16", 32),
    };
  }();
  return presets;
}

std::span<const ModelSpec> llm_presets() {
  static const std::vector<ModelSpec> presets = [] {
    auto llm = [](std::string name, std::string description, int64_t layers, int64_t hidden,
                  int64_t intermediate, int64_t heads, int64_t kv_heads, int64_t head_dim,
                  int64_t vocab, bool tied, double parameters, WeightDtype dtype,
                  int64_t group_size, WeightDtype kv_dtype) {
      return ModelSpec{.name = std::move(name),
                       .description = std::move(description),
                       .layers = layers,
                       .hidden = hidden,
                       .intermediate = intermediate,
                       .heads = heads,
                       .kv_heads = kv_heads,
                       .head_dim = head_dim,
                       .vocab = vocab,
                       .tied_embeddings = tied,
                       .parameters = parameters,
                       .dtype = dtype,
                       .group_size = group_size,
                       .kv_dtype = kv_dtype};
    };
    using enum WeightDtype;
    return std::vector<ModelSpec>{
        llm("llama3-8b", "meta-llama/Meta-Llama-3-8B", 32, 4096, 14336, 32, 8, 128, 128256, false,
            8.03e9, kBf16, 0, kBf16),
        llm("llama3.2-1b", "meta-llama/Llama-3.2-1B", 16, 2048, 8192, 32, 8, 64, 128256, true,
            1.24e9, kBf16, 0, kBf16),
        llm("llama3-70b", "meta-llama/Meta-Llama-3-70B", 80, 8192, 28672, 64, 8, 128, 128256, false,
            70.6e9, kBf16, 0, kBf16),
        llm("llama3-70b-fp8", "RedHatAI/Meta-Llama-3-70B-Instruct-FP8", 80, 8192, 28672, 64, 8, 128,
            128256, false, 70.6e9, kFp8, 0, kBf16),
        llm("llama3-70b-int4", "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", 80, 8192,
            28672, 64, 8, 128, 128256, false, 70.6e9, kInt4, 128, kFp16),
        llm("mistral-7b", "mistralai/Mistral-7B-v0.1", 32, 4096, 14336, 32, 8, 128, 32000, false,
            7.24e9, kBf16, 0, kBf16),
        llm("llama2-13b-gptq", "TheBloke/Llama-2-13B-GPTQ (main branch: 4-bit, group size 128)", 40,
            5120, 13824, 40, 40, 128, 32000, false, 13.0e9, kInt4, 128, kFp16),
    };
  }();
  return presets;
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> names;
  for (const auto& g : gpu_presets()) names.push_back(g.name);
  names.emplace_back(kThisMachine);
  return names;
}

std::vector<std::string> llm_preset_names() {
  std::vector<std::string> names;
  for (const auto& m : llm_presets()) names.push_back(m.name);
  return names;
}

HardwareSpec find_gpu(std::string_view name) {
  const std::string key = lower(name);
  if (key == kThisMachine) {
    throw Error(
        fmt::format("\"{}\" is measured, not a preset: use find_hardware "
                    "(core/probe/this_machine.hpp)",
                    kThisMachine));
  }
  for (const auto& g : gpu_presets()) {
    if (g.name == key) return g;
  }
  throw InvalidInput(
      fmt::format("unknown GPU preset '{}'; known: {}", name, join(gpu_preset_names())));
}

const ModelSpec& find_llm(std::string_view name) {
  const std::string key = lower(name);
  for (const auto& m : llm_presets()) {
    if (m.name == key) return m;
  }
  throw InvalidInput(
      fmt::format("unknown model preset '{}'; known: {}", name, join(llm_preset_names())));
}

// ---- data files ---------------------------------------------------------------------------------

namespace {

std::string where(std::string_view source, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

const toml::table& parse_section(const toml::table& root, std::string_view section,
                                 std::string_view source) {
  const toml::table* t = root[section].as_table();
  if (t == nullptr) {
    throw InvalidInput(fmt::format("{}: no [{}] table", source, section));
  }
  return *t;
}

template <class T>
T field(const toml::table& table, std::string_view key, std::string_view source,
        std::string_view context, std::optional<T> fallback = std::nullopt) {
  const toml::node* node = table.get(key);
  if (node == nullptr) {
    if (fallback) return *fallback;
    throw InvalidInput(
        fmt::format("{}: {} has no '{}'", where(source, table.source()), context, key));
  }
  if constexpr (std::is_same_v<T, double>) {
    if (auto v = node->value<double>()) return *v;  // integers widen
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (auto v = node->as_integer()) return v->get();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (auto v = node->as_boolean()) return v->get();
  } else {
    if (auto v = node->as_string()) return v->get();
  }
  throw InvalidInput(fmt::format("{}: {} key '{}' has the wrong type",
                                 where(source, node->source()), context, key));
}

toml::table parse_text(std::string_view text, std::string_view source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InvalidInput(fmt::format("{}: {}", where(source, e.source()), e.description()));
  }
}

}  // namespace

std::vector<HardwareSpec> gpu_presets_from_toml(std::string_view text, std::string_view source) {
  const toml::table root = parse_text(text, source);
  std::vector<HardwareSpec> out;
  for (const auto& [key, node] : parse_section(root, "gpus", source)) {
    const toml::table* t = node.as_table();
    const std::string context = fmt::format("[gpus.{}]", key.str());
    if (t == nullptr) throw InvalidInput(fmt::format("{}: {} is not a table", source, context));
    out.push_back({.name = std::string(key.str()),
                   .description = field<std::string>(*t, "description", source, context),
                   .memory_gib = field<double>(*t, "memory_gib", source, context),
                   .bandwidth_gbps = field<double>(*t, "bandwidth_gbps", source, context),
                   .fp16_tflops = field<double>(*t, "fp16_tflops", source, context),
                   .fp16_acc16_tflops = field<double>(*t, "fp16_acc16_tflops", source, context),
                   .fp8_tflops = field<double>(*t, "fp8_tflops", source, context),
                   .int8_tops = field<double>(*t, "int8_tops", source, context),
                   .fp32_tflops = field<double>(*t, "fp32_tflops", source, context),
                   .interconnect = field<std::string>(*t, "interconnect", source, context),
                   .interconnect_gbps = field<double>(*t, "interconnect_gbps", source, context),
                   .seconds_per_logit = 0.0,
                   .launch_overhead_seconds = kGpuLaunchOverheadSeconds});
  }
  return out;
}

std::vector<ModelSpec> llm_presets_from_toml(std::string_view text, std::string_view source) {
  const toml::table root = parse_text(text, source);
  std::vector<ModelSpec> out;
  for (const auto& [key, node] : parse_section(root, "models", source)) {
    const toml::table* t = node.as_table();
    const std::string context = fmt::format("[models.{}]", key.str());
    if (t == nullptr) throw InvalidInput(fmt::format("{}: {} is not a table", source, context));
    auto integer = [&](std::string_view k) { return field<int64_t>(*t, k, source, context); };
    const int64_t hidden = integer("hidden"), heads = integer("heads");
    out.push_back({
        .name = std::string(key.str()),
        .description = field<std::string>(*t, "description", source, context),
        .layers = integer("layers"),
        .hidden = hidden,
        .intermediate = integer("intermediate"),
        .heads = heads,
        .kv_heads = integer("kv_heads"),
        .head_dim = field<int64_t>(*t, "head_dim", source, context, heads ? hidden / heads : 0),
        .vocab = integer("vocab"),
        .tied_embeddings = field<bool>(*t, "tied_embeddings", source, context),
        .parameters = field<double>(*t, "parameters", source, context),
        .dtype = parse_weight_dtype(field<std::string>(*t, "dtype", source, context)),
        .group_size = field<int64_t>(*t, "group_size", source, context, int64_t{0}),
        .kv_dtype = parse_weight_dtype(
            field<std::string>(*t, "kv_dtype", source, context, std::string("fp16"))),
    });
  }
  return out;
}

}  // namespace speclab
