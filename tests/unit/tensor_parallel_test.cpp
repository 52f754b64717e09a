// The planner across GPUs and for any Hugging Face model (core/plan): tensor parallelism's per-GPU
// memory and all-reduce time, the smallest tensor-parallel size that fits, the fp8 and 4-bit 70B
// presets, and config.json read as a model with every bad or missing key named. Expected figures
// are derived here by hand from the models' config.json numbers, not from the planner.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "core/base/error.hpp"
#include "core/plan/cost_model.hpp"
#include "core/plan/hardware.hpp"
#include "core/plan/plan.hpp"
#include "tests/support/experiment_fixture.hpp"

namespace speclab {
namespace {

using speclab::testing::invalid_input_message;
using ::testing::HasSubstr;

// Llama-3-70B's parameters from its config.json (hidden 8192, 80 layers, 64 heads, 8 KV heads of
// 128, intermediate 28672, vocabulary 128256, untied): per layer q and o 8192·8192 each, k and v
// 8192·1024 each, gate/up/down 8192·28672 each.
constexpr int64_t kLayer70b = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672;  // 855638016
constexpr int64_t kLinear70b = 80 * kLayer70b;                                       // 68451041280
constexpr int64_t kRest70b =
    int64_t{2} * 128256 * 8192 + 80 * 2 * 8192 + 8192;  // embeddings + LM head + norms
constexpr int64_t kParams70b = kLinear70b + kRest70b;   // 70553706496
// Llama-3-8B the same way (hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate 14336).
constexpr int64_t kParams8b = int64_t{32} * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) +
                              2 * 128256 * 4096 + 32 * 2 * 4096 + 4096;  // 8030261248
// The planner's workspace of each (2048 tokens × 2 bytes × (4·hidden + 2·intermediate) + 256 rows
// × 8 bytes × vocabulary).
constexpr double kWorkspace70b = 2048.0 * 2 * (4 * 8192 + 2 * 28672) + 256.0 * 8 * 128256;
constexpr double kWorkspace8b = 2048.0 * 2 * (4 * 4096 + 2 * 14336) + 256.0 * 8 * 128256;
constexpr double kH100Budget = 80.0 * 1073741824.0 * 0.9;  // 80 GiB at 0.9 utilisation

TEST(TensorParallel, MemoryPerGpuOfLlama70bWithAnEightBDraft) {
  const ModelSpec& target = find_llm("llama3-70b");
  const ModelSpec& draft = find_llm("llama3-8b");
  const HardwareSpec h100 = find_gpu("h100-sxm");
  ASSERT_EQ(target.layout_parameters(), kParams70b);
  // One GPU: 141.1 GB of bf16 weights alone exceed the 77.3 GB budget. Two: 70.55 + 8.03 GB of
  // weights + 1.08 GB workspace = 79.66 GB, still 2.35 GB short.
  EXPECT_THROW(plan_memory(target, draft, h100, 2048, 0.9, 1), InvalidInput);
  EXPECT_LT(kH100Budget, (2.0 * kParams70b + 2.0 * kParams8b) / 2 + kWorkspace70b + kWorkspace8b);
  EXPECT_THAT(invalid_input_message([&] { plan_memory(target, draft, h100, 2048, 0.9, 2); }),
              HasSubstr("2 GPUs h100-sxm"));
  // Four: 35.28 + 4.02 GB of weights per GPU; each GPU holds 2 of the 8 KV heads: 80 · 2 · 128 ·
  // 2 (K, V) · 2 bytes = 81920 B per token for the target, 32 · 2 · 128 · 2 · 2 = 32768 B for the
  // draft; 2048 tokens each.
  const MemoryPlan m = plan_memory(target, draft, h100, 2048, 0.9, 4);
  EXPECT_EQ(m.tensor_parallel, 4);
  EXPECT_DOUBLE_EQ(m.target_weight_bytes, 2.0 * kParams70b / 4);
  EXPECT_DOUBLE_EQ(m.draft_weight_bytes, 2.0 * kParams8b / 4);
  EXPECT_EQ(m.target_kv_bytes_per_token, 81920);
  EXPECT_EQ(m.draft_kv_bytes_per_token, 32768);
  const double kv_budget =
      kH100Budget - (2.0 * kParams70b + 2.0 * kParams8b) / 4 - kWorkspace70b - kWorkspace8b;
  EXPECT_NEAR(m.kv_budget_with_draft, kv_budget, 1.0);
  EXPECT_EQ(m.max_sequences_with_draft, 157);  // ⌊36.94 GB / (114688 B × 2048)⌋ = ⌊157.26⌋
  EXPECT_EQ(smallest_fitting_tensor_parallel(target, draft, h100, 2048, 0.9), 4);
}

TEST(TensorParallel, KvHeadsSplitOrReplicateAndBadSizesAreRefused) {
  const ModelSpec& target = find_llm("llama3-70b");
  // 8 KV heads: 8 GPUs hold one each, 16 GPUs still one each (replicated).
  EXPECT_EQ(kv_bytes_per_token_per_gpu(target, 1), 80 * 8 * 128 * 2 * 2);
  EXPECT_EQ(kv_bytes_per_token_per_gpu(target, 8), 80 * 1 * 128 * 2 * 2);
  EXPECT_EQ(kv_bytes_per_token_per_gpu(target, 16), 80 * 1 * 128 * 2 * 2);
  EXPECT_THAT(invalid_input_message([&] { check_tensor_parallel(target, 3); }),
              HasSubstr("--tensor-parallel-size 3: llama3-70b cannot be split over 3 GPUs: it has "
                        "64 attention heads and 8 KV heads"));
  EXPECT_THAT(invalid_input_message([&] { check_tensor_parallel(target, 0); }),
              HasSubstr("--tensor-parallel-size 0"));
  EXPECT_THROW(check_tensor_parallel(target, 128), InvalidInput);  // 64 heads
}

TEST(TensorParallel, EachPassPaysTwoRingAllReducesPerLayer) {
  const ModelSpec& target = find_llm("llama3-70b");
  const HardwareSpec h100 = find_gpu("h100-sxm");
  const PassProfile one = pass_profile(target, 1);
  const PassProfile four = pass_profile(target, 4);
  EXPECT_EQ(one.allreduce_bytes_per_token, 0.0);
  // Per token and layer two all-reduces of 8192 bf16 values; a ring sends 2(n−1)/n of each:
  // 2 · 80 · (6/4) · 8192 · 2 B = 3932160 B per GPU.
  EXPECT_DOUBLE_EQ(four.allreduce_bytes_per_token, 3932160.0);
  EXPECT_DOUBLE_EQ(four.weight_bytes_read, one.weight_bytes_read / 4);
  EXPECT_DOUBLE_EQ(four.flops_per_token, one.flops_per_token / 4);
  const RooflineRates rates = roofline_rates(h100, target.dtype);
  EXPECT_DOUBLE_EQ(rates.interconnect_bytes_per_second, 450e9);  // NVLink 4: 900 GB/s both ways
  // Batch 8, γ+1 = 5 tokens, context 1024: 40 rows of all-reduces at 450 GB/s, after the roofline.
  const PassTime t = forward_time(four, rates, 8, 5, 1024);
  EXPECT_DOUBLE_EQ(t.allreduce_seconds, 40 * 3932160.0 / 450e9);
  EXPECT_DOUBLE_EQ(t.seconds, std::max(t.memory_seconds, t.compute_seconds) + t.allreduce_seconds +
                                  rates.launch_overhead_seconds);
  // Memory: the weights read ÷ 4 (139.0 GB of linears, LM head and norms at 2 bytes) + 8 · 1024 ·
  // 81920 B of KV + fp32 logits in and out.
  const double weights_read = 2.0 * (kLinear70b + 128256.0 * 8192 + 80 * 2 * 8192 + 8192);
  EXPECT_DOUBLE_EQ(t.bytes, weights_read / 4 + 8.0 * 1024 * 81920 + 8.0 * 40 * 128256);
  // PCIe 4.0 x16 at 32 GB/s: the same all-reduces take 450/32 times as long.
  const PassTime pcie =
      forward_time(four, roofline_rates(find_gpu("l40s"), target.dtype), 8, 5, 1024);
  EXPECT_DOUBLE_EQ(pcie.allreduce_seconds, 40 * 3932160.0 / 32e9);
  // A host without an interconnect cannot run a split pass.
  RooflineRates host = rates;
  host.interconnect_bytes_per_second = 0.0;
  EXPECT_THAT(invalid_input_message([&] { forward_time(four, host, 1, 1, 1); }),
              HasSubstr("needs a GPU interconnect"));
}

TEST(TensorParallel, PlanNamesTheSmallestSizeThatFits) {
  PlanRequest request{.gpu = find_gpu("h100-sxm"),
                      .target = "llama3-70b",
                      .draft = "llama3-8b",
                      .alpha = 0.8,
                      .batches = {1, 8}};
  EXPECT_THAT(invalid_input_message([&] { compute_plan(request); }),
              HasSubstr("Split over 4 GPUs it fits: pass --tensor-parallel-size 4"));
  request.tensor_parallel = 4;
  const PlanResult plan = compute_plan(request);
  EXPECT_EQ(plan.memory.max_sequences_with_draft, 157);
  EXPECT_EQ(plan.model.target.tensor_parallel, 4);
  EXPECT_EQ(plan.model.draft.tensor_parallel, 4);  // the draft runs at the target's size, as vLLM
  EXPECT_GT(plan.best[0].speedup, 1.0);
  request.tensor_parallel = 3;
  EXPECT_THAT(invalid_input_message([&] { compute_plan(request); }),
              HasSubstr("--tensor-parallel-size 3"));
}

// fp8 (weights 1 byte, embeddings and LM head bf16) and AWQ int4 (0.5 + 2.5/128 bytes per weight)
// of the same layout.
TEST(TensorParallel, Fp8AndInt4PresetsOf70b) {
  const ModelSpec& fp8 = find_llm("llama3-70b-fp8");
  const ModelSpec& int4 = find_llm("llama3-70b-int4");
  EXPECT_EQ(fp8.dtype, WeightDtype::kFp8);
  EXPECT_EQ(int4.dtype, WeightDtype::kInt4);
  EXPECT_DOUBLE_EQ(fp8.weight_bytes(), 1.0 * kLinear70b + 2.0 * kRest70b);
  EXPECT_DOUBLE_EQ(int4.weight_bytes(), (0.5 + 2.5 / 128) * kLinear70b + 2.0 * kRest70b);
  const ModelSpec& draft = find_llm("llama3-8b");
  const HardwareSpec h100 = find_gpu("h100-sxm");
  // fp8: 70.55 GB + 16.06 GB of draft exceed one H100; on two, 35.3 + 8.0 GB fit.
  EXPECT_EQ(smallest_fitting_tensor_parallel(fp8, draft, h100, 2048, 0.9), 2);
  // int4: 37.7 GB + 16.06 GB + 1.08 GB of workspace leave 22.4 GB of the budget on one GPU.
  EXPECT_EQ(smallest_fitting_tensor_parallel(int4, draft, h100, 2048, 0.9), 1);
  EXPECT_NEAR(plan_memory(int4, draft, h100, 2048, 0.9).kv_budget_with_draft,
              kH100Budget - (0.5 + 2.5 / 128) * kLinear70b - 2.0 * kRest70b - 2.0 * kParams8b -
                  kWorkspace70b - kWorkspace8b,
              1.0);
}

// Meta-Llama-3-70B's config.json as published (trimmed of nothing that the planner reads).
constexpr const char* kLlama70bConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": 128001,
  "hidden_act": "silu",
  "hidden_size": 8192,
  "initializer_range": 0.02,
  "intermediate_size": 28672,
  "max_position_embeddings": 8192,
  "model_type": "llama",
  "num_attention_heads": 64,
  "num_hidden_layers": 80,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
)";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(HfConfig, Llama70bConfigIsTheLlama70bPreset) {
  const ModelSpec m = model_from_hf_config(kLlama70bConfig, "config.json");
  const ModelSpec& preset = find_llm("llama3-70b");
  EXPECT_EQ(m.layers, preset.layers);
  EXPECT_EQ(m.hidden, preset.hidden);
  EXPECT_EQ(m.intermediate, preset.intermediate);
  EXPECT_EQ(m.heads, preset.heads);
  EXPECT_EQ(m.kv_heads, preset.kv_heads);
  EXPECT_EQ(m.head_dim, 128);  // 8192 / 64, no head_dim key
  EXPECT_EQ(m.vocab, 128256);
  EXPECT_FALSE(m.tied_embeddings);
  EXPECT_EQ(m.dtype, WeightDtype::kBf16);
  EXPECT_EQ(m.kv_dtype, WeightDtype::kBf16);
  EXPECT_EQ(m.parameters, static_cast<double>(kParams70b));
  EXPECT_DOUBLE_EQ(m.weight_bytes(), 2.0 * kParams70b);
  // tie_word_embeddings absent: Transformers' default, untied (two embedding matrices).
  const std::string untied = replaced(kLlama70bConfig, "\"tie_word_embeddings\": false,", "");
  EXPECT_FALSE(model_from_hf_config(untied, "config.json").tied_embeddings);
  // A head_dim key wins over hidden_size / num_attention_heads (Llama 3.2 1B: 2048 / 32 = 64 too,
  // so here an explicit 96 for 64 heads).
  const std::string head_dim =
      replaced(kLlama70bConfig, "\"hidden_act\"", "\"head_dim\": 96, \"hidden_act\"");
  EXPECT_EQ(model_from_hf_config(head_dim, "config.json").head_dim, 96);
}

