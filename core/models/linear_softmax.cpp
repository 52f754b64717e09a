// LinearSoftmax (see linear_softmax.hpp): weights from counter-based hashes of (seed, purpose,
// index), hashed context embeddings, and two skinny products per call (H_r·h, then G_r·z + b).
#include "core/models/linear_softmax.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <mutex>
#include <numbers>
#include <optional>
#include <type_traits>
#include <utility>

#include "core/base/error.hpp"
#include "core/base/hash.hpp"
#include "core/models/linear_softmax_embedding.hpp"

namespace speclab {
namespace {

// What a hash stream generates; part of every hash so two streams never coincide.
enum class Stream : uint64_t { kG = 1, kH = 2, kEmbedding = 3 };

inline uint64_t stream_key(uint64_t seed, Stream s) {
  return mix64(seed ^ mix64(static_cast<uint64_t>(s) * 0x9e3779b97f4a7c15ULL));
}

// A standard normal from 64 hashed bits (Box–Muller, cosine branch), in float.
inline float normal_at(uint64_t key, uint64_t index) {
  const uint64_t bits = mix64(key + mix64(index));
  const float u1 = (static_cast<float>(bits >> 40) + 0.5f) * 0x1p-24f;  // (0, 1)
  const float u2 = static_cast<float>((bits >> 8) & 0xffffff) * 0x1p-24f;
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(2.0f * std::numbers::pi_v<float> * u2);
}

// Fills A [rows × depth] with scale·N(0, 1), indexed by row·depth + k (layout-independent).
void fill_gaussian(PanelMatrix& a, uint64_t key, float scale) {
  const int64_t rows = a.rows(), depth = a.depth();
#pragma omp parallel for schedule(static) if (rows * depth >= (1 << 16))
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k = 0; k < depth; ++k) a.at(i, k) = scale * normal_at(key, i * depth + k);
  }
}

void validate_config(const LinearSoftmaxConfig& c) {
  auto fail = [&](std::string_view field, auto value, std::string_view expected) {
    throw InvalidInput(fmt::format("LinearSoftmax family '{}': {} is {}; expected {}", c.family,
                                   field, value, expected));
  };
  if (c.vocab < 2 || c.vocab > (int64_t{1} << 31) - 1) fail("vocab", c.vocab, "2 ≤ vocab < 2^31");
  if (c.hidden < 1 || c.hidden > 65536) fail("hidden", c.hidden, "1 ≤ hidden ≤ 65536");
  if (c.context < 1 || c.context > 4096) fail("context", c.context, "1 ≤ context ≤ 4096");
  if (!(c.context_decay > 0.0 && c.context_decay <= 1.0)) {
    fail("context_decay", c.context_decay, "a value in (0, 1]");
  }
  if (!(c.sigma_decay >= 0.0 && std::isfinite(c.sigma_decay))) {
    fail("sigma_decay", c.sigma_decay, "a finite value ≥ 0");
  }
  if (!(c.logit_scale >= 0.0 && std::isfinite(c.logit_scale))) {
    fail("logit_scale", c.logit_scale, "a finite value ≥ 0");
  }
  if (!(c.zipf >= 0.0 && std::isfinite(c.zipf))) fail("zipf", c.zipf, "a finite value ≥ 0");
}

}  // namespace

// ---- family ---------------------------------------------------------------------------------

LinearSoftmaxFamily::LinearSoftmaxFamily(const LinearSoftmaxConfig& config)
    : config_(config), g_(config.vocab, config.hidden), h_(config.hidden, config.hidden) {
  const int64_t d = config.hidden;
  fill_gaussian(g_, stream_key(config.seed, Stream::kG), 1.0f);
  fill_gaussian(h_, stream_key(config.seed, Stream::kH), static_cast<float>(1.0 / std::sqrt(d)));

  double norm2 = 0.0;
  for (int64_t k = 1; k <= d; ++k)
    norm2 += std::pow(static_cast<double>(k), -2.0 * config.sigma_decay);
  sigma_.resize(d);
  for (int64_t k = 1; k <= d; ++k) {
    sigma_[k - 1] = static_cast<float>(config.logit_scale *
                                       std::pow(static_cast<double>(k), -config.sigma_decay) /
                                       std::sqrt(norm2));
  }
  bias_.resize(config.vocab);
  for (int64_t t = 0; t < config.vocab; ++t) {
    bias_[t] = static_cast<float>(-config.zipf * std::log(static_cast<double>(t) + 1.0));
  }
  // Weights of the last n tokens, normalised so the pre-tanh sum has unit variance.
  double decay_norm2 = 0.0;
  for (int64_t j = 0; j < config.context; ++j)
    decay_norm2 += std::pow(config.context_decay, 2.0 * j);
  decays_.resize(config.context);
  for (int64_t j = 0; j < config.context; ++j) {
    decays_[j] = static_cast<float>(std::pow(config.context_decay, j) / std::sqrt(decay_norm2));
  }
}

