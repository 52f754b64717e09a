// gpu::LinearSoftmaxDevice against the CPU LinearSoftmaxModel it was copied from: every
// probability within a bound derived from float rounding (cuBLAS sums in another order than
// core's skinny GEMM, and the device tanhf is not glibc's), for targets and low-rank drafts,
// several temperatures, ragged m and contexts shorter than n. Built for the device (label gpu)
// and for the SIMT emulation with the emulated cuBLAS (gpu-emu).
#include "gpu/models/linear_softmax.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/models/linear_softmax.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace speclab {
namespace {

constexpr double kUnit = 0x1p-24;  // float unit roundoff u

double gamma_n(double n) { return n * kUnit / (1.0 - n * kUnit); }

LinearSoftmaxConfig odd_config() {
  // V = 1000 is not a multiple of the 256-token chunks; context 3 with short prompts.
  return {.family = "gpu-test",
          .vocab = 1000,
          .hidden = 64,
          .context = 3,
          .context_decay = 0.7,
          .sigma_decay = 0.8,
          .logit_scale = 6.0,
          .zipf = 1.0,
          .seed = 77};
}

/// Largest possible |logit_gpu − logit_cpu| over the rows of `requests`, from the standard
/// dot-product bound |fl(Σ a_j b_j) − Σ a_j b_j| ≤ γ_n Σ|a_j b_j| (Higham §3.1) applied to both
/// implementations of both products, plus 4 ulp of tanh per hidden entry carried through.
double logit_difference_bound(const LinearSoftmaxModel& model,
                              const std::vector<ScoreRequest>& requests) {
  const LinearSoftmaxFamily& f = model.family();
  const int64_t d = f.config().hidden, r = model.rank(), v = f.config().vocab;
  const auto sigma = f.sigma();
  const auto bias = f.bias();
  double worst = 0.0;
  for (const auto& q : requests) {
    for (int64_t j = 0; j < q.n_positions; ++j) {
      const auto length = static_cast<int64_t>(q.tokens.size());
      std::vector<float> h(d);
      f.hidden_state(q.tokens.first(length - q.n_positions + 1 + j), h);
      std::vector<double> z(r), dz(r);
      for (int64_t k = 0; k < r; ++k) {
        double s1 = 0.0, dh_term = 0.0, zk = 0.0;
        for (int64_t c = 0; c < d; ++c) {
          const double a = static_cast<double>(sigma[k]) * f.h().at(k, c);
          s1 += std::abs(a * h[c]);
          dh_term += std::abs(a) * std::abs(h[c]) * 4.0 * 0x1p-23;  // tanh: 4 ulp
          zk += a * h[c];
        }
        z[k] = zk;
        dz[k] = (gamma_n(d + 2) + gamma_n(d + 1)) * s1 + dh_term;
      }
      for (int64_t i = 0; i < v; ++i) {
        double s2 = std::abs(bias[i]), prop = 0.0;
        for (int64_t k = 0; k < r; ++k) {
          s2 += std::abs(f.g().at(i, k) * z[k]);
          prop += std::abs(f.g().at(i, k)) * dz[k];
        }
        worst = std::max(worst, 2.0 * gamma_n(r + 2) * s2 + prop);
      }
    }
  }
  return worst;
}

void expect_matches_cpu(LinearSoftmaxModel& model, const std::vector<ScoreRequest>& requests,
                        double temperature) {
  gpu::LinearSoftmaxDevice device(model);
  const SamplingParams sampling{.temperature = temperature};
  const std::vector<float> expected = model.score(requests, sampling);
  const std::vector<float> actual = device.score(requests, sampling);
  ASSERT_EQ(actual.size(), expected.size());
  const int64_t v = model.vocab();
  // p = exp(x − lse) with x = l/T: a logit change of at most Δ moves ln p by at most 2Δ/T. The
  // softmax's own rounding on each side (bitwise the same function of the logits, core's order):
  // (l − max)·(1/T) within 2 u·(|x| + 1), exp within 2 ulp, the normaliser's 16-lane float sums
  // within γ_{V/16+17}.
  const double delta = logit_difference_bound(model, requests);
  int reported = 0;
  for (size_t row = 0; row < actual.size() / v; ++row) {
    const float* e = &expected[row * v];
    const float* a = &actual[row * v];
    const float top = *std::max_element(e, e + v);
    for (int64_t t = 0; t < v; ++t) {
      const double x = std::abs(std::log(std::max<double>(e[t], 1e-38) / top));
      const double log_bound = 2.0 * delta / temperature + 4.0 * kUnit * (x + 1.0) + 8.0 * 0x1p-23 +
                               2.0 * gamma_n(v / 16.0 + 17.0);
      const double bound = e[t] * std::expm1(log_bound) + 1e-37;
      if (std::abs(a[t] - e[t]) > bound && reported++ < 5) {
        ADD_FAILURE() << model.name() << " T=" << temperature << " row " << row << " token " << t
                      << ": gpu " << a[t] << " cpu " << e[t] << " differ by more than " << bound
                      << " (logit bound " << delta << ")";
      }
    }
  }
  EXPECT_EQ(reported, 0);
  // The bound is meaningful only if it is small: a wrong weight or column would move
  // probabilities by far more than this.
  EXPECT_LT(delta, 1e-2) << model.name();
}

TEST(LinearSoftmaxGpu, GpuMatchesReference) {
  SPECLAB_SKIP_WITHOUT_GPU();
  const std::vector<int32_t> long_seq = {5, 17, 3, 999, 42, 7, 0, 256, 511};
  const std::vector<int32_t> short_seq = {12};
  const std::vector<int32_t> mid_seq = {300, 301};
  const std::vector<ScoreRequest> requests = {
      {long_seq, 4, 0}, {short_seq, 1, 1}, {mid_seq, 2, 2}, {long_seq, 1, 3}};
  auto family = LinearSoftmaxFamily::create(odd_config());
  for (double temperature : {1.0, 0.7}) {
    auto target = family->make_target();
    expect_matches_cpu(*target, requests, temperature);
    auto draft = family->make_draft(8);
    expect_matches_cpu(*draft, requests, temperature);
  }
  auto tiny = make_linear_softmax_model("lsm-tiny-draft");
  const std::vector<int32_t> tiny_seq = {1, 15, 0, 7};
  expect_matches_cpu(*tiny, {{tiny_seq, 3, 0}, {tiny_seq, 1, 1}}, 1.3);
}

TEST(LinearSoftmaxGpu, BadInputThrows) {
  SPECLAB_SKIP_WITHOUT_GPU();
  auto model = make_linear_softmax_model("lsm-tiny-target");
  gpu::LinearSoftmaxDevice device(*model);
  const std::vector<int32_t> tokens = {1, 2, 16};
  const std::vector<ScoreRequest> bad_token = {{tokens, 1, 0}};
  EXPECT_THROW(
      {
        try {
          device.score(bad_token, {});
        } catch (const InvalidInput& e) {
          EXPECT_NE(std::string(e.what()).find("token 2 is 16"), std::string::npos) << e.what();
          throw;
        }
      },
      InvalidInput);
  const std::vector<int32_t> ok = {1, 2};
  const std::vector<ScoreRequest> too_many = {{ok, 3, 0}};
  EXPECT_THROW(device.score(too_many, {}), InvalidInput);
  const std::vector<ScoreRequest> fine = {{ok, 1, 0}};
  EXPECT_THROW(device.score(fine, {.top_k = 3}), InvalidInput);
  EXPECT_THROW(device.score({}, {}), InvalidInput);
}

}  // namespace
}  // namespace speclab