TEST(HfConfig, QuantizationConfigSetsTheWeightDtype) {
  const std::string awq = replaced(
      replaced(kLlama70bConfig, "\"pretraining_tp\": 1,",
               "\"pretraining_tp\": 1, \"quantization_config\": {\"bits\": 4, \"group_size\": 128, "
               "\"quant_method\": \"awq\", \"version\": \"gemm\", \"zero_point\": true},"),
      "\"bfloat16\"", "\"float16\"");
  const ModelSpec m4 = model_from_hf_config(awq, "awq.json");
  EXPECT_EQ(m4.dtype, WeightDtype::kInt4);
  EXPECT_EQ(m4.group_size, 128);
  EXPECT_EQ(m4.kv_dtype, WeightDtype::kFp16);
  EXPECT_DOUBLE_EQ(m4.weight_bytes(), find_llm("llama3-70b-int4").weight_bytes());
  const std::string fp8 =
      replaced(kLlama70bConfig, "\"pretraining_tp\": 1,",
               "\"quantization_config\": {\"activation_scheme\": \"static\", "
               "\"ignored_layers\": [\"lm_head\"], \"quant_method\": \"fp8\"},");
  EXPECT_DOUBLE_EQ(model_from_hf_config(fp8, "fp8.json").weight_bytes(),
                   find_llm("llama3-70b-fp8").weight_bytes());
  const std::string bits3 = replaced(awq, "\"bits\": 4", "\"bits\": 3");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(bits3, "q.json"); }),
              HasSubstr("q.json: quantization_config.bits is 3; expected 4 or 8"));
  const std::string bnb = replaced(awq, "\"awq\"", "\"bitsandbytes\"");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(bnb, "q.json"); }),
              HasSubstr("quantization_config.quant_method is \"bitsandbytes\""));
}