std::shared_ptr<const LinearSoftmaxFamily> LinearSoftmaxFamily::create(
    const LinearSoftmaxConfig& config) {
  validate_config(config);
  return std::shared_ptr<const LinearSoftmaxFamily>(new LinearSoftmaxFamily(config));
}

void LinearSoftmaxFamily::hidden_state(std::span<const int32_t> tokens,
                                       std::span<float> hidden) const {
  const int64_t d = config_.hidden;
  if (tokens.empty() || static_cast<int64_t>(hidden.size()) != d) {
    throw InvalidInput(
        fmt::format("{}: hidden_state of {} tokens into {} values; expected ≥ 1 "
                    "token and hidden = {} values",
                    config_.family, tokens.size(), hidden.size(), d));
  }
  const int64_t n = std::min<int64_t>(config_.context, static_cast<int64_t>(tokens.size()));
  const uint32_t key32 = embedding_key();
  std::fill(hidden.begin(), hidden.begin() + d, 0.0f);
  float* out = hidden.data();
  for (int64_t j = 0; j < n; ++j) {
    const uint32_t token_key = lsm::token_key(tokens[tokens.size() - 1 - j], key32);
    const float w = decays_[j];
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) out[k] += w * lsm::embedding_value(token_key, k);
  }
  for (int64_t k = 0; k < d; ++k) out[k] = std::tanh(out[k]);
}

uint32_t LinearSoftmaxFamily::embedding_key() const {
  const uint64_t key = stream_key(config_.seed, Stream::kEmbedding);
  return static_cast<uint32_t>(key ^ (key >> 32));
}

std::unique_ptr<LinearSoftmaxModel> LinearSoftmaxFamily::make_target(std::string name) const {
  if (name.empty()) name = config_.family + "-target";
  auto self = shared_from_this();
  std::shared_ptr<const PanelMatrix> g(self, &g_);  // aliasing: keeps the family alive
  return std::make_unique<LinearSoftmaxModel>(self, std::move(g), config_.hidden, std::move(name));
}

std::unique_ptr<LinearSoftmaxModel> LinearSoftmaxFamily::make_draft(int64_t rank,
                                                                    std::string name) const {
  if (rank < 1 || rank > config_.hidden) {
    throw InvalidInput(
        fmt::format("LinearSoftmax family '{}': draft rank is {}; expected 1 ≤ rank "
                    "≤ hidden = {}",
                    config_.family, rank, config_.hidden));
  }
  if (name.empty()) name = fmt::format("{}-r{}", config_.family, rank);
  auto self = shared_from_this();
  std::shared_ptr<const PanelMatrix> g;
  if (rank == config_.hidden) {
    g = std::shared_ptr<const PanelMatrix>(self, &g_);
  } else {
    // A compact copy: reading r of every d floats from the shared G would cost a page walk per
    // panel, a large part of a small draft's time.
    g = std::make_shared<const PanelMatrix>(g_.leading_block(config_.vocab, rank));
  }
  return std::make_unique<LinearSoftmaxModel>(self, std::move(g), rank, std::move(name));
}

// ---- model ----------------------------------------------------------------------------------

LinearSoftmaxModel::LinearSoftmaxModel(std::shared_ptr<const LinearSoftmaxFamily> family,
                                       std::shared_ptr<const PanelMatrix> g_rank, int64_t rank,
                                       std::string name)
    : family_(std::move(family)), g_rank_(std::move(g_rank)), rank_(rank), name_(std::move(name)) {}

int64_t LinearSoftmaxModel::weight_bytes() const {
  const auto& c = family_->config();
  return static_cast<int64_t>(sizeof(float)) * (c.vocab * rank_ + rank_ * c.hidden + c.vocab);
}

