// LlamaModel (see llama.hpp): the LLaMA forward pass as llama.cpp computes it for rope type 0,
// each linear layer one skinny product over the new positions so the weights stream once per call.
#include "core/models/llama.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"
#include "core/models/simd16.hpp"

namespace speclab {
namespace {

// Multiply-adds of one attention block (rows × heads × seen positions × head width, scores and
// weighted sum) from which its loop runs on threads: ~1 ms of one core.
constexpr int64_t kAttentionParallelWork = int64_t{1} << 21;

// a·b over n floats: sixteen partial sums when n is a multiple of 16 (a head of 64), serially
// otherwise. The order is fixed by n alone, so every position of every call rounds alike.
float dot(const float* a, const float* b, int64_t n) {
  if (n % simd::kLanes != 0) {
    float s = 0.0f;
    for (int64_t e = 0; e < n; ++e) s += a[e] * b[e];
    return s;
  }
  simd::Vec acc{};
  for (int64_t e = 0; e < n; e += simd::kLanes) {
    simd::fma_into(acc, simd::load(a + e), simd::load(b + e));
  }
  float s = 0.0f;
  for (int i = 0; i < simd::kLanes; ++i) s += simd::lane(acc, i);
  return s;
}

// y += w·x over n floats (element-wise, so the same rounding in any vector width).
void axpy(float w, const float* x, float* y, int64_t n) {
  int64_t e = 0;
  for (; e + simd::kLanes <= n; e += simd::kLanes) {
    simd::Vec vy = simd::load(y + e);
    simd::axpy_into(vy, w, simd::load(x + e));
    simd::store(y + e, vy);
  }
  for (; e < n; ++e) y[e] += w * x[e];
}

// out = Σ_t (score[t] / total)·v_t over n rows v_t = v + t·stride of kVecs · 16 floats, added
// in t order from 0 exactly as repeated axpy calls would, but with the sum held in registers
// (axpy's y makes a store-to-load chain per row).
template <int kVecs>
void weighted_rows(const float* score, float total, const float* v, int64_t stride, int64_t n,
                   float* out) {
  simd::Vec acc[kVecs] = {};
  for (int64_t t = 0; t < n; ++t) {
    const float w = score[t] / total;
    const float* vt = v + t * stride;
    for (int k = 0; k < kVecs; ++k) simd::axpy_into(acc[k], w, simd::load(vt + k * simd::kLanes));
  }
  for (int k = 0; k < kVecs; ++k) simd::store(out + k * simd::kLanes, acc[k]);
}

// Rotates adjacent pairs (2i, 2i+1) of every head of each of n rows of `width` floats by
// (start + j)·θ_i (rope type 0). Not vectorised: GCC 12 turns this rotation into fused
// multiply-add/subtract instructions (vfmaddsub) where it vectorises it, in spite of
// -ffp-contract=off, with vector widths and scalar tails that differ by ISA, so the AVX-512 and
// the AVX2 builds gave different logits.
#if defined(__clang__)
#define SPECLAB_NOT_VECTORISED  // clang keeps -ffp-contract=off when it vectorises
#else
#define SPECLAB_NOT_VECTORISED __attribute__((optimize("no-tree-vectorize")))
#endif
SPECLAB_NOT_VECTORISED void rotate_pairs(float* y, int64_t n, int64_t width, int64_t hd,
                                         int64_t start, const float* inv_freq) {
  for (int64_t j = 0; j < n; ++j) {
    const auto pos = static_cast<float>(start + j);
    for (int64_t i = 0; i < hd / 2; ++i) {
      const float angle = pos * inv_freq[i];
      const float cs = std::cos(angle), sn = std::sin(angle);
      for (int64_t h = 0; h < width / hd; ++h) {
        float* p = y + j * width + h * hd + 2 * i;
        const float a = p[0], b = p[1];
        p[0] = a * cs - b * sn;
        p[1] = a * sn + b * cs;
      }
    }
  }
}

// A 2-D tensor [rows × depth] in `storage`, checking its shape.
WeightMatrix load_matrix(const GgufFile& file, const std::string& name, int64_t rows, int64_t depth,
                         WeightStorage storage) {
  const GgufTensor t = file.tensor(name);
  if (t.row_length() != depth || t.n_rows() != rows) {
    throw InvalidInput(fmt::format("{}: tensor '{}' is {} rows × {}; expected {} × {}", file.name(),
                                   name, t.n_rows(), t.row_length(), rows, depth));
  }
  return WeightMatrix(t, storage);
}

std::vector<float> load_vector(const GgufFile& file, const std::string& name, int64_t size) {
  const GgufTensor t = file.tensor(name);
  if (t.n_elements() != size) {
    throw InvalidInput(fmt::format("{}: tensor '{}' has {} elements; expected {}", file.name(),
                                   name, t.n_elements(), size));
  }
  return t.dequantize();
}

// out[j] = x[j] / sqrt(mean(x[j]²) + eps) ⊙ w for n rows of d values.
void rms_norm(const float* x, const float* w, int64_t n, int64_t d, double eps, float* out) {
  for (int64_t j = 0; j < n; ++j) {
    const float* xj = x + j * d;
    double sum2 = 0.0;
    for (int64_t k = 0; k < d; ++k) sum2 += static_cast<double>(xj[k]) * xj[k];
    const auto scale = static_cast<float>(1.0 / std::sqrt(sum2 / static_cast<double>(d) + eps));
    for (int64_t k = 0; k < d; ++k) out[j * d + k] = xj[k] * scale * w[k];
  }
}

// y = A·x for n columns (x [n × depth], y [n × rows]).
void matmul(const WeightMatrix& a, const std::vector<float>& x, int64_t n, std::vector<float>& y) {
  y.resize(static_cast<size_t>(n * a.rows()));
  a.apply(std::span<const float>(x.data(), static_cast<size_t>(n * a.depth())), n, y);
}

}  // namespace

LlamaModel::LlamaModel(const std::filesystem::path& gguf_path, LayerSkip skip,
                       WeightStorage storage)
    : skip_(std::move(skip)) {
  const auto t0 = std::chrono::steady_clock::now();
  weights_ = load_weights(gguf_path, storage);
  config_ = weights_->config;
  name_ = weights_->name;
  const auto n_layer = static_cast<size_t>(config_.n_layer);
  if (skip_.attention.empty() && skip_.ffn.empty()) {
    skip_.attention.assign(n_layer, false);
    skip_.ffn.assign(n_layer, false);
  } else if (skip_.attention.size() != n_layer || skip_.ffn.size() != n_layer) {
    throw InvalidInput(fmt::format(
        "{}: layer-skip '{}' covers {} attention and {} FFN sublayers; the model has {} layers",
        name_, skip_.spec, skip_.attention.size(), skip_.ffn.size(), n_layer));
  }
  if (skip_.skipped_attention() + skip_.skipped_ffn() > 0) {
    name_ += fmt::format(" layerskip:{}", skip_.spec);
  }
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<const LlamaModel::Weights> LlamaModel::load_weights(
    const std::filesystem::path& gguf_path, WeightStorage storage) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const Weights>> live;
  std::error_code error;
  auto key = std::filesystem::weakly_canonical(gguf_path, error).string();
  if (error) key = gguf_path.string();
  key += '|';
  key += weight_storage_name(storage);
  std::lock_guard lock(mutex);
  if (auto shared = live[key].lock()) return shared;
  auto weights = read_weights(gguf_path, storage);
  live[key] = weights;
  return weights;
}

std::shared_ptr<const LlamaModel::Weights> LlamaModel::read_weights(
    const std::filesystem::path& gguf_path, WeightStorage storage) {
  auto weights = std::make_shared<Weights>();
  weights->storage = storage;
  const GgufFile file = GgufFile::open(gguf_path);
  const std::string arch = file.get_string("general.architecture");
  if (arch != "llama") {
    throw InvalidInput(
        fmt::format("{}: general.architecture is '{}'; expected 'llama'", file.name(), arch));
  }
  LlamaConfig& c = weights->config;
  c.n_layer = file.get_int("llama.block_count");
  c.n_embd = file.get_int("llama.embedding_length");
  c.n_head = file.get_int("llama.attention.head_count");
  c.n_head_kv = file.get_int("llama.attention.head_count_kv");
  c.n_ff = file.get_int("llama.feed_forward_length");
  c.context_length = file.get_int("llama.context_length");
  c.rms_eps = file.get_float("llama.attention.layer_norm_rms_epsilon");
  if (file.find("llama.rope.freq_base") != nullptr)
    c.rope_base = file.get_float("llama.rope.freq_base");
  if (c.n_layer < 1 || c.n_head < 1 || c.n_head_kv < 1 || c.n_head % c.n_head_kv != 0 ||
      c.n_embd % c.n_head != 0 || (c.n_embd / c.n_head) % 2 != 0) {
    throw InvalidInput(fmt::format(
        "{}: unsupported shape: {} layers, n_embd {}, {} heads, {} KV heads; expected n_head a "
        "multiple of n_head_kv and an even head_dim",
        file.name(), c.n_layer, c.n_embd, c.n_head, c.n_head_kv));
  }
  c.head_dim = c.n_embd / c.n_head;
  if (file.find("llama.rope.dimension_count") != nullptr &&
      file.get_int("llama.rope.dimension_count") != c.head_dim) {
    throw InvalidInput(
        fmt::format("{}: llama.rope.dimension_count is {}; only full-head rope "
                    "(head_dim = {}) is supported",
                    file.name(), file.get_int("llama.rope.dimension_count"), c.head_dim));
  }
  c.vocab = file.tensor("token_embd.weight").n_rows();
  if (file.find("tokenizer.ggml.eos_token_id") != nullptr) {
    c.eos_token = static_cast<int32_t>(file.get_int("tokenizer.ggml.eos_token_id"));
  }
  weights->name = file.find("general.name") != nullptr ? file.get_string("general.name")
                                                       : gguf_path.stem().string();

  const int64_t d = c.n_embd, kv = c.n_head_kv * c.head_dim;
  weights->token_embd = load_matrix(file, "token_embd.weight", c.vocab, d, storage);
  if (file.has_tensor("output.weight")) {
    weights->output = load_matrix(file, "output.weight", c.vocab, d, storage);
  }
  weights->output_norm = load_vector(file, "output_norm.weight", d);
  weights->layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t l = 0; l < c.n_layer; ++l) {
    Layer& layer = weights->layers[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    layer.attn_norm = load_vector(file, p + "attn_norm.weight", d);
    layer.ffn_norm = load_vector(file, p + "ffn_norm.weight", d);
    layer.wq = load_matrix(file, p + "attn_q.weight", d, d, storage);
    layer.wk = load_matrix(file, p + "attn_k.weight", kv, d, storage);
    layer.wv = load_matrix(file, p + "attn_v.weight", kv, d, storage);
    layer.wo = load_matrix(file, p + "attn_output.weight", d, d, storage);
    layer.w_gate = load_matrix(file, p + "ffn_gate.weight", c.n_ff, d, storage);
    layer.w_up = load_matrix(file, p + "ffn_up.weight", c.n_ff, d, storage);
    layer.w_down = load_matrix(file, p + "ffn_down.weight", d, c.n_ff, storage);
  }
  weights->rope_inv_freq.resize(static_cast<size_t>(c.head_dim / 2));
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    weights->rope_inv_freq[static_cast<size_t>(i)] = static_cast<float>(
        std::pow(c.rope_base, -2.0 * static_cast<double>(i) / static_cast<double>(c.head_dim)));
  }
  return weights;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t bytes = weights_->token_embd.bytes() + weights_->output.bytes();
  for (const Layer& layer : weights_->layers) {
    for (const WeightMatrix* w :
         {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down}) {
      bytes += w->bytes();
    }
  }
  return bytes;
}

