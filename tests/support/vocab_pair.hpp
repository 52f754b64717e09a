// A toy pair of vocabularies for the engine of core/decode/decode_vocab.hpp: a target over six
// strings of 'a' and 'b' with several segmentations ("ab" is "a"+"b"; "bb" is a prefix of "bba" but
// no token, so a proposal can fail), and a draft that writes single bytes 'a', 'b' and 'c' (no
// target token holds 'c', so the intersection has mass below 1 wherever the draft writes it).
#pragma once

#include <string>
#include <vector>

#include "core/decode/decode_vocab.hpp"
#include "core/exact/exact.hpp"
#include "core/models/markov.hpp"

namespace speclab::testing {

inline const std::vector<std::string>& toy_target_strings() {
  static const std::vector<std::string> strings = {"a", "b", "ab", "ba", "abb", "bba"};
  return strings;
}
inline const std::vector<std::string>& toy_draft_strings() {
  static const std::vector<std::string> strings = {"a", "b", "c"};
  return strings;
}

/// Integer weights of the target's order-1 chain over the six tokens (zeros included).
inline const std::vector<std::vector<int>>& toy_target_weights() {
  static const std::vector<std::vector<int>> w = {{1, 2, 3, 0, 2, 1}, {2, 1, 1, 1, 0, 3},
                                                  {0, 3, 1, 2, 1, 1}, {3, 1, 0, 1, 2, 1},
                                                  {1, 1, 2, 2, 1, 0}, {2, 0, 1, 3, 1, 1}};
  return w;
}
/// The draft's order-2 chain over 'a', 'b', 'c' (row = 3·x_{-2} + x_{-1}).
inline const std::vector<std::vector<int>>& toy_draft_weights() {
  static const std::vector<std::vector<int>> w = {{1, 3, 1}, {2, 1, 0}, {1, 1, 1},
                                                  {3, 1, 1}, {1, 2, 1}, {0, 2, 1},
                                                  {2, 2, 1}, {1, 0, 1}, {1, 1, 0}};
  return w;
}

inline std::vector<double> normalised_table(const std::vector<std::vector<int>>& weights) {
  std::vector<double> table;
  for (const auto& row : weights) {
    double total = 0.0;
    for (const int w : row) total += w;
    for (const int w : row) table.push_back(w / total);
  }
  return table;
}

inline MarkovModel toy_target_model() {
  return MarkovModel("toy-target", 6, 1, normalised_table(toy_target_weights()));
}
inline MarkovModel toy_draft_model() {
  return MarkovModel("toy-draft", 3, 2, normalised_table(toy_draft_weights()));
}

/// The target chain at temperature 1/`power` in rationals: weights raised to `power`.
inline exact::MarkovChain toy_target_chain(int power = 1) {
  exact::MarkovChain chain{6, {}};
  for (const auto& row : toy_target_weights()) {
    exact::Row r;
    exact::Q total = 0;
    for (const int w : row) {
      exact::Q x = 1;
      for (int k = 0; k < power; ++k) x *= w;
      r.push_back(x);
      total += x;
    }
    for (auto& x : r) x /= total;
    chain.transition.push_back(r);
  }
  return chain;
}

inline std::shared_ptr<const VocabBridge> toy_bridge() {
  return make_vocab_bridge(raw_vocabulary("toy-target", toy_target_strings()),
                           raw_vocabulary("toy-draft", toy_draft_strings()));
}

}  // namespace speclab::testing
