// `speclab exact`: the exact output distribution of one verification step (docs/verifiers.md V1-V8)
// with the same target row P and draft row Q at every position (for trees: at every node, --gamma
// the depth,
// --branches the candidates per node), enumerated in rational arithmetic (core/exact/exact.hpp,
// core/exact/exact_tree.hpp), printed as JSON with every probability as an exact "num/den", with
// each draft position's acceptance under V1 and under the match verifiers.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/json.hpp"
#include "core/base/error.hpp"
#include "core/exact/exact.hpp"
#include "core/exact/exact_step.hpp"
#include "core/exact/exact_tree.hpp"
#include "core/exact/lp_optimal.hpp"
#include "core/verify/verifier.hpp"

namespace speclab::cli {
namespace {

using exact::Q;
using exact::Row;

struct ExactOptions {
  std::string target;
  std::string draft;
  std::string gamma;
  std::string method;
  std::string branches;
  /// The verifier parameters given, by registry key ("leniency", "typical_epsilon", ...).
  std::map<std::string, std::string, std::less<>> parameters;
  bool json = true;  // the only output; --json says so explicitly
};

int parse_branches(const std::string& text) {
  int branches = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, branches);
  if (error != std::errc{} || ptr != end || branches < 1 || branches > exact::kMaxBranches) {
    throw InvalidInput(fmt::format(
        "--branches is '{}'; expected an integer in [1, {}] (sibling candidates per node; K-SEQ "
        "needs k ≥ 1)",
        text, exact::kMaxBranches));
  }
  return branches;
}

// A parameter given with a method that does not read it is refused, naming those that do.
void check_parameters_apply(const ExactOptions& options, const VerifierEntry& choice) {
  for (const auto& [key, text] : options.parameters) {
    if (text.empty() || std::ranges::find(choice.parameters, key) != choice.parameters.end()) {
      continue;
    }
    std::vector<std::string_view> readers;
    for (const VerifierEntry& e : verifier_registry()) {
      if (std::ranges::find(e.parameters, key) != e.parameters.end()) readers.push_back(e.name);
    }
    throw InvalidInput(fmt::format("{} '{}' given with --method {}; it applies to --method {} only",
                                   verifier_parameter(key).option, text, options.method,
                                   fmt::join(readers, ", ")));
  }
}

// A real-valued parameter, checked against its range in the registry.
double parse_parameter(const std::string& text, const VerifierParameter& p) {
  double value = 0.0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc{} || ptr != end || !p.admits(value)) {
    throw InvalidInput(fmt::format("{} is '{}'; expected a finite {} (docs/verifiers.md)", p.option,
                                   text, p.range_text()));
  }
  return value;
}

// γ is read as text so that "-1" or "two" are reported by this command, naming the option, with
// the exact-enumeration bound, rather than as a generic conversion error.
int parse_gamma(const std::string& text) {
  int gamma = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, gamma);
  if (error != std::errc{} || ptr != end || gamma < 0 || gamma > exact::kMaxGamma) {
    throw InvalidInput(
        fmt::format("--gamma is '{}'; expected an integer in [0, {}]", text, exact::kMaxGamma));
  }
  return gamma;
}

// Validates a row given on the command line so that the message names the option rather than the
// library's per-position argument.
void validate_option_row(const Row& row, std::string_view option, std::string_view text) {
  if (row.size() > static_cast<size_t>(exact::kMaxVocab)) {
    throw InvalidInput(fmt::format("{} '{}' has {} entries; expected 1 ≤ V ≤ {}", option, text,
                                   row.size(), exact::kMaxVocab));
  }
  Q sum = 0;
  for (size_t a = 0; a < row.size(); ++a) {
    if (row[a] < 0) {
      throw InvalidInput(fmt::format("{} '{}': entry {} is {}; expected ≥ 0", option, text, a,
                                     exact::to_fraction_string(row[a])));
    }
    sum += row[a];
  }
  if (sum != 1) {
    throw InvalidInput(fmt::format("{} '{}' sums to {}; expected exactly 1", option, text,
                                   exact::to_fraction_string(sum)));
  }
}

