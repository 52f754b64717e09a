// The compiled half of the `speclab` Python package (python/speclab/): the verifiers of
// core/verify (docs/verifiers.md), the sampling pipeline, the exact enumerators of core/exact and
// the statistics of core/stats, over arrays borrowed from Python without copying. The argument
// handling users see (dtype conversion, shape checks, docstrings) is in python/speclab/*.py; this
// file takes C-contiguous arrays of exactly the right dtype and refuses anything else.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/exact/exact.hpp"
#include "core/exact/exact_step.hpp"
#include "core/exact/exact_tree.hpp"
#include "core/sampling/sampling.hpp"
#include "core/stats/stats.hpp"
#include "core/verify/verifier.hpp"
#include "core/verify/verify_block.hpp"
#include "core/verify/verify_chain.hpp"
#include "core/verify/verify_match.hpp"
#include "core/verify/verify_tree.hpp"
#include "core/verify/verify_typical.hpp"

namespace py = pybind11;

namespace speclab::python {
namespace {

// A view of a C-contiguous array of exactly T, or an empty span for None. Refuses (InvalidInput,
// which Python sees as ValueError) rather than converts, so no call copies behind the caller.
template <typename T>
std::span<const T> borrow(const std::optional<py::array>& array, const char* name) {
  if (!array) return {};
  if (!array->dtype().is(py::dtype::of<T>())) {
    throw InvalidInput(std::string(name) + " has dtype " +
                       py::str(array->dtype()).cast<std::string>() + "; expected " +
                       py::str(py::dtype::of<T>()).cast<std::string>());
  }
  if (!(array->flags() & py::array::c_style)) {
    throw InvalidInput(std::string(name) + " is not C-contiguous; expected a row-major array");
  }
  return {static_cast<const T*>(array->data()), static_cast<size_t>(array->size())};
}

// Hands a vector to numpy without a copy: the array owns it through a capsule.
template <typename T>
py::array_t<T> give(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), free_when_done);
}

// The members ChainBatch and TreeBatch share: sizes, the two probability arrays, request ids.
template <typename Batch>
void borrow_common(Batch& b, int64_t batch, int64_t vocab,
                   const std::optional<py::array>& probs_target,
                   const std::optional<py::array>& probs_draft,
                   const std::optional<py::array>& request_ids) {
  b.batch = batch;
  b.vocab = vocab;
  b.probs_target = borrow<float>(probs_target, "probs_target");
  b.probs_draft = borrow<float>(probs_draft, "probs_draft");
  b.request_ids = borrow<uint32_t>(request_ids, "request_ids");
}

ChainBatch chain_batch(int64_t batch, int64_t gamma, int64_t vocab,
                       const std::optional<py::array>& probs_target,
                       const std::optional<py::array>& probs_draft,
                       const std::optional<py::array>& draft_tokens,
                       const std::optional<py::array>& n_draft,
                       const std::optional<py::array>& request_ids,
                       const std::optional<py::array>& positions = std::nullopt) {
  ChainBatch b;
  borrow_common(b, batch, vocab, probs_target, probs_draft, request_ids);
  b.gamma = gamma;
  b.draft_tokens = borrow<int32_t>(draft_tokens, "draft_tokens");
  b.n_draft = borrow<int32_t>(n_draft, "n_draft");
  b.positions = borrow<int64_t>(positions, "positions");
  return b;
}

py::dict chain_result(ChainResult&& r) {
  const py::ssize_t b = r.batch, g = r.gamma;
  py::dict out;
  out["emitted_tokens"] = give(std::move(r.emitted_tokens), {b, g + 1});
  out["n_accepted"] = give(std::move(r.n_accepted), {b});
  out["accept_mask"] = give(std::move(r.accept_mask), {b, g});
  out["residual_fallback"] = give(std::move(r.residual_fallback), {b});
  out["residual_fallbacks"] = r.residual_fallbacks;
  out["lossy"] = r.lossy;
  return out;
}

