// Exact output distributions of the chain verifiers (docs/verifiers.md V1, V2, V3) by enumeration
// in rational arithmetic. Deliberately shares no code with verify_chain.cpp: it is the yardstick
// the float verifiers are measured against, so it follows docs/verifiers.md line by line and
// optimises nothing.
#include "core/exact/exact.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <utility>

#include "core/base/error.hpp"
#include "core/verify/verify_typical.hpp"

namespace speclab::exact {
namespace {

using boost::multiprecision::mpz_int;

}  // namespace

void validate_row(const Row& row, int vocab, std::string_view argument, int index,
                  std::string_view where) {
  if (static_cast<int>(row.size()) != vocab) {
    throw InvalidInput(fmt::format("{} row {} ({}) has {} entries; expected V = {}", argument,
                                   index, where, row.size(), vocab));
  }
  Q sum = 0;
  for (int a = 0; a < vocab; ++a) {
    if (row[a] < 0) {
      throw InvalidInput(fmt::format("{} row {} ({}) entry {} is {}; expected ≥ 0", argument, index,
                                     where, a, to_fraction_string(row[a])));
    }
    sum += row[a];
  }
  if (sum != 1) {
    throw InvalidInput(fmt::format("{} row {} ({}) sums to {}; expected exactly 1", argument, index,
                                   where, to_fraction_string(sum)));
  }
}

namespace {

void validate_method(const Method& method) {
  if (method.method == ChainMethod::kLenient && (method.leniency <= 0 || method.leniency > 1)) {
    throw InvalidInput(fmt::format("leniency is {}; expected l in (0, 1] (docs/verifiers.md V3)",
                                   to_fraction_string(method.leniency)));
  }
}

void validate_gamma(int gamma) {
  if (gamma < 0 || gamma > kMaxGamma) {
    throw InvalidInput(
        fmt::format("gamma is {}; expected 0 ≤ γ ≤ {} (exact enumeration is exponential in γ)",
                    gamma, kMaxGamma));
  }
}

void validate_vocab(int vocab, std::string_view argument) {
  if (vocab < 1 || vocab > kMaxVocab) {
    throw InvalidInput(
        fmt::format("{} has V = {}; expected 1 ≤ V ≤ {} (exact enumeration is exponential in V)",
                    argument, vocab, kMaxVocab));
  }
}

void validate_chain(const MarkovChain& chain, std::string_view argument) {
  validate_vocab(chain.vocab, argument);
  if (static_cast<int>(chain.transition.size()) != chain.vocab) {
    throw InvalidInput(fmt::format("{} has {} transition rows; expected V = {}", argument,
                                   chain.transition.size(), chain.vocab));
  }
  for (int t = 0; t < chain.vocab; ++t) {
    validate_row(chain.transition[t], chain.vocab, argument, t, fmt::format("after token {}", t));
  }
}

int argmax(const Row& row) {
  // std::max_element returns the first maximum: lowest id on ties, as docs/verifiers.md V2
  // requires.
  return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

// docs/verifiers.md V1 step 3 and V3: the probability that draft token x (drawn from q) is
// accepted. Callers never pass q(x) = 0, because such a token is never drawn.
Q accept_probability(const Row& probs_target, const Row& probs_draft, int x, const Method& method) {
  switch (method.method) {
    case ChainMethod::kToken:
      return std::min(Q(1), Q(probs_target[x] / probs_draft[x]));
    case ChainMethod::kLenient:
      return std::min(Q(1), Q(probs_target[x] / (method.leniency * probs_draft[x])));
    case ChainMethod::kGreedy:
      return x == argmax(probs_target) ? Q(1) : Q(0);
  }
  throw Error("exact: unknown ChainMethod");
}

// docs/verifiers.md V1 step 4, V3 and V2: the distribution of the token emitted at the first
// rejection.
Row residual(const Row& probs_target, const Row& probs_draft, const Method& method) {
  if (method.method == ChainMethod::kGreedy) return one_hot_argmax(probs_target);
  const Q scale = method.method == ChainMethod::kLenient ? method.leniency : Q(1);
  Row r(probs_target.size());
  Q mass = 0;
  for (size_t a = 0; a < r.size(); ++a) {
    r[a] = std::max(Q(0), Q(probs_target[a] - scale * probs_draft[a]));
    mass += r[a];
  }
  // The residual mass is the rejection probability (V1), or more (V3), so it is positive whenever
  // the caller reaches this point with a positive rejection probability.
  if (mass == 0) throw Error("exact: residual has zero mass although a rejection is possible");
  for (Q& value : r) value /= mass;
  return r;
}

// The bonus token after γ acceptances: sampled from p_{γ+1}, or its argmax under V2.
Row bonus(const Row& probs_target, const Method& method) {
  return method.method == ChainMethod::kGreedy ? one_hot_argmax(probs_target) : probs_target;
}

struct StepWalk {
  const RowAt& target;
  const RowAt& draft;
  int gamma;
  const Method& method;
  const EmitLeaf& emit;
  Sequence prefix;  // the accepted draft tokens so far

  // Emits the accepted prefix followed by one token drawn from `row` (residual or bonus).
  void emit_from(const Row& row, const Q& mass) {
    const int n_accepted = static_cast<int>(prefix.size());
    for (size_t a = 0; a < row.size(); ++a) {
      if (row[a] == 0) continue;
      prefix.push_back(static_cast<int>(a));
      emit(prefix, n_accepted, Q(mass * row[a]));
      prefix.pop_back();
    }
  }

  // Position i (0-based) with the token before it and the probability of reaching it.
  void walk(int i, int previous, const Q& mass) {
    const Row& probs_target = target(i, previous);
    if (i == gamma) {
      emit_from(bonus(probs_target, method), mass);
      return;
    }
    const Row& probs_draft = draft(i, previous);
    Q reject = 0;
    for (size_t x = 0; x < probs_draft.size(); ++x) {
      if (probs_draft[x] == 0) continue;
      const int token = static_cast<int>(x);
      const Q accept = accept_probability(probs_target, probs_draft, token, method);
      reject += mass * probs_draft[x] * (1 - accept);
      const Q reach = mass * probs_draft[x] * accept;
      if (reach == 0) continue;
      prefix.push_back(token);
      walk(i + 1, token, reach);
      prefix.pop_back();
    }
    // Later drafts do not matter after a rejection, so summing over them leaves probability 1.
    if (reject > 0) emit_from(residual(probs_target, probs_draft, method), reject);
  }
};

StepLaw chain_law(const Method& method) {
  return [method](const RowAt& target, const RowAt& draft, int gamma, int previous,
                  const EmitLeaf& emit) {
    StepWalk walk{target, draft, gamma, method, emit, {}};
    walk.walk(0, previous, Q(1));
  };
}

// docs/verifiers.md V8: at each position the target draws y by plain decoding's rule; the draft
// x_i is accepted iff x_i = y. P(X = Y = y) is coupled_agreement_at's 1 / S_y under one Gumbel
// noise, or p_y·q_y with independent noise; P(Y = y, X ≠ y) = p_y − P(X = Y = y). After a match
// the next position's rows are at y, and the noise of different positions is independent.
struct MatchWalk {
  const RowAt& target;
  const RowAt& draft;
  int gamma;
  MatchMethod method;
  const EmitLeaf& emit;
  Sequence prefix;

  void walk(int i, int previous, const Q& mass) {
    const Row& p = target(i, previous);
    const int n_accepted = static_cast<int>(prefix.size());
    const Row* q = i < gamma ? &draft(i, previous) : nullptr;
    for (size_t y = 0; y < p.size(); ++y) {
      if (p[y] == 0) continue;
      const int token = static_cast<int>(y);
      const Q both = q == nullptr                      ? Q(0)
                     : method == MatchMethod::kCoupled ? coupled_agreement_at(p, *q, token)
                                                       : Q(p[y] * (*q)[y]);
      prefix.push_back(token);
      if (both > 0) walk(i + 1, token, Q(mass * both));
      const Q alone = Q(p[y] - both);
      if (alone > 0) emit(prefix, n_accepted, Q(mass * alone));
      prefix.pop_back();
    }
  }
};

StepLaw match_law(MatchMethod method) {
  return [method](const RowAt& target, const RowAt& draft, int gamma, int previous,
                  const EmitLeaf& emit) {
    MatchWalk walk{target, draft, gamma, method, emit, {}};
    walk.walk(0, previous, Q(1));
  };
}

void validate_typical(const TypicalMethod& method) {
  validate_typical_params(method.epsilon, method.delta);
}

// docs/verifiers.md V4: accept the longest run of passes; the token after it comes from the target
// row at that position (p_{n+1}; the bonus row when all γ pass). No residual: V4 is lossy.
StepLaw typical_law(const TypicalMethod& method) {
  return [method](const RowAt& target, const RowAt& draft, int gamma, int previous,
                  const EmitLeaf& emit) {
    Sequence prefix;
    std::function<void(int, int, const Q&)> walk = [&](int i, int before, const Q& mass) {
      const Row& probs_target = target(i, before);
      const auto emit_from_target = [&](const Q& weight) {
        for (size_t a = 0; a < probs_target.size(); ++a) {
          if (probs_target[a] == 0) continue;
          prefix.push_back(static_cast<int>(a));
          emit(prefix, i, Q(weight * probs_target[a]));
          prefix.pop_back();
        }
      };
      if (i == gamma) {
        emit_from_target(mass);
        return;
      }
      const Row& probs_draft = draft(i, before);
      Q fail = 0;
      for (size_t x = 0; x < probs_draft.size(); ++x) {
        if (probs_draft[x] == 0) continue;
        const int token = static_cast<int>(x);
        if (!typical_passes(probs_target, token, method)) {
          fail += probs_draft[x];
          continue;
        }
        prefix.push_back(token);
        walk(i + 1, token, Q(mass * probs_draft[x]));
        prefix.pop_back();
      }
      if (fail > 0) emit_from_target(Q(mass * fail));
    };
    walk(0, previous, Q(1));
  };
}

// docs/verifiers.md V5 with every draft block x_1..x_γ enumerated (drafts are drawn before
// verification, and τ depends on the whole block). Given the block, P(τ = i) = h_i·Π_{j>i}(1 − h_j)
// with h_0 = 1, because η_1..η_γ are independent and τ is the largest i with η_i ≤ h_i.
void enumerate_block_branches(const RowAt& target, const RowAt& draft, int gamma, int previous,
                              const EmitLeaf& emit) {
  Sequence block;
  const auto finish = [&](const Q& block_probability) {
    // before[i] is the token before position i+1 (0-based i): previous, x_1, ..., x_γ.
    std::vector<int> before{previous};
    before.insert(before.end(), block.begin(), block.end());
    std::vector<Q> w(gamma + 1), h(gamma + 1);
    w[0] = 1;
    h[0] = 1;
    for (int i = 1; i <= gamma; ++i) {
      const Row& p = target(i - 1, before[i - 1]);
      const Row& q = draft(i - 1, before[i - 1]);
      const int x = block[i - 1];
      w[i] = std::min(Q(1), Q(w[i - 1] * p[x] / q[x]));  // q(x) > 0: x was drafted
    }
    for (int i = 1; i < gamma; ++i) {
      const Row& p = target(i, before[i]);
      const Row& q = draft(i, before[i]);
      Q z = 0;
      for (size_t a = 0; a < p.size(); ++a) z += std::max(Q(0), Q(w[i] * p[a] - q[a]));
      const Q denominator = z + 1 - w[i];
      h[i] = denominator == 0 ? Q(1) : Q(z / denominator);
    }
    if (gamma > 0) h[gamma] = w[gamma];
    Q later_fail = 1;  // Π_{j>τ} (1 − h_j)
    for (int tau = gamma; tau >= 0; --tau) {
      const Q p_tau = block_probability * h[tau] * later_fail;
      later_fail *= 1 - h[tau];
      if (p_tau == 0) continue;
      const Row& p = target(tau, before[tau]);
      Row row(p.size());
      if (tau == gamma) {
        row = p;
      } else {
        const Row& q = draft(tau, before[tau]);
        Q mass = 0;
        for (size_t a = 0; a < p.size(); ++a) {
          row[a] = std::max(Q(0), Q(w[tau] * p[a] - q[a]));
          mass += row[a];
        }
        // P(τ = i) > 0 for i < γ needs h_i > 0, i.e. Z_i > 0 (the case Z_i = 0, w_i = 1 forces
        // p_{i+1} = q_{i+1}, hence h_{i+1} = 1 and P(τ = i) = 0).
        if (mass == 0) throw Error("exact: block residual has zero mass at a reachable τ");
        for (Q& value : row) value /= mass;
      }
      Sequence emitted(block.begin(), block.begin() + tau);
      for (size_t a = 0; a < row.size(); ++a) {
        if (row[a] == 0) continue;
        emitted.push_back(static_cast<int>(a));
        emit(emitted, tau, Q(p_tau * row[a]));
        emitted.pop_back();
      }
    }
  };
  std::function<void(int, int, const Q&)> draw = [&](int i, int before, const Q& mass) {
    if (i == gamma) {
      finish(mass);
      return;
    }
    const Row& q = draft(i, before);
    for (size_t x = 0; x < q.size(); ++x) {
      if (q[x] == 0) continue;
      block.push_back(static_cast<int>(x));
      draw(i + 1, static_cast<int>(x), Q(mass * q[x]));
      block.pop_back();
    }
  };
  draw(0, previous, Q(1));
}

void check_length(int vocab, int length) {
  if (length < 1 || length > kMaxLength) {
    throw InvalidInput(
        fmt::format("length is {}; expected 1 ≤ L ≤ {} for exact enumeration", length, kMaxLength));
  }
  long long sequences = 1;
  for (int i = 0; i < length; ++i) sequences *= vocab;
  if (sequences > kMaxSequences) {
    throw InvalidInput(fmt::format("V^L = {}^{} = {}; expected at most {} sequences", vocab, length,
                                   sequences, kMaxSequences));
  }
}

void check_start(int start, int vocab) {
  if (start < 0 || start >= vocab) {
    throw InvalidInput(fmt::format("start token is {}; expected in [0, {})", start, vocab));
  }
}

bool all_digits(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

// GMP reads a leading 0 as octal ("025" is 21), so decimal digit strings lose their leading zeros
// before conversion.
mpz_int decimal_integer(std::string_view digits) {
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits.empty() ? mpz_int(0) : mpz_int(std::string(digits));
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

StepResult enumerate_step_with(const std::vector<Row>& probs_target,
                               const std::vector<Row>& probs_draft, const StepLaw& law) {
  const int gamma = static_cast<int>(probs_draft.size());
  validate_gamma(gamma);
  if (static_cast<int>(probs_target.size()) != gamma + 1) {
    throw InvalidInput(fmt::format(
        "probs_target has {} rows; expected γ+1 = {} (p_1..p_{{γ+1}}, one per draft row plus the "
        "bonus)",
        probs_target.size(), gamma + 1));
  }
  const int vocab = static_cast<int>(probs_target[0].size());
  validate_vocab(vocab, "probs_target row 0");
  for (int i = 0; i <= gamma; ++i) {
    validate_row(probs_target[i], vocab, "probs_target", i, fmt::format("position {}", i + 1));
  }
  for (int i = 0; i < gamma; ++i) {
    validate_row(probs_draft[i], vocab, "probs_draft", i, fmt::format("position {}", i + 1));
  }

  StepResult result;
  result.vocab = vocab;
  result.gamma = gamma;
  result.accepted_length.assign(gamma + 1, Q(0));
  const RowAt target = [&](int i, int) -> const Row& { return probs_target[i]; };
  const RowAt draft = [&](int i, int) -> const Row& { return probs_draft[i]; };
  // The token before position 1 is irrelevant for context-free rows.
  law(target, draft, gamma, /*previous=*/0,
      [&](const Sequence& emitted, int n_accepted, const Q& probability) {
        result.distribution[emitted] += probability;
        result.accepted_length[n_accepted] += probability;
      });

  result.first_token_marginal.assign(vocab, Q(0));
  for (const auto& [emitted, probability] : result.distribution) {
    result.first_token_marginal[emitted.front()] += probability;
  }
  std::vector<Q>& marginal = result.position_acceptance_marginal;
  marginal.assign(gamma, Q(0));
  result.expected_accepted = 0;
  for (int k = 0; k <= gamma; ++k) {
    result.expected_accepted += k * result.accepted_length[k];
    for (int i = 0; i < k; ++i) marginal[i] += result.accepted_length[k];
  }
  result.position_acceptance_conditional.assign(gamma, std::nullopt);
  for (int i = 0; i < gamma; ++i) {
    const Q reached = i == 0 ? Q(1) : marginal[i - 1];
    if (reached != 0) result.position_acceptance_conditional[i] = Q(marginal[i] / reached);
  }
  result.expected_emitted = result.expected_accepted + 1;
  return result;
}

StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          const Method& method) {
  validate_method(method);
  return enumerate_step_with(probs_target, probs_draft, chain_law(method));
}

StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          const BlockMethod&) {
  return enumerate_step_with(probs_target, probs_draft, &enumerate_block_branches);
}

StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          MatchMethod method) {
  return enumerate_step_with(probs_target, probs_draft, match_law(method));
}

StepResult enumerate_step(const std::vector<Row>& probs_target, const std::vector<Row>& probs_draft,
                          const TypicalMethod& method) {
  validate_typical(method);
  return enumerate_step_with(probs_target, probs_draft, typical_law(method));
}

bool typical_passes(const Row& probs_target, int x, const TypicalMethod& method) {
  validate_typical(method);
  // docs/verifiers.md V4, in double: H = −Σ p ln(p + 1e-5), threshold min(ε, δ·exp(−H)), strict
  // pass.
  double entropy = 0.0;
  for (const Q& value : probs_target) {
    const double p = value.convert_to<double>();
    entropy -= p * std::log(p + 1e-5);
  }
  const double threshold = std::min(method.epsilon, method.delta * std::exp(-entropy));
  return probs_target[x].convert_to<double>() > threshold;
}

Row one_hot_argmax(const Row& row) {
  if (row.empty()) throw InvalidInput("one_hot_argmax: row is empty; expected V ≥ 1 entries");
  Row hot(row.size(), Q(0));
  hot[argmax(row)] = 1;
  return hot;
}

Q coupled_agreement_at(const Row& p, const Row& q, int y) {
  if (p[y] == 0 || q[y] == 0) return 0;
  // Both exponential races pick y iff E_u > E_y·max(p_u/p_y, q_u/q_y) for every u ≠ y; given
  // E_y = e that has probability Π_u exp(−e·m_u), and ∫ exp(−e) Π_u exp(−e·m_u) de = 1 / S.
  Q s = 0;
  for (size_t u = 0; u < p.size(); ++u) s += std::max(Q(p[u] / p[y]), Q(q[u] / q[y]));
  return Q(1 / s);
}

Q coupled_agreement(const Row& p, const Row& q) {
  Q total = 0;
  for (size_t y = 0; y < p.size(); ++y) total += coupled_agreement_at(p, q, static_cast<int>(y));
  return total;
}

Q coupled_agreement_bound(const Row& p, const Row& q) {
  Q overlap = 0;
  for (size_t y = 0; y < p.size(); ++y) overlap += std::min(p[y], q[y]);
  const Q tv = 1 - overlap;
  return Q((1 - tv) / (1 + tv));
}

Q sampled_match_agreement(const Row& p, const Row& q) {
  Q total = 0;
  for (size_t y = 0; y < p.size(); ++y) total += p[y] * q[y];
  return total;
}

std::optional<std::string> find_conditional_violation(const StepResult& step,
                                                      const std::vector<Row>& expected_rows) {
  if (static_cast<int>(expected_rows.size()) != step.gamma + 1) {
    throw InvalidInput(fmt::format("expected_rows has {} rows; expected γ+1 = {}",
                                   expected_rows.size(), step.gamma + 1));
  }
  for (int j = 1; j <= step.gamma + 1; ++j) {
    const Row& expected = expected_rows[j - 1];
    if (static_cast<int>(expected.size()) != step.vocab) {
      throw InvalidInput(fmt::format("expected_rows row {} has {} entries; expected V = {}", j - 1,
                                     expected.size(), step.vocab));
    }
    // A sequence longer than j−1 tokens means its first j−1 tokens were accepted drafts; its j-th
    // token is the next emitted token (accepted draft, residual or bonus).
    std::map<Sequence, Row> next_given_prefix;
    for (const auto& [emitted, probability] : step.distribution) {
      if (static_cast<int>(emitted.size()) < j) continue;
      const Sequence prefix(emitted.begin(), emitted.begin() + (j - 1));
      Row& next = next_given_prefix.try_emplace(prefix, Row(step.vocab, Q(0))).first->second;
      next[emitted[j - 1]] += probability;
    }
    for (const auto& [prefix, next] : next_given_prefix) {
      Q total = 0;
      for (const Q& value : next) total += value;
      for (int a = 0; a < step.vocab; ++a) {
        const Q conditional = next[a] / total;
        if (conditional != expected[a]) {
          return fmt::format(
              "after accepted prefix [{}] (probability {}), P(token {} at position {}) = {}; "
              "expected {}",
              sequence_key(prefix), to_fraction_string(total), a, j,
              to_fraction_string(conditional), to_fraction_string(expected[a]));
        }
      }
    }
  }
  return std::nullopt;
}

Distribution enumerate_stream_with(const MarkovChain& target, const MarkovChain& draft, int start,
                                   int gamma, int length, const StepLaw& law, bool cap_gamma) {
  validate_chain(target, "target chain");
  validate_chain(draft, "draft chain");
  if (draft.vocab != target.vocab) {
    throw InvalidInput(fmt::format("draft chain has V = {}; expected the target chain's V = {}",
                                   draft.vocab, target.vocab));
  }
  check_start(start, target.vocab);
  validate_gamma(gamma);
  check_length(target.vocab, length);

  // Markov rows: p_i and q_i depend only on the token before position i.
  const RowAt target_at = [&](int, int previous) -> const Row& {
    return target.transition[previous];
  };
  const RowAt draft_at = [&](int, int previous) -> const Row& {
    return draft.transition[previous];
  };
  return enumerate_steps(start, length, [&](int last, int produced, const EmitStep& emit) {
    const int step_gamma = cap_gamma ? std::min(gamma, length - produced - 1) : gamma;
    law(target_at, draft_at, step_gamma, last,
        [&](const Sequence& emitted, int, const Q& probability) { emit(emitted, probability); });
  });
}

Distribution enumerate_steps(int start, int length, const StreamStep& step) {
  // Equal partial outputs merge, so the frontier stays below V^L.
  Distribution frontier{{Sequence{}, Q(1)}};
  Distribution complete;
  while (!frontier.empty()) {
    Distribution next;
    for (const auto& [output, reach] : frontier) {
      const int last = output.empty() ? start : output.back();
      step(last, static_cast<int>(output.size()), [&](const Sequence& emitted, const Q& probability) {
        Sequence extended = output;
        extended.insert(extended.end(), emitted.begin(), emitted.end());
        const Q joint = reach * probability;
        if (static_cast<int>(extended.size()) >= length) {
          extended.resize(length);
          complete[extended] += joint;
        } else {
          next[extended] += joint;
        }
      });
    }
    frontier = std::move(next);
  }
  return complete;
}

Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, const Method& method, bool cap_gamma) {
  validate_method(method);
  return enumerate_stream_with(target, draft, start, gamma, length, chain_law(method), cap_gamma);
}

Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, const BlockMethod&, bool cap_gamma) {
  return enumerate_stream_with(target, draft, start, gamma, length, &enumerate_block_branches,
                               cap_gamma);
}

Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, MatchMethod method, bool cap_gamma) {
  return enumerate_stream_with(target, draft, start, gamma, length, match_law(method), cap_gamma);
}