// A rational as JSON: its exact fraction as a string ("10/9"), which no JSON number can hold.
Json fraction(const Q& value) { return exact::to_fraction_string(value); }

Json json_row(const Row& row) {
  Json entries = Json::array();
  for (const Q& value : row) entries.push_back(fraction(value));
  return entries;
}

// The name of the multi-draft optimum, which `--method` takes beside the verifiers: a bound, not a
// verifier, so it is not in the registry (core/exact/lp_optimal.hpp).
constexpr std::string_view kLpOptimal = "lp-optimal";

// The bound a verifier's one-token acceptance is measured against: lossless, γ = 1 and k i.i.d.
// drafts from q (a chain verifier drafts one token; tree-iid and kseq draw K i.i.d. candidates).
// Returns the number of drafts, or 0 where the bound does not apply.
int lp_drafts_of(const VerifierEntry& choice, const exact::Method& method, int gamma,
                 int branches) {
  if (choice.lossy || gamma != 1) return 0;
  if (choice.family == VerifierFamily::kChain) return method.method == ChainMethod::kGreedy ? 0 : 1;
  if (choice.family == VerifierFamily::kBlock) return 1;
  const bool iid =
      choice.tree_method == TreeMethod::kIid || choice.tree_method == TreeMethod::kKseq;
  return choice.family == VerifierFamily::kTree && iid ? branches : 0;
}

// The price of reproducibility at each of the γ draft positions: the acceptance probability of
// V1 (Σ min(p, q)) beside the match verifiers', which emit plain decoding's tokens for a fixed
// seed (docs/verifiers.md V8): coupled's exact agreement and its bound (1 − TV)/(1 + TV), and
// sampled-match's Σ p·q. Every position has the rows P and Q, so the entries are equal; they are
// listed by position as the marginals are.
Json price_of_reproducibility(const Row& p, const Row& q, int gamma) {
  Q overlap = 0;
  for (size_t a = 0; a < p.size(); ++a) overlap += std::min(p[a], q[a]);
  Json positions = Json::array();
  for (int i = 1; i <= gamma; ++i) {
    positions.push_back({{"position", i},
                         {"token", fraction(overlap)},
                         {"coupled", fraction(exact::coupled_agreement(p, q))},
                         {"coupled_bound", fraction(exact::coupled_agreement_bound(p, q))},
                         {"sampled-match", fraction(exact::sampled_match_agreement(p, q))}});
  }
  return positions;
}

// `--method lp-optimal`: the LP's optimum as expected_accepted, with the LP's size.
void run_lp_optimal(const ExactOptions& options, const Row& probs_target, const Row& probs_draft) {
  if (parse_gamma(options.gamma) != 1) {
    throw InvalidInput(fmt::format(
        "--gamma is '{}' with --method {}; the bound is for one drafted position: give --gamma 1",
        options.gamma, kLpOptimal));
  }
  if (options.branches.empty()) {
    throw InvalidInput(
        fmt::format("--method {} needs --branches K, the i.i.d. drafts of the one position (1..{})",
                    kLpOptimal, exact::kLpMaxDrafts));
  }
  for (const auto& [key, text] : options.parameters) {
    if (!text.empty()) {
      throw InvalidInput(fmt::format("{} '{}' given with --method {}, which has no parameters",
                                     verifier_parameter(key).option, text, kLpOptimal));
    }
  }
  const int branches = parse_branches(options.branches);
  const exact::MultiDraftOptimum optimum =
      exact::multidraft_optimum(probs_target, probs_draft, branches);
  const Json json = {{"method", kLpOptimal},
                     {"gamma", 1},
                     {"branches", branches},
                     {"target", json_row(probs_target)},
                     {"draft", json_row(probs_draft)},
                     {"expected_accepted", fraction(optimum.acceptance)},
                     {"expected_emitted", fraction(Q(optimum.acceptance + 1))},
                     {"lp",
                      {{"variables", optimum.variables},
                       {"constraints", optimum.constraints},
                       {"pivots", optimum.pivots}}}};
  fmt::print("{}\n", json_pretty(json));
}