// One call of the chain family: V1-V3, V4, V5 or V8 (coupled, sampled-match), by registry name.
// validate: check every row the batch uses first, as `speclab verify-batch` does (the fast path
// alone checks only the values it reads).
ChainResult run_chain(const VerifierSpec& spec, const ChainBatch& batch, uint64_t seed,
                      uint32_t step, bool reference, bool validate) {
  if (const auto* chain = std::get_if<ChainVerifier>(&spec); chain && validate && !reference) {
    validate_chain_batch(batch, ChainParams{chain->method, chain->leniency, seed, step});
  }
  return verify(spec, batch, seed, step, reference);
}

// sampling: the match verifiers' target rule ("inverse-cdf" or "gumbel"); empty for the others.
VerifierSpec chain_spec(const std::string& method, double leniency, double epsilon, double delta,
                        const std::string& sampling) {
  VerifierSpec spec = make_verifier(method);
  if (auto* chain = std::get_if<ChainVerifier>(&spec)) chain->leniency = leniency;
  if (auto* typical = std::get_if<TypicalVerifier>(&spec)) {
    typical->epsilon = epsilon;
    typical->delta = delta;
  }
  if (auto* match = std::get_if<MatchVerifier>(&spec); match && !sampling.empty()) {
    match->sampling = parse_token_sampling(sampling, "sampling");
  }
  return spec;
}

py::dict verify_chain_family(const std::string& method, int64_t batch, int64_t gamma, int64_t vocab,
                             std::optional<py::array> probs_target,
                             std::optional<py::array> probs_draft,
                             std::optional<py::array> draft_tokens,
                             std::optional<py::array> n_draft, std::optional<py::array> request_ids,
                             std::optional<py::array> positions, uint64_t seed, double leniency,
                             double epsilon, double delta, const std::string& sampling,
                             uint32_t step, bool reference, bool validate) {
  const VerifierSpec spec = chain_spec(method, leniency, epsilon, delta, sampling);
  const ChainBatch b = chain_batch(batch, gamma, vocab, probs_target, probs_draft, draft_tokens,
                                   n_draft, request_ids, positions);
  ChainResult result;
  {
    py::gil_scoped_release release;
    result = run_chain(spec, b, seed, step, reference, validate);
  }
  return chain_result(std::move(result));
}

// The C++ loop of the fast path on the same borrowed arrays: what a C++ caller pays per call.
double time_verify_chain(int64_t batch, int64_t gamma, int64_t vocab,
                         std::optional<py::array> probs_target,
                         std::optional<py::array> probs_draft,
                         std::optional<py::array> draft_tokens, uint64_t seed, int64_t repeats) {
  const ChainBatch b =
      chain_batch(batch, gamma, vocab, probs_target, probs_draft, draft_tokens, {}, {});
  py::gil_scoped_release release;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < repeats; ++i) {
    ChainParams params;
    params.seed = seed;
    params.step = static_cast<uint32_t>(i);
    volatile int32_t sink = verify_chain(b, params).n_accepted[0];
    (void)sink;
  }
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(repeats);
}

py::dict verify_tree_family(const std::string& method, int64_t batch, int64_t max_nodes,
                            int64_t vocab, std::optional<py::array> probs_target,
                            std::optional<py::array> probs_draft, std::optional<py::array> parents,
                            std::optional<py::array> tokens, std::optional<py::array> n_nodes,
                            std::optional<py::array> request_ids, uint64_t seed, uint32_t step) {
  TreeBatch b;
  borrow_common(b, batch, vocab, probs_target, probs_draft, request_ids);
  b.max_nodes = max_nodes;
  b.parents = borrow<int32_t>(parents, "parents");
  b.tokens = borrow<int32_t>(tokens, "tokens");
  b.n_nodes = borrow<int32_t>(n_nodes, "n_nodes");
  const TreeParams params{parse_tree_method(method), seed, step};
  TreeResult r;
  {
    py::gil_scoped_release release;
    r = verify_tree(b, params);
  }
  const py::ssize_t n = r.max_nodes;
  py::dict out;
  out["emitted_tokens"] = give(std::move(r.emitted_tokens), {batch, n + 1});
  out["accepted_nodes"] = give(std::move(r.accepted_nodes), {batch, n + 1});
  out["n_accepted"] = give(std::move(r.n_accepted), {batch});
  out["residual_fallback"] = give(std::move(r.residual_fallback), {batch});
  out["residual_fallbacks"] = r.residual_fallbacks;
  out["lossy"] = r.lossy;
  return out;
}

