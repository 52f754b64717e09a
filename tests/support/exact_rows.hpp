// Generated exact rows and Markov chains for the rational property tests of core/exact.
#pragma once

#include <rapidcheck.h>

#include <numeric>
#include <vector>

#include "core/exact/exact.hpp"

namespace speclab::testing {

/// Integer weights 0..4 (zeros included, not all zero) normalised exactly: exact rationals, and
/// the zeros exercise tokens the draft never proposes or the target forbids.
inline rc::Gen<exact::Row> gen_exact_row(int vocab) {
  return rc::gen::map(
      rc::gen::suchThat(rc::gen::container<std::vector<int>>(vocab, rc::gen::inRange(0, 5)),
                        [](const std::vector<int>& weights) {
                          return std::accumulate(weights.begin(), weights.end(), 0) > 0;
                        }),
      [](const std::vector<int>& weights) {
        const int total = std::accumulate(weights.begin(), weights.end(), 0);
        exact::Row row;
        for (int w : weights) row.push_back(exact::Q(w) / total);
        return row;
      });
}

/// `count` generated rows of one vocabulary (inside a property).
inline std::vector<exact::Row> gen_exact_rows(int count, int vocab) {
  std::vector<exact::Row> rows;
  for (int i = 0; i < count; ++i) rows.push_back(*gen_exact_row(vocab));
  return rows;
}

/// A generated first-order Markov chain (inside a property).
inline exact::MarkovChain gen_exact_chain(int vocab) {
  return exact::MarkovChain{vocab, gen_exact_rows(vocab, vocab)};
}

}  // namespace speclab::testing
