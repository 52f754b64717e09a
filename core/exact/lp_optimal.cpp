// The multi-draft optimum as an exact LP (docs/verifiers.md "The multi-draft optimum"): a dense
// tableau simplex on GMP rationals. Independent of the verifiers and of the enumerators.
#include "core/exact/lp_optimal.hpp"

#include <fmt/format.h>

#include "core/base/error.hpp"

namespace speclab::exact {

LpSolution maximize(const LinearProgram& program) {
  const size_t m = program.a.size();
  const size_t n = program.c.size();
  if (program.b.size() != m) {
    throw InvalidInput(
        fmt::format("LP: b has {} entries; expected {} (rows of a)", program.b.size(), m));
  }
  for (size_t i = 0; i < m; ++i) {
    if (program.a[i].size() != n) {
      throw InvalidInput(fmt::format("LP: row {} of a has {} entries; expected {} (entries of c)",
                                     i, program.a[i].size(), n));
    }
    if (program.b[i] < 0) {
      throw InvalidInput(fmt::format("LP: b[{}] is {}; expected ≥ 0 (x = 0 must be feasible)", i,
                                     to_fraction_string(program.b[i])));
    }
  }
  // Tableau over the n structural columns and m slacks; basis[i] is row i's basic column.
  const size_t columns = n + m;
  std::vector<Row> t(m, Row(columns));
  Row rhs = program.b;
  std::vector<size_t> basis(m);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = 0; j < n; ++j) t[i][j] = program.a[i][j];
    t[i][n + i] = 1;
    basis[i] = n + i;
  }
  Row reduced(columns);  // c_j − z_j; the program is optimal when none is positive
  for (size_t j = 0; j < n; ++j) reduced[j] = program.c[j];
  Q value = 0;
  int64_t pivots = 0;
  std::vector<size_t> support;  // the pivot row's non-zero columns
  for (;;) {
    size_t enter = columns;
    for (size_t j = 0; j < columns; ++j) {
      if (reduced[j] > 0) {
        enter = j;
        break;
      }
    }
    if (enter == columns) break;
    size_t leave = m;
    Q best_ratio;
    for (size_t i = 0; i < m; ++i) {
      if (t[i][enter] <= 0) continue;
      const Q ratio = rhs[i] / t[i][enter];
      if (leave == m || ratio < best_ratio || (ratio == best_ratio && basis[i] < basis[leave])) {
        leave = i;
        best_ratio = ratio;
      }
    }
    if (leave == m) throw Error(fmt::format("LP: unbounded in column {}", enter));
    Row& pivot_row = t[leave];
    const Q pivot = pivot_row[enter];
    support.clear();
    for (size_t j = 0; j < columns; ++j) {
      if (pivot_row[j] != 0) {
        pivot_row[j] /= pivot;
        support.push_back(j);
      }
    }
    rhs[leave] /= pivot;
    for (size_t i = 0; i < m; ++i) {
      if (i == leave || t[i][enter] == 0) continue;
      const Q factor = t[i][enter];
      for (size_t j : support) t[i][j] -= factor * pivot_row[j];
      rhs[i] -= factor * rhs[leave];
    }
    const Q factor = reduced[enter];
    for (size_t j : support) reduced[j] -= factor * pivot_row[j];
    value += factor * rhs[leave];
    basis[leave] = enter;
    ++pivots;
  }
  LpSolution solution{value, Row(n), pivots};
  for (size_t i = 0; i < m; ++i) {
    if (basis[i] < n) solution.x[basis[i]] = rhs[i];
  }
  return solution;
}

MultiDraftOptimum multidraft_optimum(const Row& probs_target, const Row& probs_draft, int drafts) {
  const int vocab = static_cast<int>(probs_target.size());
  if (vocab < 1 || vocab > kLpMaxVocab) {
    throw InvalidInput(fmt::format(
        "lp-optimal: the target has V = {}; expected 1 ≤ V ≤ {} (the LP has a variable per "
        "drafted token set and token)",
        vocab, kLpMaxVocab));
  }
  if (drafts < 1 || drafts > kLpMaxDrafts) {
    throw InvalidInput(
        fmt::format("lp-optimal: k = {} drafts; expected 1 ≤ k ≤ {} (the drafts' law has V^k "
                    "tuples)",
                    drafts, kLpMaxDrafts));
  }
  validate_row(probs_target, vocab, "lp-optimal target", 0, "the target row");
  validate_row(probs_draft, vocab, "lp-optimal draft", 0, "the draft row");

  MultiDraftOptimum result;
  result.vocab = vocab;
  result.drafts = drafts;
  // P(set of distinct drafts = S), summed over the V^k ordered tuples of i.i.d. draws.
  std::vector<int> tuple(drafts, 0);
  for (;;) {
    Q probability = 1;
    uint32_t set = 0;
    for (int x : tuple) {
      probability *= probs_draft[x];
      set |= 1u << x;
    }
    if (probability > 0) result.set_probability[set] += probability;
    int i = 0;
    while (i < drafts && ++tuple[i] == vocab) tuple[i++] = 0;
    if (i == drafts) break;
  }

  // Variables π(S, y) for y ∈ S with p(y) > 0; rows: one per set, then one per token.
  struct Variable {
    uint32_t set;
    int token;
  };
  std::vector<Variable> variables;
  for (const auto& [set, probability] : result.set_probability) {
    for (int y = 0; y < vocab; ++y) {
      if ((set >> y & 1u) && probs_target[y] > 0) variables.push_back({set, y});
    }
  }
  LinearProgram program;
  const size_t sets = result.set_probability.size();
  program.a.assign(sets + vocab, Row(variables.size()));
  program.c.assign(variables.size(), Q(1));
  size_t row = 0;
  std::map<uint32_t, size_t> set_row;
  for (const auto& [set, probability] : result.set_probability) {
    set_row[set] = row++;
    program.b.push_back(probability);
  }
  for (int y = 0; y < vocab; ++y) program.b.push_back(probs_target[y]);
  for (size_t v = 0; v < variables.size(); ++v) {
    program.a[set_row[variables[v].set]][v] = 1;
    program.a[sets + variables[v].token][v] = 1;
  }
  const LpSolution solution = maximize(program);
  result.acceptance = solution.value;
  for (const auto& entry : result.set_probability) result.flow[entry.first] = Row(vocab);
  for (size_t v = 0; v < variables.size(); ++v) {
    result.flow[variables[v].set][variables[v].token] = solution.x[v];
  }
  result.variables = static_cast<int64_t>(variables.size());
  result.constraints = static_cast<int64_t>(program.b.size());
  result.pivots = solution.pivots;
  return result;
}

}  // namespace speclab::exact