void LinearSoftmaxModel::score_logits(std::span<const ScoreRequest> requests,
                                      std::span<float> logits) {
  const auto& fam = *family_;
  const int64_t d = fam.config().hidden, v = fam.config().vocab;
  const int64_t n_cols = total_positions(requests);

  // Column j of a request is the context tokens[0, L-m+1+j).
  std::vector<std::span<const int32_t>> contexts;
  contexts.reserve(n_cols);
  for (const auto& r : requests) {
    const auto length = static_cast<int64_t>(r.tokens.size());
    for (int64_t j = 0; j < r.n_positions; ++j) {
      contexts.push_back(r.tokens.first(length - r.n_positions + 1 + j));
    }
  }
  std::vector<float> hidden(n_cols * d);
#pragma omp parallel for schedule(static) if (n_cols * d >= (1 << 20))
  for (int64_t c = 0; c < n_cols; ++c) {
    fam.hidden_state(contexts[c], std::span<float>(hidden).subspan(c * d, d));
  }

  // z = σ_r ⊙ (H_r·h), then logits = G_r·z + b.
  std::vector<float> z(n_cols * rank_);
  skinny_gemm(fam.h(), {.rows = rank_, .depth = d, .n_cols = n_cols}, hidden, d, {}, z, rank_);
  const auto sigma = fam.sigma();
  for (int64_t c = 0; c < n_cols; ++c) {
    for (int64_t k = 0; k < rank_; ++k) z[c * rank_ + k] *= sigma[k];
  }
  skinny_gemm(*g_rank_, {.rows = v, .depth = rank_, .n_cols = n_cols}, z, rank_, fam.bias(), logits,
              v);
}

// ---- presets --------------------------------------------------------------------------------

namespace {

const std::vector<LinearSoftmaxPreset>& builtin_presets() {
  static const std::vector<LinearSoftmaxPreset> presets = [] {
    const LinearSoftmaxConfig headline{.family = "lsm",
                                       .vocab = 32000,
                                       .hidden = 1024,
                                       .context = 4,
                                       .context_decay = 0.6,
                                       .sigma_decay = 1.0,
                                       .logit_scale = 8.0,
                                       .zipf = 1.1,
                                       .seed = 20260101};
    const LinearSoftmaxConfig mid{.family = "lsm-mid",
                                  .vocab = 4096,
                                  .hidden = 256,
                                  .context = 4,
                                  .context_decay = 0.6,
                                  .sigma_decay = 0.95,
                                  .logit_scale = 8.0,
                                  .zipf = 1.1,
                                  .seed = 20260102};
    const LinearSoftmaxConfig tiny{.family = "lsm-tiny",
                                   .vocab = 16,
                                   .hidden = 8,
                                   .context = 2,
                                   .context_decay = 0.6,
                                   .sigma_decay = 1.0,
                                   .logit_scale = 2.0,
                                   .zipf = 0.5,
                                   .seed = 20260103};
    return std::vector<LinearSoftmaxPreset>{
        {.name = "lsm-target", .config = headline, .rank = 0},
        {.name = "lsm-draft", .config = headline, .rank = 64},
        {.name = "lsm-mid-target", .config = mid, .rank = 0},
        {.name = "lsm-mid-draft", .config = mid, .rank = 32},
        {.name = "lsm-tiny-target", .config = tiny, .rank = 0},
        {.name = "lsm-tiny-draft", .config = tiny, .rank = 2},
    };
  }();
  return presets;
}

}  // namespace

std::span<const LinearSoftmaxPreset> linear_softmax_presets() { return builtin_presets(); }

namespace {

std::string where(std::string_view source, const toml::source_region& region) {
  return fmt::format("{}:{}:{}", source, region.begin.line, region.begin.column);
}

template <class T>
T required(const toml::table& table, std::string_view key, std::string_view source,
           std::string_view context) {
  const toml::node* node = table.get(key);
  if (node == nullptr) {
    throw InvalidInput(
        fmt::format("{}: {} has no '{}'", where(source, table.source()), context, key));
  }
  std::optional<T> value;
  if constexpr (std::is_same_v<T, double>) {
    if (node->is_integer()) value = static_cast<double>(*node->value<int64_t>());
  }
  if (!value) value = node->value<T>();
  if (!value) {
    throw InvalidInput(fmt::format("{}: {}.{} has the wrong type; expected {}",
                                   where(source, node->source()), context, key,
                                   std::is_same_v<T, std::string> ? "a string"
                                   : std::is_same_v<T, double>    ? "a number"
                                                                  : "an integer"));
  }
  return *value;
}

void reject_unknown_keys(const toml::table& table, std::span<const std::string_view> known,
                         std::string_view source, std::string_view context) {
  for (const auto& [key, node] : table) {
    if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
      throw InvalidInput(fmt::format("{}: unknown key {}.{}; expected one of: {}",
                                     where(source, key.source()), context, key.str(),
                                     fmt::join(known, ", ")));
    }
  }
}

}  // namespace