TEST(HfConfig, EveryMissingOrBadKeyIsNamed) {
  for (const char* key : {"hidden_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "intermediate_size", "vocab_size"}) {
    // The key renamed: missing.
    const std::string missing =
        replaced(kLlama70bConfig, std::string("\"") + key + "\"", std::string("\"x_") + key + "\"");
    EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(missing, "c.json"); }),
                HasSubstr(std::string("c.json: ") + key + " is missing"))
        << key;
  }
  const std::string no_dtype = replaced(kLlama70bConfig, "\"torch_dtype\"", "\"dtype_x\"");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(no_dtype, "c.json"); }),
              HasSubstr("torch_dtype is missing"));
  const std::string text_number = replaced(kLlama70bConfig, "8192,", "\"8192\",");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(text_number, "c.json"); }),
              HasSubstr("hidden_size is \"8192\"; expected a positive integer"));
  const std::string fraction = replaced(kLlama70bConfig, "28672", "28672.5");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(fraction, "c.json"); }),
              HasSubstr("intermediate_size is 28672.5"));
  const std::string zero =
      replaced(kLlama70bConfig, "\"num_hidden_layers\": 80", "\"num_hidden_layers\": 0");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(zero, "c.json"); }),
              HasSubstr("num_hidden_layers is 0"));
  const std::string fp64 = replaced(kLlama70bConfig, "\"bfloat16\"", "\"float64\"");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(fp64, "c.json"); }),
              HasSubstr("torch_dtype is \"float64\"; expected float32, float16 or bfloat16"));
  const std::string kv7 =
      replaced(kLlama70bConfig, "\"num_key_value_heads\": 8", "\"num_key_value_heads\": 7");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(kv7, "c.json"); }),
              HasSubstr("num_key_value_heads is 7"));
  const std::string tied =
      replaced(kLlama70bConfig, "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": 0");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(tied, "c.json"); }),
              HasSubstr("tie_word_embeddings is 0; expected true or false"));
  // JSON syntax: the line and column of the fault.
  const std::string broken =
      replaced(kLlama70bConfig, "\"hidden_act\": \"silu\",", "\"hidden_act\": silu,");
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config(broken, "c.json"); }),
              HasSubstr("c.json:7:17: expected a JSON value"));
  EXPECT_THAT(invalid_input_message([&] { model_from_hf_config("[1, 2]", "c.json"); }),
              HasSubstr("c.json:1:1: expected a JSON object"));
  EXPECT_THAT(invalid_input_message([&] { read_hf_config("/nonexistent/config.json"); }),
              HasSubstr("--target-config /nonexistent/config.json: cannot open the file"));
}

}  // namespace
}  // namespace speclab