LlamaModel::PassWeights LlamaModel::pass_weights() const {
  PassWeights pass;
  const auto add = [&pass](const WeightMatrix& w) {
    pass.bytes += w.bytes();
    pass.elements += w.rows() * w.depth();
  };
  for (size_t l = 0; l < weights_->layers.size(); ++l) {
    const Layer& layer = weights_->layers[l];
    if (!skip_.attention[l]) {
      for (const WeightMatrix* w : {&layer.wq, &layer.wk, &layer.wv, &layer.wo}) add(*w);
    }
    if (!skip_.ffn[l]) {
      for (const WeightMatrix* w : {&layer.w_gate, &layer.w_up, &layer.w_down}) add(*w);
    }
  }
  add(weights_->output.rows() > 0 ? weights_->output : weights_->token_embd);
  return pass;
}

void LlamaModel::truncate(int64_t sequence_id, int64_t length) {
  const auto it = caches_.find(sequence_id);
  if (it == caches_.end()) return;
  Cache& cache = it->second;
  const int64_t keep = std::clamp<int64_t>(length, 0, static_cast<int64_t>(cache.tokens.size()));
  const int64_t kv = config_.n_head_kv * config_.head_dim;
  cache.tokens.resize(static_cast<size_t>(keep));
  // Layers whose attention is skipped hold no keys or values: never grow them.
  for (auto& k : cache.k) k.resize(std::min(k.size(), static_cast<size_t>(keep * kv)));
  for (auto& v : cache.v) v.resize(std::min(v.size(), static_cast<size_t>(keep * kv)));
}