std::vector<LinearSoftmaxPreset> linear_softmax_presets_from_toml(std::string_view text,
                                                                  std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InvalidInput(fmt::format("{}: {}", where(source, e.source()), e.description()));
  }
  const toml::table* section = root["linear_softmax"].as_table();
  if (section == nullptr) {
    throw InvalidInput(fmt::format("{}: no [linear_softmax] table", source));
  }
  const toml::table* families = (*section)["families"].as_table();
  const toml::table* models = (*section)["models"].as_table();
  if (families == nullptr || models == nullptr) {
    throw InvalidInput(fmt::format("{}: [linear_softmax] needs tables 'families' and 'models'",
                                   where(source, section->source())));
  }
  std::vector<LinearSoftmaxConfig> configs;
  static constexpr std::array<std::string_view, 8> kFamilyKeys = {
      "vocab", "hidden", "context", "context_decay", "sigma_decay", "logit_scale", "zipf", "seed"};
  for (const auto& [key, node] : *families) {
    const std::string context = fmt::format("linear_softmax.families.{}", key.str());
    const toml::table* t = node.as_table();
    if (t == nullptr) {
      throw InvalidInput(
          fmt::format("{}: {} is not a table", where(source, node.source()), context));
    }
    reject_unknown_keys(*t, kFamilyKeys, source, context);
    LinearSoftmaxConfig c;
    c.family = std::string(key.str());
    c.vocab = required<int64_t>(*t, "vocab", source, context);
    c.hidden = required<int64_t>(*t, "hidden", source, context);
    c.context = required<int64_t>(*t, "context", source, context);
    c.context_decay = required<double>(*t, "context_decay", source, context);
    c.sigma_decay = required<double>(*t, "sigma_decay", source, context);
    c.logit_scale = required<double>(*t, "logit_scale", source, context);
    c.zipf = required<double>(*t, "zipf", source, context);
    c.seed = static_cast<uint64_t>(required<int64_t>(*t, "seed", source, context));
    try {
      validate_config(c);
    } catch (const InvalidInput& e) {
      throw InvalidInput(fmt::format("{}: {}", where(source, t->source()), e.what()));
    }
    configs.push_back(std::move(c));
  }
  std::vector<LinearSoftmaxPreset> presets;
  static constexpr std::array<std::string_view, 2> kModelKeys = {"family", "rank"};
  for (const auto& [key, node] : *models) {
    const std::string context = fmt::format("linear_softmax.models.{}", key.str());
    const toml::table* t = node.as_table();
    if (t == nullptr) {
      throw InvalidInput(
          fmt::format("{}: {} is not a table", where(source, node.source()), context));
    }
    reject_unknown_keys(*t, kModelKeys, source, context);
    const auto family = required<std::string>(*t, "family", source, context);
    const auto it = std::find_if(configs.begin(), configs.end(),
                                 [&](const auto& c) { return c.family == family; });
    if (it == configs.end()) {
      throw InvalidInput(
          fmt::format("{}: {}.family is '{}', which is not in linear_softmax.families",
                      where(source, t->source()), context, family));
    }
    const int64_t rank = t->contains("rank") ? required<int64_t>(*t, "rank", source, context) : 0;
    if (rank < 0 || rank > it->hidden) {
      throw InvalidInput(fmt::format("{}: {}.rank is {}; expected 0 (full) ≤ rank ≤ hidden = {}",
                                     where(source, t->source()), context, rank, it->hidden));
    }
    presets.push_back({.name = std::string(key.str()), .config = *it, .rank = rank});
  }
  return presets;
}

const LinearSoftmaxPreset& find_linear_softmax_preset(std::string_view name) {
  for (const auto& p : builtin_presets()) {
    if (p.name == name) return p;
  }
  std::vector<std::string_view> names;
  for (const auto& p : builtin_presets()) names.push_back(p.name);
  throw InvalidInput(fmt::format("unknown LinearSoftmax preset '{}'; known presets: {}", name,
                                 fmt::join(names, ", ")));
}

std::shared_ptr<const LinearSoftmaxFamily> linear_softmax_family(
    const LinearSoftmaxConfig& config) {
  static std::mutex mutex;
  static std::vector<std::pair<LinearSoftmaxConfig, std::weak_ptr<const LinearSoftmaxFamily>>>
      cache;
  std::lock_guard lock(mutex);
  for (auto& [c, weak] : cache) {
    if (c == config) {
      if (auto family = weak.lock()) return family;
      auto family = LinearSoftmaxFamily::create(config);
      weak = family;
      return family;
    }
  }
  auto family = LinearSoftmaxFamily::create(config);
  cache.emplace_back(config, family);
  return family;
}

std::unique_ptr<LinearSoftmaxModel> make_linear_softmax_model(std::string_view preset) {
  const auto& p = find_linear_softmax_preset(preset);
  auto family = linear_softmax_family(p.config);
  if (p.rank == 0 || p.rank == p.config.hidden) return family->make_target(p.name);
  return family->make_draft(p.rank, p.name);
}

}  // namespace speclab
