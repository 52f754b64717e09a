// LinearSoftmax (docs/architecture.md "core/models"): the last n tokens hash to a hidden vector
// h ∈ R^d, logits = G·(σ ⊙ (H·h)) + b with W = G·diag(σ)·H streamed from memory, a Zipf bias b and
// decaying σ. A draft of rank r keeps the first r factors (the best rank-r approximation by
// construction), so its acceptance rate α (docs/verifiers.md V1) is dialled by r like a smaller
// model's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/model.hpp"
#include "core/models/skinny_gemm.hpp"

namespace speclab {

/// Everything a family of weights is generated from. Two families with equal configs have
/// bitwise equal weights.
struct LinearSoftmaxConfig {
  std::string family;          ///< name, e.g. "lsm"
  int64_t vocab = 0;           ///< V ≥ 2
  int64_t hidden = 0;          ///< d ≥ 1
  int64_t context = 4;         ///< n ≥ 1: how many trailing tokens the hidden vector sees
  double context_decay = 0.6;  ///< weight decay^(j-1) of the j-th last token, in (0, 1]
  double sigma_decay = 1.0;    ///< a ≥ 0 in σ_k ∝ k^(-a), k = 1..d
  double logit_scale = 4.0;  ///< ‖σ‖₂: the context part of a logit has std ≈ 0.6·logit_scale
  double zipf = 1.0;         ///< s ≥ 0 in the unigram bias b_t = -s·ln(t+1)
  uint64_t seed = 0;

  bool operator==(const LinearSoftmaxConfig&) const = default;
};

class LinearSoftmaxModel;

/// The shared weights G [V × d], σ [d], H [d × d] (Gaussian / √d) and b [V] of one config,
/// from which the target (rank d) and its drafts (rank r < d) are made.
class LinearSoftmaxFamily : public std::enable_shared_from_this<LinearSoftmaxFamily> {
 public:
  /// Generates the weights (counter-based, so the result does not depend on the thread count).
  /// Throws InvalidInput naming the field when the config is out of range.
  static std::shared_ptr<const LinearSoftmaxFamily> create(const LinearSoftmaxConfig& config);

  const LinearSoftmaxConfig& config() const { return config_; }
  std::span<const float> sigma() const { return sigma_; }
  std::span<const float> bias() const { return bias_; }
  const PanelMatrix& g() const { return g_; }
  const PanelMatrix& h() const { return h_; }

  /// The full-rank model; shares the family's memory. Name defaults to "<family>-target".
  std::unique_ptr<LinearSoftmaxModel> make_target(std::string name = "") const;
  /// The rank-r model, 1 ≤ rank ≤ d: holds its own compact copy of G[:, :r] (V·r floats) and
  /// shares H and b. Rank d gives bitwise the target's logits. Name defaults to "<family>-r<rank>".
  std::unique_ptr<LinearSoftmaxModel> make_draft(int64_t rank, std::string name = "") const;

  /// The hidden vector of a context (its last n tokens; fewer when shorter), before H.
  /// @param[in]  tokens  token ids in [0, V), at least one
  /// @param[out] hidden  [d]
  void hidden_state(std::span<const int32_t> tokens, std::span<float> hidden) const;
  /// What hidden_state is made of (core/models/linear_softmax_embedding.hpp), for other
  /// implementations of the same model: the 32-bit embedding key, and the weights [n] of the
  /// last n tokens (decay^(j-1), normalised), last token first.
  uint32_t embedding_key() const;
  std::span<const float> context_weights() const { return decays_; }

 private:
  explicit LinearSoftmaxFamily(const LinearSoftmaxConfig& config);

  LinearSoftmaxConfig config_;
  PanelMatrix g_;              // [V × d]
  PanelMatrix h_;              // [d × d]
  std::vector<float> sigma_;   // [d], logit_scale folded in
  std::vector<float> bias_;    // [V]
  std::vector<float> decays_;  // [n]: decay^(j-1) / ‖decays‖₂
};

/// A member of a family: logits = G_r·(σ_r ⊙ (H_r·h)) + b. Stateless; thread-compatible.
class LinearSoftmaxModel final : public LanguageModel {
 public:
  LinearSoftmaxModel(std::shared_ptr<const LinearSoftmaxFamily> family,
                     std::shared_ptr<const PanelMatrix> g_rank, int64_t rank, std::string name);

  int64_t vocab() const override { return family_->config().vocab; }
  std::string name() const override { return name_; }
  int64_t rank() const { return rank_; }
  const LinearSoftmaxFamily& family() const { return *family_; }
  /// Weight bytes one score() call streams: G_r (V·r), H_r (r·d) and b, in fp32.
  int64_t weight_bytes() const;

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;

 private:
  std::shared_ptr<const LinearSoftmaxFamily> family_;
  std::shared_ptr<const PanelMatrix> g_rank_;  // [V × rank]
  int64_t rank_;
  std::string name_;
};

/// A named model: a family config and a rank (0 = full, the target).
struct LinearSoftmaxPreset {
  std::string name;
  LinearSoftmaxConfig config;
  int64_t rank = 0;

  bool operator==(const LinearSoftmaxPreset&) const = default;
};

/// The built-in presets, mirrored by data/models.toml (a unit test checks they agree):
/// lsm-target / lsm-draft (V 32000, d 1024, r 64), lsm-mid-*, lsm-tiny-* (V 16, d 8).
std::span<const LinearSoftmaxPreset> linear_softmax_presets();

/// Reads presets from TOML text in the layout of data/models.toml:
/// [linear_softmax.families.NAME] with the LinearSoftmaxConfig fields (family = NAME), and
/// [linear_softmax.models] NAME = { family = "...", rank = r } (rank optional: full).
/// Throws InvalidInput with `source:line:column` on a syntax error, or naming the key.
std::vector<LinearSoftmaxPreset> linear_softmax_presets_from_toml(std::string_view text,
                                                                  std::string_view source);

/// The built-in preset of that name; throws InvalidInput listing the known names otherwise.
const LinearSoftmaxPreset& find_linear_softmax_preset(std::string_view name);

/// The family of a config, generated once per process and shared while any model holds it.
std::shared_ptr<const LinearSoftmaxFamily> linear_softmax_family(const LinearSoftmaxConfig& config);

/// A model from a built-in preset (families are shared, so a target and its draft hold G once).
std::unique_ptr<LinearSoftmaxModel> make_linear_softmax_model(std::string_view preset);

}  // namespace speclab