py::array_t<float> probs_from_logits_rows(std::optional<py::array> logits, int64_t vocab,
                                          double temperature, int64_t top_k, double top_p,
                                          double min_p) {
  const std::span<const float> in = borrow<float>(logits, "logits");
  const SamplingParams params{temperature, top_k, top_p, min_p};
  validate_sampling_params(params);
  std::vector<float> out(in.size());
  {
    py::gil_scoped_release release;
    for (size_t row = 0; row * vocab < in.size(); ++row) {
      probs_from_logits(in.subspan(row * vocab, vocab), params,
                        std::span<float>(out).subspan(row * vocab, vocab));
    }
  }
  return give(std::move(out), {static_cast<py::ssize_t>(in.size())});
}

// Plain decoding's token at each row's output position (sample_output_token): the token the
// match verifiers reproduce. rows [R, V] probability rows; requests, positions [R].
py::array_t<int32_t> sample_output_tokens(std::optional<py::array> rows, int64_t vocab,
                                          std::optional<py::array> requests,
                                          std::optional<py::array> positions,
                                          const std::string& sampling, uint64_t seed) {
  const std::span<const float> w = borrow<float>(rows, "weights");
  const std::span<const uint32_t> id = borrow<uint32_t>(requests, "request");
  const std::span<const int64_t> at = borrow<int64_t>(positions, "position");
  const TokenSampling rule = parse_token_sampling(sampling, "sampling");
  const size_t n = vocab > 0 ? w.size() / static_cast<size_t>(vocab) : 0;
  if (vocab < 1 || w.size() != n * static_cast<size_t>(vocab) || id.size() != n || at.size() != n) {
    throw InvalidInput("sample_output_tokens: weights, request and position disagree in size");
  }
  std::vector<int32_t> out(n);
  for (size_t r = 0; r < n; ++r) {
    const std::span<const float> row = w.subspan(r * vocab, vocab);
    validate_probability_row(row, {"weights", static_cast<int64_t>(r), id[r], at[r]});
    if (at[r] < 0 || at[r] > int64_t{std::numeric_limits<uint32_t>::max()}) {
      throw InvalidInput("position " + std::to_string(at[r]) + " (row " + std::to_string(r) +
                         "); expected an integer in [0, 2^32)");
    }
    out[r] = sample_output_token(row, rule, seed, id[r], static_cast<uint32_t>(at[r]));
  }
  return give(std::move(out), {static_cast<py::ssize_t>(n)});
}

std::string to_text(const exact::Q& q) { return q.str(); }