Distribution enumerate_stream(const MarkovChain& target, const MarkovChain& draft, int start,
                              int gamma, int length, const TypicalMethod& method, bool cap_gamma) {
  validate_typical(method);
  return enumerate_stream_with(target, draft, start, gamma, length, typical_law(method), cap_gamma);
}

Distribution chain_distribution(const MarkovChain& chain, int start, int length) {
  validate_chain(chain, "chain");
  check_start(start, chain.vocab);
  check_length(chain.vocab, length);
  Distribution current{{Sequence{}, Q(1)}};
  for (int step = 0; step < length; ++step) {
    Distribution next;
    for (const auto& [output, probability] : current) {
      const Row& row = chain.transition[output.empty() ? start : output.back()];
      for (int a = 0; a < chain.vocab; ++a) {
        if (row[a] == 0) continue;
        Sequence extended = output;
        extended.push_back(a);
        next[extended] += probability * row[a];
      }
    }
    current = std::move(next);
  }
  return current;
}

Sequence greedy_chain(const MarkovChain& chain, int start, int length) {
  validate_chain(chain, "chain");
  check_start(start, chain.vocab);
  check_length(chain.vocab, length);
  Sequence output;
  int previous = start;
  for (int step = 0; step < length; ++step) {
    previous = argmax(chain.transition[previous]);
    output.push_back(previous);
  }
  return output;
}