void LlamaModel::release(int64_t sequence_id) { caches_.erase(sequence_id); }

int64_t LlamaModel::cached_length(int64_t sequence_id) const {
  const auto it = caches_.find(sequence_id);
  return it == caches_.end() ? 0 : static_cast<int64_t>(it->second.tokens.size());
}

std::vector<float> LlamaModel::logits(std::span<const ScoreRequest> requests) {
  const int64_t n_rows = total_positions(requests);
  for (size_t r = 0; r < requests.size(); ++r) {
    const ScoreRequest& q = requests[r];
    if (q.n_positions < 1 || q.n_positions > static_cast<int64_t>(q.tokens.size())) {
      throw InvalidInput(fmt::format("request {}: n_positions is {}; expected 1 ≤ m ≤ {} tokens", r,
                                     q.n_positions, q.tokens.size()));
    }
    for (size_t i = 0; i < q.tokens.size(); ++i) {
      if (q.tokens[i] < 0 || q.tokens[i] >= config_.vocab) {
        throw InvalidInput(fmt::format("request {} position {}: token {}; expected 0 ≤ t < {}", r,
                                       i, q.tokens[i], config_.vocab));
      }
    }
  }
  std::vector<float> out(static_cast<size_t>(n_rows * config_.vocab));
  score_logits(requests, out);
  return out;
}

