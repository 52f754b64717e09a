// Small LLaMA-architecture GGUF files with random weights, written byte by byte, so LlamaModel
// (which loads only from a file) can be checked against the Eigen reference
// (tests/support/eigen_reference.hpp) at odd shapes without the real model file. Layout: GGUF v3
// (github.com/ggml-org/ggml docs/gguf.md), alignment 32, the tensors and metadata keys that
// LlamaModel reads for general.architecture = "llama".
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/io/gguf.hpp"
#include "tests/support/test_rng.hpp"

namespace speclab::testing {

/// The shape and weight types of a random LLaMA. Types of the 2-D tensors: F32, F16, Q8_0 or
/// Q4_1 (the block types need row lengths that are multiples of 32: n_embd, and n_ff for
/// ffn_down). Norm weights are always F32, as in llama.cpp's files.
struct RandomLlamaSpec {
  int64_t n_layer = 2;
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t n_head_kv = 2;
  int64_t n_ff = 96;
  int64_t vocab = 100;
  int64_t context_length = 64;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  GgmlType embd_type = GgmlType::kF32;  ///< token_embd and output
  GgmlType attn_type = GgmlType::kF32;  ///< attn_q, attn_k, attn_v, attn_output
  GgmlType ffn_type = GgmlType::kF32;   ///< ffn_gate, ffn_up, ffn_down
  bool tied_output = false;             ///< no output.weight: the LM head is token_embd
  uint64_t seed = 1;
};

namespace random_llama_detail {

// The binary16 bits of a normal float in half's normal range, significand truncated (any half
// will do: the readers decode the bits).
inline uint16_t half_bits(float f) {
  const auto bits = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  if (exponent < 1) return static_cast<uint16_t>(sign | 0x0400);  // the smallest normal
  return static_cast<uint16_t>(sign | exponent << 10 | ((bits >> 13) & 0x3ff));
}

struct Tensor {
  std::string name;
  std::vector<uint64_t> shape;  // innermost (row length) first
  GgmlType type;
  std::vector<std::byte> data;
};

template <class V>
void put(std::vector<std::byte>& out, V v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
inline void put_string(std::vector<std::byte>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  for (char c : s) out.push_back(static_cast<std::byte>(c));
}

// rows × depth weights of `type`, each row with values of about ±scale: F32/F16 uniform on
// [−scale, scale); Q8_0 blocks d ≈ scale/127 with q uniform on [−127, 127]; Q4_1 blocks
// d ≈ 2·scale/15, m ≈ −scale with q uniform on [0, 15]. Scales vary by ±50% between blocks.
inline std::vector<std::byte> random_matrix(GgmlType type, int64_t rows, int64_t depth, float scale,
                                            testing::TestRng& rng) {
  std::vector<std::byte> out;
  for (int64_t i = 0; i < rows; ++i) {
    if (type == GgmlType::kF32 || type == GgmlType::kF16) {
      for (int64_t k = 0; k < depth; ++k) {
        const float v = rng.uniform(-scale, scale);
        if (type == GgmlType::kF32) {
          put(out, v);
        } else {
          put(out, half_bits(v));
        }
      }
      continue;
    }
    for (int64_t b = 0; b < depth / 32; ++b) {
      if (type == GgmlType::kQ8_0) {
        put(out, half_bits(scale / 127.0f * rng.uniform(0.5f, 1.5f)));
        for (int j = 0; j < 32; ++j) {
          put(out, static_cast<int8_t>(static_cast<int>(rng.next() % 255) - 127));
        }
      } else {
        put(out, half_bits(2.0f * scale / 15.0f * rng.uniform(0.5f, 1.5f)));
        put(out, half_bits(-scale * rng.uniform(0.5f, 1.5f)));
        for (int j = 0; j < 16; ++j) put(out, static_cast<uint8_t>(rng.next() & 0xff));
      }
    }
  }
  return out;
}

}  // namespace random_llama_detail

/// Writes a LLaMA GGUF with random weights of `spec` to `path`. Matrices of depth k have entries
/// of about ±√(3/k) (unit variance out for unit variance in), embeddings ±1, norm weights in
/// [0.5, 1.5), so activations stay O(1) through the layers and the attention is far from
/// uniform.
inline void write_random_llama(const std::filesystem::path& path, const RandomLlamaSpec& spec) {
  using namespace random_llama_detail;
  testing::TestRng rng{spec.seed * 0x9e3779b97f4a7c15ULL + 7};
  const int64_t d = spec.n_embd, kv = spec.n_head_kv * (spec.n_embd / spec.n_head);
  std::vector<Tensor> tensors;
  auto matrix = [&](std::string name, GgmlType type, int64_t rows, int64_t depth, float scale) {
    tensors.push_back({std::move(name),
                       {static_cast<uint64_t>(depth), static_cast<uint64_t>(rows)},
                       type,
                       random_matrix(type, rows, depth, scale, rng)});
  };
  auto norm = [&](std::string name) {
    Tensor t{std::move(name), {static_cast<uint64_t>(d)}, GgmlType::kF32, {}};
    for (int64_t k = 0; k < d; ++k) put(t.data, rng.uniform(0.5f, 1.5f));
    tensors.push_back(std::move(t));
  };
  auto unit = [](int64_t depth) { return std::sqrt(3.0f / static_cast<float>(depth)); };

  matrix("token_embd.weight", spec.embd_type, spec.vocab, d, 1.0f);
  if (!spec.tied_output) matrix("output.weight", spec.embd_type, spec.vocab, d, 2.0f * unit(d));
  norm("output_norm.weight");
  for (int64_t l = 0; l < spec.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    norm(p + "ffn_norm.weight");
    // Q and K twice the unit scale: scores of a few units, so the softmax is peaked but not
    // one-hot.
    matrix(p + "attn_q.weight", spec.attn_type, d, d, 2.0f * unit(d));
    matrix(p + "attn_k.weight", spec.attn_type, kv, d, 2.0f * unit(d));
    matrix(p + "attn_v.weight", spec.attn_type, kv, d, unit(d));
    matrix(p + "attn_output.weight", spec.attn_type, d, d, unit(d));
    matrix(p + "ffn_gate.weight", spec.ffn_type, spec.n_ff, d, unit(d));
    matrix(p + "ffn_up.weight", spec.ffn_type, spec.n_ff, d, unit(d));
    matrix(p + "ffn_down.weight", spec.ffn_type, d, spec.n_ff, unit(spec.n_ff));
  }

  using T = GgufValueType;
  std::vector<std::byte> out;
  constexpr uint64_t kAlignment = 32;
  const std::string_view magic = "GGUF";
  for (char c : magic) out.push_back(static_cast<std::byte>(c));
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, 11);  // metadata keys below
  auto key = [&](std::string_view k, T type) {
    put_string(out, k);
    put<uint32_t>(out, static_cast<uint32_t>(type));
  };
  auto u32 = [&](std::string_view k, int64_t v) {
    key(k, T::kUint32);
    put<uint32_t>(out, static_cast<uint32_t>(v));
  };
  key("general.architecture", T::kString);
  put_string(out, "llama");
  key("general.name", T::kString);
  put_string(out, "random-llama");
  u32("llama.block_count", spec.n_layer);
  u32("llama.embedding_length", spec.n_embd);
  u32("llama.attention.head_count", spec.n_head);
  u32("llama.attention.head_count_kv", spec.n_head_kv);
  u32("llama.feed_forward_length", spec.n_ff);
  u32("llama.context_length", spec.context_length);
  u32("llama.rope.dimension_count", spec.n_embd / spec.n_head);
  key("llama.attention.layer_norm_rms_epsilon", T::kFloat32);
  put<float>(out, spec.rms_eps);
  key("llama.rope.freq_base", T::kFloat32);
  put<float>(out, spec.rope_base);

  uint64_t offset = 0;
  for (const Tensor& t : tensors) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (uint64_t n : t.shape) put<uint64_t>(out, n);
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset += (t.data.size() + kAlignment - 1) / kAlignment * kAlignment;
  }
  for (const Tensor& t : tensors) {
    while (out.size() % kAlignment != 0) out.push_back(std::byte{0});
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  ASSERT_TRUE(file.good()) << "could not write " << path;
}

}  // namespace speclab::testing