Q parse_rational(std::string_view text, std::string_view argument) {
  const std::string_view original = text;
  const auto fail = [&]() -> InvalidInput {
    return InvalidInput(fmt::format(
        "{}: cannot read '{}' as an exact rational; expected a fraction (1/3), an integer (2) or a "
        "decimal (0.25)",
        argument, original));
  };
  text = trim(text);
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) throw fail();
  Q value;
  if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
    const std::string_view numerator = text.substr(0, slash);
    const std::string_view denominator = text.substr(slash + 1);
    if (numerator.empty() || denominator.empty() || !all_digits(numerator) ||
        !all_digits(denominator)) {
      throw fail();
    }
    const mpz_int den = decimal_integer(denominator);
    if (den == 0) {
      throw InvalidInput(fmt::format("{}: '{}' has denominator 0; expected a positive denominator",
                                     argument, original));
    }
    value = Q(decimal_integer(numerator)) / Q(den);
  } else {
    const size_t dot = text.find('.');
    const std::string_view whole = text.substr(0, dot);
    const std::string_view fraction =
        dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
    if ((whole.empty() && fraction.empty()) || !all_digits(whole) || !all_digits(fraction)) {
      throw fail();
    }
    // "0.25" is 25/100 exactly: the digits are read as an integer, never as a double.
    const std::string digits = std::string(whole) + std::string(fraction);
    mpz_int scale = 1;
    for (size_t i = 0; i < fraction.size(); ++i) scale *= 10;
    value = Q(decimal_integer(digits)) / Q(scale);
  }
  return negative ? Q(-value) : value;
}

Row parse_rational_row(std::string_view text, std::string_view argument) {
  Row row;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string_view entry = text.substr(begin, comma - begin);
    if (trim(entry).empty()) {
      throw InvalidInput(fmt::format(
          "{}: entry {} of '{}' is empty; expected comma-separated rationals such as 1/3,2/3",
          argument, row.size(), text));
    }
    row.push_back(parse_rational(entry, argument));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return row;
}

std::string to_fraction_string(const Q& value) {
  return boost::multiprecision::numerator(value).str() + "/" +
         boost::multiprecision::denominator(value).str();
}

std::string sequence_key(const Sequence& sequence) {
  return fmt::format("{}", fmt::join(sequence, ","));
}

}  // namespace speclab::exact