// Runs the positions of `tokens` that the sequence's cache does not hold, keeping the longest
// matching cached prefix but at most `reuse_limit` tokens of it, and writes the logits of the last
// m positions to `out`; returns the positions it ran.
int64_t LlamaModel::extend(int64_t sequence_id, std::span<const int32_t> tokens,
                           int64_t reuse_limit, int64_t m, std::span<float> out) {
  const auto length = static_cast<int64_t>(tokens.size());
  if (length > config_.context_length) {
    throw InvalidInput(fmt::format("{}: sequence {} has {} tokens; the model's context is {}",
                                   name_, sequence_id, length, config_.context_length));
  }
  Cache& cache = caches_[sequence_id];
  if (cache.k.empty()) {
    cache.k.resize(static_cast<size_t>(config_.n_layer));
    cache.v.resize(static_cast<size_t>(config_.n_layer));
  }
  const int64_t limit = std::min(static_cast<int64_t>(cache.tokens.size()), reuse_limit);
  int64_t start = 0;
  while (start < limit &&
         cache.tokens[static_cast<size_t>(start)] == tokens[static_cast<size_t>(start)]) {
    ++start;
  }
  truncate(sequence_id, start);
  if (start == length) return 0;  // a prompt pass over a prefix the cache already holds
  forward(cache, tokens, start, m, out);
  return length - start;
}

void LlamaModel::score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) {
  int64_t row = 0;
  for (const ScoreRequest& q : requests) {
    // Recompute from the first row to output: the cache keeps keys and values, not hidden states.
    const auto length = static_cast<int64_t>(q.tokens.size());
    extend(q.sequence_id, q.tokens, length - q.n_positions, q.n_positions,
           logits.subspan(static_cast<size_t>(row * config_.vocab),
                          static_cast<size_t>(q.n_positions * config_.vocab)));
    row += q.n_positions;
  }
}

int64_t LlamaModel::prefill_state(std::span<const ScoreRequest> requests) {
  int64_t computed = 0;
  for (const ScoreRequest& q : requests) {
    // The first L - 1 tokens: the first decoding step recomputes the last one for its first row.
    if (q.tokens.size() < 2) continue;
    const std::span<const int32_t> prefix = q.tokens.first(q.tokens.size() - 1);
    computed += extend(q.sequence_id, prefix, static_cast<int64_t>(prefix.size()), 0, {});
  }
  return computed;
}