void run_exact(const ExactOptions& options) {
  const Row probs_target = exact::parse_rational_row(options.target, "--target");
  const Row probs_draft = exact::parse_rational_row(options.draft, "--draft");
  validate_option_row(probs_target, "--target", options.target);
  validate_option_row(probs_draft, "--draft", options.draft);
  if (probs_draft.size() != probs_target.size()) {
    throw InvalidInput(fmt::format("--draft has {} entries; expected as many as --target ({})",
                                   probs_draft.size(), probs_target.size()));
  }
  if (options.method == kLpOptimal) {
    run_lp_optimal(options, probs_target, probs_draft);
    return;
  }
  const int gamma = parse_gamma(options.gamma);

  const VerifierEntry& choice = verifier_entry(options.method, "--method");
  check_parameters_apply(options, choice);
  const auto given = [&](std::string_view key) -> const std::string& {
    static const std::string kNone;
    const auto it = options.parameters.find(key);
    return it == options.parameters.end() ? kNone : it->second;
  };
  exact::Method method{choice.chain_method};
  if (const std::string& text = given("leniency"); !text.empty()) {
    // Read exactly, as a rational: the enumeration is exact.
    const VerifierParameter& p = verifier_parameter("leniency");
    method.leniency = exact::parse_rational(text, p.option);
    if (method.leniency <= Q(p.lower) || method.leniency > Q(p.upper)) {
      throw InvalidInput(fmt::format("{} is '{}'; expected {} (docs/verifiers.md V3)", p.option,
                                     text, p.range_text()));
    }
  }
  const bool tree = choice.uses_branches;
  if (tree && options.branches.empty()) {
    throw InvalidInput(
        fmt::format("--method {} needs --branches K, the sibling candidates per node (1..{})",
                    options.method, exact::kMaxBranches));
  }
  if (!tree && !options.branches.empty()) {
    throw InvalidInput(fmt::format(
        "--branches '{}' given with --method {}; branches apply to the tree methods and kseq only",
        options.branches, options.method));
  }
  const int branches = tree ? parse_branches(options.branches) : 0;
  exact::TypicalMethod typical;
  if (const std::string& text = given("typical_epsilon"); !text.empty()) {
    typical.epsilon = parse_parameter(text, verifier_parameter("typical_epsilon"));
  }
  if (const std::string& text = given("typical_delta"); !text.empty()) {
    typical.delta = parse_parameter(text, verifier_parameter("typical_delta"));
  }

  const std::vector<Row> target_rows(gamma + 1, probs_target);
  const std::vector<Row> draft_rows(gamma, probs_draft);
  exact::StepResult step;
  try {
    step = exact::enumerate_step(
        choice, {.leniency = method.leniency, .typical = typical, .branches = branches},
        target_rows, draft_rows);
  } catch (const InvalidInput& e) {
    if (!tree) throw;
    throw InvalidInput(
        fmt::format("--branches {} with --method {}: {}", branches, options.method, e.what()));
  }

  // Plain decoding samples from P; greedy decoding emits its argmax (V2 is lossless against
  // greedy decoding, not against sampling), so that is the reference greedy is measured against.
  const bool greedy =
      choice.family == VerifierFamily::kChain && method.method == ChainMethod::kGreedy;
  const Row reference = greedy ? exact::one_hot_argmax(probs_target) : probs_target;
  const bool lossless = step.first_token_marginal == reference;
  const bool conditionals_hold =
      !exact::find_conditional_violation(step, std::vector<Row>(gamma + 1, reference)).has_value();

  // Keys sorted as strings, as a reader diffing two outputs expects.
  std::map<std::string, Q> distribution;
  for (const auto& [emitted, probability] : step.distribution) {
    distribution.emplace(exact::sequence_key(emitted), probability);
  }
  Json distribution_json = Json::object();
  for (const auto& [key, probability] : distribution)
    distribution_json[key] = fraction(probability);
  Json marginal = Json::object();
  for (size_t a = 0; a < step.first_token_marginal.size(); ++a) {
    marginal[std::to_string(a)] = fraction(step.first_token_marginal[a]);
  }
  Json conditional = Json::array();
  for (const auto& value : step.position_acceptance_conditional) {
    conditional.push_back(value ? fraction(*value) : Json(nullptr));
  }

  Json json = {{"method", choice.name}, {"gamma", gamma}};
  if (tree) json["branches"] = branches;
  if (choice.family == VerifierFamily::kTree && choice.tree_method == TreeMethod::kKseq) {
    // ρ is irrational in general; the enumeration uses a dyadic ρ ≥ ρ* (core/exact/exact_tree.hpp).
    json["rho"] = fmt::format(
        "{}", exact::kseq_rho(probs_target, probs_draft, branches).convert_to<double>());
  }
  if (choice.family == VerifierFamily::kChain && method.method == ChainMethod::kLenient) {
    json["leniency"] = fraction(method.leniency);
  }
  if (choice.family == VerifierFamily::kTypical) {
    json["epsilon"] = typical.epsilon;
    json["delta"] = typical.delta;
  }
  json["lossy"] = choice.lossy;
  json["target"] = json_row(probs_target);
  json["draft"] = json_row(probs_draft);
  json["distribution"] = distribution_json;
  json["accepted_length"] = json_row(step.accepted_length);
  json["position_acceptance_marginal"] = json_row(step.position_acceptance_marginal);
  json["position_acceptance_conditional"] = conditional;
  json["expected_accepted"] = fraction(step.expected_accepted);
  json["expected_emitted"] = fraction(step.expected_emitted);
  json["first_token_marginal"] = marginal;
  json["lossless_reference"] = greedy ? "argmax(target)" : "target";
  if (const int drafts = lp_drafts_of(choice, method, gamma, branches); drafts > 0) {
    const Q bound = exact::multidraft_optimum(probs_target, probs_draft, drafts).acceptance;
    json["lp_optimal"] = fraction(bound);
    json["gap_to_lp_optimal"] = fraction(Q(bound - step.expected_accepted));
  }
  json["price_of_reproducibility"] = price_of_reproducibility(probs_target, probs_draft, gamma);
  json["conditionals_hold"] = conditionals_hold;
  json["lossless"] = lossless;
  fmt::print("{}\n", json_pretty(json));
}