std::vector<exact::Row> rational_rows(const std::vector<std::vector<std::string>>& rows,
                                      const char* name) {
  std::vector<exact::Row> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    exact::Row row;
    for (const std::string& text : rows[i]) {
      row.push_back(exact::parse_rational(text, std::string(name) + " row " + std::to_string(i)));
    }
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<std::string> texts(const std::vector<exact::Q>& values) {
  std::vector<std::string> out;
  for (const exact::Q& q : values) out.push_back(to_text(q));
  return out;
}

// One step's exact law, every rational as "num/den" text (python/speclab/exact.py makes
// Fractions of them).
py::dict exact_step(const std::vector<std::vector<std::string>>& target,
                    const std::vector<std::vector<std::string>>& draft, const std::string& method,
                    const std::string& leniency, double epsilon, double delta, int branches) {
  const std::vector<exact::Row> p = rational_rows(target, "probs_target");
  const std::vector<exact::Row> q = rational_rows(draft, "probs_draft");
  const VerifierEntry& entry = verifier_entry(method, "method");
  const exact::StepResult step =
      exact::enumerate_step(entry,
                            {.leniency = exact::parse_rational(leniency, "leniency"),
                             .typical = exact::TypicalMethod{epsilon, delta},
                             .branches = branches},
                            p, q);
  py::dict distribution;
  for (const auto& [sequence, probability] : step.distribution) {
    distribution[py::tuple(py::cast(sequence))] = to_text(probability);
  }
  py::dict out;
  out["distribution"] = distribution;
  out["expected_accepted"] = to_text(step.expected_accepted);
  out["expected_emitted"] = to_text(step.expected_emitted);
  out["first_token_marginal"] = texts(step.first_token_marginal);
  out["position_acceptance_marginal"] = texts(step.position_acceptance_marginal);
  py::list conditional;
  for (const auto& value : step.position_acceptance_conditional) {
    conditional.append(value ? py::object(py::str(to_text(*value))) : py::object(py::none()));
  }
  out["position_acceptance_conditional"] = conditional;
  out["accepted_length"] = texts(step.accepted_length);
  out["lossy"] = entry.lossy;
  return out;
}

// The per-position acceptance of V1 and of the match verifiers for one target row p and one draft
// row q, exactly (python/speclab/exact.py acceptance).
py::dict exact_acceptance(const std::vector<std::string>& target,
                          const std::vector<std::string>& draft) {
  const exact::Row p = rational_rows({target}, "probs_target").front();
  const exact::Row q = rational_rows({draft}, "probs_draft").front();
  const int vocab = static_cast<int>(p.size());
  if (vocab < 1 || vocab > exact::kMaxVocab) {
    throw InvalidInput("probs_target has " + std::to_string(p.size()) +
                       " entries; expected 1 ≤ V ≤ " + std::to_string(exact::kMaxVocab));
  }
  exact::validate_row(p, vocab, "probs_target", 0, "the target row");
  exact::validate_row(q, vocab, "probs_draft", 0, "the draft row");
  exact::Q overlap = 0;
  for (int v = 0; v < vocab; ++v) overlap += std::min(p[v], q[v]);
  py::dict out;
  out["token"] = to_text(overlap);
  out["coupled"] = to_text(exact::coupled_agreement(p, q));
  out["coupled_bound"] = to_text(exact::coupled_agreement_bound(p, q));
  out["sampled-match"] = to_text(exact::sampled_match_agreement(p, q));
  return out;
}

py::list registry() {
  py::list out;
  for (const VerifierEntry& e : verifier_registry()) {
    py::dict row;
    row["name"] = std::string(e.name);
    row["label"] = std::string(e.label);
    static constexpr const char* kFamilies[] = {"chain", "block", "typical", "tree", "match"};
    row["family"] = kFamilies[static_cast<int>(e.family)];
    row["lossy"] = e.lossy;
    row["needs_draft_probs"] = e.needs_draft_probs;
    row["uses_branches"] = e.uses_branches;
    static constexpr const char* kVocabRules[] = {"shared", "intersection", "string-match",
                                                  "string-rejection"};
    row["vocab_rule"] = kVocabRules[static_cast<int>(e.vocab_rule)];
    py::list parameters;
    for (std::string_view key : e.parameters) parameters.append(std::string(key));
    row["parameters"] = parameters;
    row["summary"] = std::string(e.summary);
    out.append(row);
  }
  return out;
}

py::dict chi_square(const std::vector<int64_t>& observed, const std::vector<double>& probs,
                    double min_expected) {
  const ChiSquareResult r = chi_square_test(observed, probs, min_expected);
  py::dict out;
  out["statistic"] = r.statistic;
  out["dof"] = r.dof;
  out["bins"] = r.bins;
  out["p_value"] = r.p_value;
  out["n"] = r.n;
  out["impossible_category"] = r.impossible_category;
  return out;
}

}  // namespace
}  // namespace speclab::python

// The module's name: _speclab; the test build over the mutant library (python/CMakeLists.txt)
// names it _speclab_mutants.
#ifndef SPECLAB_EXT_MODULE
#define SPECLAB_EXT_MODULE _speclab
#endif

