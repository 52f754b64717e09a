// A generated engine setup for the decode properties: a context-dependent Markov pair, a seed, γ
// and a registry verifier; each property sets the sampling it is about.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/decode/decode.hpp"
#include "core/verify/verifier.hpp"
#include "tests/support/markov_models.hpp"

namespace speclab::testing {

struct MarkovEngine {
  MarkovModel target, draft;
  DecodeConfig config;
};

/// An order-2 target and an order-1 draft over `vocab` tokens (`eos` ends a request), a random
/// seed, max_new_tokens in [1, max_tokens], γ in [1, 4] and the verifier `name` (a tree one with
/// branching {2, 2}, {3, 1, 2} or {1, 3}); "plain" leaves the verifier unset. Inside a property.
inline MarkovEngine gen_markov_engine(const std::string& name, int64_t vocab, int32_t eos,
                                      int64_t max_tokens) {
  const auto model_seed = *rc::gen::arbitrary<uint64_t>();
  MarkovEngine s{random_markov("target", vocab, 2, model_seed, eos),
                 random_markov("draft", vocab, 1, model_seed + 1, eos),
                 {}};
  DecodeConfig& c = s.config;
  c.seed = *rc::gen::arbitrary<uint64_t>();
  c.max_new_tokens = *rc::gen::inRange<int64_t>(1, max_tokens + 1);
  c.gamma = *rc::gen::inRange<int64_t>(1, 5);
  if (name != "plain") {
    const bool tree = verifier_entry(name).uses_branches;
    c.verifier = make_verifier(
        name, tree ? *rc::gen::element(std::vector<int64_t>{2, 2}, std::vector<int64_t>{3, 1, 2},
                                       std::vector<int64_t>{1, 3})
                   : std::vector<int64_t>{});
  }
  return s;
}

/// A registry verifier's name as a test-name suffix ("tree-iid" → "tree_iid").
inline std::string verifier_param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string id = info.param;
  std::replace(id.begin(), id.end(), '-', '_');
  return id;
}

}  // namespace speclab::testing