void setup_exact(CLI::App& app) {
  auto options = std::make_shared<ExactOptions>();
  CLI::App* command = app.add_subcommand(
      "exact",
      "Exact output distribution of one verification step (docs/verifiers.md V1-V8), enumerated in "
      "rational arithmetic, as JSON, with each draft position's acceptance under V1, coupled "
      "(and its bound) and sampled-match");
  document_exit_statuses(*command);
  command
      ->add_option("--target", options->target,
                   "target row P used at every position, comma-separated rationals (1/3,2/3)")
      ->required();
  command
      ->add_option("--draft", options->draft,
                   "draft row Q used at every position, comma-separated rationals")
      ->required();
  command->add_option("--gamma", options->gamma, "draft tokens per step (tree depth), 0..4")
      ->required();
  command
      ->add_option(
          "--method", options->method,
          fmt::format("{} | {} (the optimum of every lossless verifier with --branches K "
                      "i.i.d. drafts at --gamma 1, an exact LP; V ≤ {}, K ≤ {})",
                      verifier_names_text(), kLpOptimal, exact::kLpMaxVocab, exact::kLpMaxDrafts))
      ->required();
  command->add_option("--branches", options->branches,
                      fmt::format("sibling candidates per tree node, 1..{} (tree methods and kseq)",
                                  exact::kMaxBranches));
  // One option per registry parameter (--leniency, --epsilon, --delta), with the registry's help.
  for (const VerifierParameter& p : verifier_parameters()) {
    command->add_option(std::string(p.option), options->parameters[std::string(p.key)], p.help());
  }
  command->add_flag("--json", options->json,
                    "print one JSON object (the output is JSON either way)");
  command->callback([options] { run_exact(*options); });
}

const CommandRegistrar kRegistrar{"exact", &setup_exact};

}  // namespace
}  // namespace speclab::cli