PYBIND11_MODULE(SPECLAB_EXT_MODULE, m) {
  namespace sp = speclab::python;
  using speclab::Error;
  using speclab::InvalidInput;
  m.doc() = "speclab's verifiers, exact laws and statistics (use the `speclab` package)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const InvalidInput& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
  m.def("verify_chain_family", &sp::verify_chain_family, py::arg("method"), py::arg("batch"),
        py::arg("gamma"), py::arg("vocab"), py::arg("probs_target").none(true),
        py::arg("probs_draft").none(true), py::arg("draft_tokens").none(true),
        py::arg("n_draft").none(true), py::arg("request_ids").none(true),
        py::arg("positions").none(true), py::arg("seed"), py::arg("leniency"), py::arg("epsilon"),
        py::arg("delta"), py::arg("sampling"), py::arg("step"), py::arg("reference"),
        py::arg("validate"));
  m.def("time_verify_chain", &sp::time_verify_chain, py::arg("batch"), py::arg("gamma"),
        py::arg("vocab"), py::arg("probs_target").none(true), py::arg("probs_draft").none(true),
        py::arg("draft_tokens").none(true), py::arg("seed"), py::arg("repeats"));
  m.def("verify_tree_family", &sp::verify_tree_family, py::arg("method"), py::arg("batch"),
        py::arg("max_nodes"), py::arg("vocab"), py::arg("probs_target").none(true),
        py::arg("probs_draft").none(true), py::arg("parents").none(true),
        py::arg("tokens").none(true), py::arg("n_nodes").none(true),
        py::arg("request_ids").none(true), py::arg("seed"), py::arg("step"));
  m.def("probs_from_logits", &sp::probs_from_logits_rows, py::arg("logits").none(true),
        py::arg("vocab"), py::arg("temperature"), py::arg("top_k"), py::arg("top_p"),
        py::arg("min_p"));
  m.def("sample_output_tokens", &sp::sample_output_tokens, py::arg("weights").none(true),
        py::arg("vocab"), py::arg("request").none(true), py::arg("position").none(true),
        py::arg("sampling"), py::arg("seed"));
  m.def("exact_step", &sp::exact_step);
  m.def("exact_acceptance", &sp::exact_acceptance, py::arg("probs_target"), py::arg("probs_draft"));
  m.def("registry", &sp::registry);
  m.def("chi_square_test", &sp::chi_square, py::arg("observed"), py::arg("probs"),
        py::arg("min_expected") = speclab::kMinExpectedPerBin);
  m.def("chi_square_p_value", &speclab::chi_square_p_value, py::arg("statistic"), py::arg("dof"));
  m.def(
      "tv_distance",
      [](const std::vector<int64_t>& observed, const std::vector<double>& probs,
         double confidence) {
        const speclab::TvEstimate t = speclab::tv_distance(observed, probs, confidence);
        return py::make_tuple(t.estimate, t.upper_bound);
      },
      py::arg("observed"), py::arg("probs"), py::arg("confidence"));
  m.def("chi_square_noncentrality", &speclab::chi_square_noncentrality, py::arg("bins"),
        py::arg("alpha"), py::arg("power"));
  m.def("chi_square_sample_size", &speclab::chi_square_sample_size, py::arg("bins"),
        py::arg("epsilon"), py::arg("alpha"), py::arg("power"));
  m.def("chi_square_detectable_tv", &speclab::chi_square_detectable_tv, py::arg("bins"),
        py::arg("n"), py::arg("alpha"), py::arg("power"));
  m.def("bonferroni_level", &speclab::bonferroni_level, py::arg("suite_rate"), py::arg("n_tests"));
  m.def(
      "wilson_interval",
      [](int64_t successes, int64_t trials, double confidence) {
        const speclab::Interval i = speclab::wilson_interval(successes, trials, confidence);
        return py::make_tuple(i.lower, i.upper);
      },
      py::arg("successes"), py::arg("trials"), py::arg("confidence"));
  m.attr("MIN_EXPECTED_PER_BIN") = speclab::kMinExpectedPerBin;
#ifdef SPECLAB_MUTANTS
  // The deliberately broken variants of core/base/mutants.hpp, for the tests that conformance
  // rejects them: set_mutant(name) switches the process-wide mutant ("none" for none).
  m.def("mutants", [] {
    std::vector<std::string> names;
    for (const speclab::Mutant mutant : speclab::all_mutants()) {
      names.emplace_back(speclab::to_string(mutant));
    }
    return names;
  });
  m.def(
      "set_mutant",
      [](const std::string& name) { speclab::active_mutant() = speclab::parse_mutant(name); },
      py::arg("name"));
#endif
}
