// Random table models for engine tests: integer weights give exactly known rows.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/models/markov.hpp"

namespace speclab::testing {

/// A random order-`order` table over V tokens; each row has integer weights 0..4 (at least one
/// positive), so some transitions are impossible.
inline std::vector<double> random_table(int64_t vocab, int64_t order, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> weight(0, 4);
  int64_t rows = 1;
  for (int64_t k = 0; k < order; ++k) rows *= vocab;
  std::vector<double> table(rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0.0;
    for (int64_t t = 0; t < vocab; ++t) total += (table[r * vocab + t] = weight(rng));
    if (total == 0.0) table[r * vocab + (r % vocab)] = total = 1.0;
    for (int64_t t = 0; t < vocab; ++t) table[r * vocab + t] /= total;
  }
  return table;
}

inline MarkovModel random_markov(const char* name, int64_t vocab, int64_t order, uint64_t seed,
                                 int32_t eos = -1) {
  return MarkovModel(name, vocab, order, random_table(vocab, order, seed), eos);
}

}  // namespace speclab::testing