void LlamaModel::forward(Cache& cache, std::span<const int32_t> tokens, int64_t start, int64_t m,
                         std::span<float> out) const {
  const LlamaConfig& c = config_;
  const Weights& weights = *weights_;
  const int64_t d = c.n_embd, hd = c.head_dim, kv = c.n_head_kv * hd;
  const int64_t length = static_cast<int64_t>(tokens.size());
  const int64_t n = length - start;  // new positions, ≥ m
  const int64_t group = c.n_head / c.n_head_kv;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));

  std::vector<float> x(static_cast<size_t>(n * d)), xn(x.size()), q, k, v, att(x.size()), o;
  std::vector<float> gate, up, down;
  for (int64_t j = 0; j < n; ++j) {
    const int32_t t = tokens[static_cast<size_t>(start + j)];
    weights.token_embd.dequantize_row(
        t, std::span(x).subspan(static_cast<size_t>(j * d), static_cast<size_t>(d)));
  }
  auto rope = [&](std::vector<float>& y, int64_t width) {
    rotate_pairs(y.data(), n, width, hd, start, weights.rope_inv_freq.data());
  };

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Layer& layer = weights.layers[static_cast<size_t>(l)];
    if (!skip_.attention[static_cast<size_t>(l)]) {
      rms_norm(x.data(), layer.attn_norm.data(), n, d, c.rms_eps, xn.data());
      matmul(layer.wq, xn, n, q);
      matmul(layer.wk, xn, n, k);
      matmul(layer.wv, xn, n, v);
      rope(q, d);
      rope(k, kv);
      std::vector<float>& k_cache = cache.k[static_cast<size_t>(l)];
      std::vector<float>& v_cache = cache.v[static_cast<size_t>(l)];
      k_cache.insert(k_cache.end(), k.begin(), k.end());
      v_cache.insert(v_cache.end(), v.begin(), v.end());

      // Causal attention: row j (position start + j) sees positions 0..start + j. Threads only
      // when the step has enough work to repay a fork/join (on a loaded machine a fork/join
      // waits for a descheduled thread, and a one-token step has ~10⁵ multiply-adds here).
      const bool parallel_attention = n * c.n_head * length * hd >= kAttentionParallelWork;
#pragma omp parallel if (parallel_attention)
      {
        std::vector<float> score(static_cast<size_t>(length));
#pragma omp for collapse(2) schedule(static)
        for (int64_t j = 0; j < n; ++j) {
          for (int64_t h = 0; h < c.n_head; ++h) {
            const float* qh = &q[static_cast<size_t>(j * d + h * hd)];
            const int64_t kv_off = (h / group) * hd;
            const int64_t n_seen = start + j + 1;
            float max_score = -std::numeric_limits<float>::infinity();
            for (int64_t t = 0; t < n_seen; ++t) {
              const float* kt = &k_cache[static_cast<size_t>(t * kv + kv_off)];
              const float s = dot(qh, kt, hd);
              score[static_cast<size_t>(t)] = s * scale;
              max_score = std::max(max_score, s * scale);
            }
            float total = 0.0f;
            for (int64_t t = 0; t < n_seen; ++t) {
              float& s = score[static_cast<size_t>(t)];
              s = std::exp(s - max_score);
              total += s;
            }
            float* oh = &att[static_cast<size_t>(j * d + h * hd)];
            const float* v0 = &v_cache[static_cast<size_t>(kv_off)];
            if (hd == 64) {
              weighted_rows<4>(score.data(), total, v0, kv, n_seen, oh);
            } else if (hd == 128) {
              weighted_rows<8>(score.data(), total, v0, kv, n_seen, oh);
            } else {
              std::fill(oh, oh + hd, 0.0f);
              for (int64_t t = 0; t < n_seen; ++t) {
                axpy(score[static_cast<size_t>(t)] / total, v0 + t * kv, oh, hd);
              }
            }
          }
        }
      }
      matmul(layer.wo, att, n, o);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    }

    if (skip_.ffn[static_cast<size_t>(l)]) continue;
    rms_norm(x.data(), layer.ffn_norm.data(), n, d, c.rms_eps, xn.data());
    matmul(layer.w_gate, xn, n, gate);
    matmul(layer.w_up, xn, n, up);
    for (size_t i = 0; i < gate.size(); ++i) {
      const float g = gate[i];
      gate[i] = g / (1.0f + std::exp(-g)) * up[i];  // SiLU(gate) ⊙ up
    }
    matmul(layer.w_down, gate, n, down);
    for (size_t i = 0; i < x.size(); ++i) x[i] += down[i];
  }
  cache.tokens.assign(tokens.begin(), tokens.end());
  if (m == 0) return;  // a prompt pass: the cache is all it leaves

  // Final norm and LM head for the last m positions only.
  std::vector<float> h(static_cast<size_t>(m * d));
  rms_norm(&x[static_cast<size_t>((n - m) * d)], weights.output_norm.data(), m, d, c.rms_eps,
           h.data());
  const WeightMatrix& head = weights.output.rows() > 0 ? weights.output : weights.token_embd;
  head.apply(h, m, out);
}

}  // namespace speclab
