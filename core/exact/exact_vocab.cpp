// Exact stream laws of the heterogeneous-vocabulary verifiers (TLI, SLEM, SLRS) by enumerating
// every draft path, proposal, accept/reject, residual and bonus branch in rational arithmetic.
// Shares no code with core/models or the engine: the tokenizers, prefix sets and proposal laws are
// written here from the definitions, and ψ for SLRS is a sum over enumerated draft-token paths
// rather than a closed form, so that it also covers strings the draft spells in several ways.
#include "core/exact/exact_vocab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "core/base/error.hpp"

namespace speclab::exact {
namespace {

using Emit = EmitStep;

void validate_vocabulary(const ToyVocabulary& vocabulary, std::string_view name) {
  const int size = static_cast<int>(vocabulary.strings.size());
  if (size < 1 || size > kMaxVocabTokens) {
    throw InvalidInput(fmt::format(
        "{} vocabulary has {} tokens; expected 1 to {} (exact enumeration is exponential in V)",
        name, size, kMaxVocabTokens));
  }
  for (int id = 0; id < size; ++id) {
    const std::string& text = vocabulary.strings[id];
    if (text.empty() || static_cast<int>(text.size()) > kMaxTokenChars) {
      throw InvalidInput(
          fmt::format("{} vocabulary token {} is '{}' ({} characters); expected 1 to {}", name, id,
                      text, text.size(), kMaxTokenChars));
    }
  }
}

void validate_chain_for(const MarkovChain& chain, int vocab, std::string_view name) {
  if (chain.vocab != vocab || static_cast<int>(chain.transition.size()) != vocab) {
    throw InvalidInput(fmt::format(
        "{} chain has V = {} and {} transition rows; expected the {} vocabulary's {} tokens", name,
        chain.vocab, chain.transition.size(), name, vocab));
  }
  for (int t = 0; t < vocab; ++t) {
    validate_row(chain.transition[t], vocab, fmt::format("{} chain", name), t,
                 fmt::format("after {} token {}", name, t));
  }
}

bool has_single_character_token(const ToyVocabulary& vocabulary, char c) {
  return std::any_of(vocabulary.strings.begin(), vocabulary.strings.end(),
                     [c](const std::string& text) { return text.size() == 1 && text[0] == c; });
}

// Every character of `from`'s strings must be a one-character token of `to`, so that greedy
// longest match over `to` tokenizes any concatenation of `from`'s strings.
void validate_covers(const ToyVocabulary& from, std::string_view from_name, const ToyVocabulary& to,
                     std::string_view to_name, std::string_view why) {
  for (size_t id = 0; id < from.strings.size(); ++id) {
    for (char c : from.strings[id]) {
      if (!has_single_character_token(to, c)) {
        throw InvalidInput(fmt::format(
            "{} vocabulary has no token '{}', which {} token {} ('{}') uses; expected every "
            "character of a {} string to be a {} token ({})",
            to_name, c, from_name, id, from.strings[id], from_name, to_name, why));
      }
    }
  }
}

/// What every method needs of a validated pair, derived once.
struct Context {
  const ToyPair& pair;
  int target_vocab = 0;
  int draft_vocab = 0;
  int longest_target = 0;                ///< L_T, characters
  std::set<std::string> prefixes;        ///< P: non-empty prefixes of target strings
  std::map<std::string, int> target_id;  ///< str_T⁻¹ (target strings are distinct)
  std::vector<int> intersection;         ///< [V_D] m(x), or −1 when x ∉ I
  std::vector<int> state_after;          ///< [V_T] draft_state_after

  explicit Context(const ToyPair& toy) : pair(toy) {
    target_vocab = static_cast<int>(toy.target.strings.size());
    draft_vocab = static_cast<int>(toy.draft.strings.size());
    for (int t = 0; t < target_vocab; ++t) {
      const std::string& text = toy.target.strings[t];
      longest_target = std::max(longest_target, static_cast<int>(text.size()));
      target_id[text] = t;
      for (size_t n = 1; n <= text.size(); ++n) prefixes.insert(text.substr(0, n));
      state_after.push_back(greedy_tokenize(toy.draft, text).back());
    }
    for (int x = 0; x < draft_vocab; ++x) {
      const auto found = target_id.find(toy.draft.strings[x]);
      intersection.push_back(found == target_id.end() ? -1 : found->second);
    }
  }

  const Row& target_row(int previous) const { return pair.target_chain.transition[previous]; }
  const Row& draft_row(int previous) const { return pair.draft_chain.transition[previous]; }
};

Sequence appended(const Sequence& prefix, int token) {
  Sequence extended = prefix;
  extended.push_back(token);
  return extended;
}

/// Emits prefix·a with probability weight·row[a] for every a of positive probability.
void emit_row(const Sequence& prefix, const Row& row, const Q& weight, const Emit& emit) {
  for (size_t a = 0; a < row.size(); ++a) {
    if (row[a] == 0) continue;
    emit(appended(prefix, static_cast<int>(a)), Q(weight * row[a]));
  }
}

/// norm(max(0, p − ψ)); p itself when that mass is 0 (then no rejection or ⊥ has positive
/// probability, so the choice never matters).
Row residual(const Row& p, const Row& psi) {
  Row row(p.size(), Q(0));
  Q mass = 0;
  for (size_t a = 0; a < p.size(); ++a) {
    row[a] = std::max(Q(0), Q(p[a] - psi[a]));
    mass += row[a];
  }
  if (mass == 0) return p;
  for (Q& value : row) value /= mass;
  return row;
}

Q accept_probability(const Q& p, const Q& psi) { return std::min(Q(1), Q(p / psi)); }

int last_token(const Sequence& prefix, int before) {
  return prefix.empty() ? before : prefix.back();
}

// ---------------------------------------------------------------------------------------------
// TLI: x_i ~ q_i restricted to I and renormalised, t_i = m(x_i), ψ_i = its law, V1's test.

void tli_step(const Context& c, int last, int gamma, VocabMutant mutant, const Emit& emit) {
  // (emitted prefix, draft state) → probability; equal keys merge.
  std::map<std::pair<Sequence, int>, Q> frontier{{{Sequence{}, c.state_after[last]}, Q(1)}};
  for (int i = 0; i < gamma; ++i) {
    std::map<std::pair<Sequence, int>, Q> next;
    for (const auto& [key, reach] : frontier) {
      const auto& [prefix, state] = key;
      const Row& p = c.target_row(last_token(prefix, last));
      const Row& q = c.draft_row(state);
      Q mass = 0;  // M_i
      for (int x = 0; x < c.draft_vocab; ++x) {
        if (c.intersection[x] >= 0) mass += q[x];
      }
      if (mass == 0) {
        // Drafting stops with i proposals, all accepted: the bonus comes from p_{i+1}.
        emit_row(prefix, p, reach, emit);
        continue;
      }
      Row psi(c.target_vocab, Q(0));
      for (int x = 0; x < c.draft_vocab; ++x) {
        if (c.intersection[x] < 0) continue;
        psi[c.intersection[x]] += mutant == VocabMutant::kTliUnnormalised ? q[x] : Q(q[x] / mass);
      }
      Q rejected = 0;
      for (int x = 0; x < c.draft_vocab; ++x) {
        if (c.intersection[x] < 0 || q[x] == 0) continue;
        const int t = c.intersection[x];
        const Q drawn = q[x] / mass;
        const Q accept = accept_probability(p[t], psi[t]);
        if (accept > 0) next[{appended(prefix, t), x}] += reach * drawn * accept;
        rejected += drawn * (1 - accept);
      }
      if (rejected > 0) emit_row(prefix, residual(p, psi), Q(reach * rejected), emit);
    }
    frontier = std::move(next);
  }
  for (const auto& [key, reach] : frontier) {
    emit_row(key.first, c.target_row(last_token(key.first, last)), reach, emit);
  }
}

// ---------------------------------------------------------------------------------------------
// SLEM: the draft's text, re-tokenized by the target, proposes; the target's own draws verify.

void slem_step(const Context& c, int last, int gamma, const Emit& emit) {
  // The draft's text and state → probability, until enc_T(text) has γ+1 tokens (or the text
  // γ·L_T+1 characters, which greedy matching already implies).
  std::map<std::pair<std::string, int>, Q> texts{{{std::string(), c.state_after[last]}, Q(1)}};
  std::map<Sequence, Q> proposals;
  const size_t stop_tokens = static_cast<size_t>(gamma) + 1;
  const size_t stop_chars = static_cast<size_t>(gamma) * c.longest_target + 1;
  while (!texts.empty()) {
    std::map<std::pair<std::string, int>, Q> next;
    for (const auto& [key, reach] : texts) {
      const auto& [text, state] = key;
      const std::vector<int> encoded = greedy_tokenize(c.pair.target, text);
      if (encoded.size() >= stop_tokens || text.size() >= stop_chars) {
        const size_t j = std::min(static_cast<size_t>(gamma), encoded.size());
        proposals[Sequence(encoded.begin(), encoded.begin() + j)] += reach;
        continue;
      }
      const Row& q = c.draft_row(state);
      for (int x = 0; x < c.draft_vocab; ++x) {
        if (q[x] == 0) continue;
        next[{text + c.pair.draft.strings[x], x}] += reach * q[x];
      }
    }
    texts = std::move(next);
  }
  // Sampled-match: y_i ~ p_i; accept iff y_i = t_i; emit y up to the first mismatch, or the bonus.
  for (const auto& [proposed, weight] : proposals) {
    std::function<void(size_t, const Sequence&, const Q&)> match =
        [&](size_t i, const Sequence& prefix, const Q& reach) {
          const Row& p = c.target_row(last_token(prefix, last));
          if (i == proposed.size()) {
            emit_row(prefix, p, reach, emit);
            return;
          }
          for (int y = 0; y < c.target_vocab; ++y) {
            if (p[y] == 0) continue;
            if (y == proposed[i]) {
              match(i + 1, appended(prefix, y), Q(reach * p[y]));
            } else {
              emit(appended(prefix, y), Q(reach * p[y]));
            }
          }
        };
    match(0, Sequence{}, weight);
  }
}

// ---------------------------------------------------------------------------------------------
// SLRS: the longest prefix-set match of the draft's text is the proposal (⊥ when it is not a
// target string); ψ is the law of that proposal given the draft tokens already drawn.

/// One way the draft's continuation determines a proposal.
struct SlrsPath {
  int outcome = -1;         ///< the proposed target token, −1 for ⊥
  Q probability;            ///< P(these draft tokens | state, pending)
  int state = 0;            ///< the last draft token after the path
  std::string pending;      ///< characters beyond the proposed string (the next proposal's start)
  std::vector<int> tokens;  ///< the draft tokens drawn
  size_t covering = 0;      ///< tokens[0, covering) reach the end of the proposed string
};

/// ℓ, the length of the longest prefix of `text` in P (0 when its first character is not in P),
/// once a character beyond it is present; nothing while every prefix of `text` is in P.
std::optional<size_t> longest_prefix_if_determined(const Context& c, const std::string& text) {
  for (size_t n = 1; n <= text.size(); ++n) {
    if (c.prefixes.count(text.substr(0, n)) == 0) return n - 1;
  }
  return std::nullopt;
}

std::vector<SlrsPath> slrs_paths(const Context& c, int state, const std::string& pending) {
  std::vector<SlrsPath> paths;
  std::vector<int> tokens;
  std::function<void(int, const std::string&, const Q&)> walk = [&](int at, const std::string& text,
                                                                    const Q& probability) {
    if (const std::optional<size_t> ell = longest_prefix_if_determined(c, text)) {
      SlrsPath path;
      path.probability = probability;
      path.state = at;
      path.tokens = tokens;
      const auto found = c.target_id.find(text.substr(0, *ell));
      if (*ell > 0 && found != c.target_id.end()) {
        path.outcome = found->second;
        path.pending = text.substr(*ell);
        size_t covered = pending.size();
        while (covered < *ell) covered += c.pair.draft.strings[tokens[path.covering++]].size();
      }
      paths.push_back(std::move(path));
      return;
    }
    const Row& q = c.draft_row(at);
    for (int x = 0; x < c.draft_vocab; ++x) {
      if (q[x] == 0) continue;
      tokens.push_back(x);
      walk(x, text + c.pair.draft.strings[x], Q(probability * q[x]));
      tokens.pop_back();
    }
  };
  walk(state, pending, Q(1));
  return paths;
}

ProposalLaw proposal_law(const Context& c, const std::vector<SlrsPath>& paths) {
  ProposalLaw law{Row(c.target_vocab, Q(0)), Q(0)};
  for (const SlrsPath& path : paths) {
    if (path.outcome < 0) {
      law.bottom += path.probability;
    } else {
      law.psi[path.outcome] += path.probability;
    }
  }
  return law;
}

/// What the accept test divides by for each path: ψ(t) normally; under the mutants the
/// probability of the path's tokenization of the string, or of the whole path.
std::vector<Q> accept_denominators(const std::vector<SlrsPath>& paths, const ProposalLaw& law,
                                   VocabMutant mutant) {
  std::map<std::pair<int, std::vector<int>>, Q> tokenization;
  for (const SlrsPath& path : paths) {
    if (path.outcome < 0) continue;
    tokenization[{path.outcome,
                  std::vector<int>(path.tokens.begin(), path.tokens.begin() + path.covering)}] +=
        path.probability;
  }
  std::vector<Q> denominators;
  for (const SlrsPath& path : paths) {
    if (path.outcome < 0) {
      denominators.emplace_back(0);
    } else if (mutant == VocabMutant::kSlrsOneTokenization) {
      denominators.push_back(
          tokenization.at({path.outcome, std::vector<int>(path.tokens.begin(),
                                                          path.tokens.begin() + path.covering)}));
    } else if (mutant == VocabMutant::kSlrsWholePath) {
      denominators.push_back(path.probability);
    } else {
      denominators.push_back(law.psi[path.outcome]);
    }
  }
  return denominators;
}

void slrs_step(const Context& c, int last, int gamma, VocabMutant mutant, const Emit& emit) {
  using Key = std::tuple<Sequence, int, std::string>;  // emitted prefix, draft state, pending
  std::map<Key, Q> frontier{{Key{Sequence{}, c.state_after[last], std::string()}, Q(1)}};
  for (int i = 0; i < gamma; ++i) {
    std::map<Key, Q> next;
    for (const auto& [key, reach] : frontier) {
      const auto& [prefix, state, pending] = key;
      const Row& p = c.target_row(last_token(prefix, last));
      const std::vector<SlrsPath> paths = slrs_paths(c, state, pending);
      const ProposalLaw law = proposal_law(c, paths);
      const std::vector<Q> denominators = accept_denominators(paths, law, mutant);
      Q rejected = 0;  // P(⊥) plus the rejected proposals
      for (size_t k = 0; k < paths.size(); ++k) {
        const SlrsPath& path = paths[k];
        if (path.outcome < 0) {
          rejected += path.probability;
          continue;
        }
        const Q accept = accept_probability(p[path.outcome], denominators[k]);
        if (accept > 0) {
          next[Key{appended(prefix, path.outcome), path.state, path.pending}] +=
              reach * path.probability * accept;
        }
        rejected += path.probability * (1 - accept);
      }
      if (rejected > 0) emit_row(prefix, residual(p, law.psi), Q(reach * rejected), emit);
    }
    frontier = std::move(next);
  }
  for (const auto& [key, reach] : frontier) {
    const Sequence& prefix = std::get<0>(key);
    emit_row(prefix, c.target_row(last_token(prefix, last)), reach, emit);
  }
}

std::string_view mutant_name(VocabMutant mutant) {
  switch (mutant) {
    case VocabMutant::kNone:
      return "none";
    case VocabMutant::kTliUnnormalised:
      return "tli-unnormalised";
    case VocabMutant::kSlrsOneTokenization:
      return "slrs-one-tokenization";
    case VocabMutant::kSlrsWholePath:
      return "slrs-whole-path";
  }
  return "unknown";
}

}  // namespace

std::string_view vocab_method_name(VocabMethod method) {
  switch (method) {
    case VocabMethod::kIntersection:
      return "tli";
    case VocabMethod::kStringMatch:
      return "slem";
    case VocabMethod::kStringRejection:
      return "slrs";
  }
  return "unknown";
}

std::vector<int> greedy_tokenize(const ToyVocabulary& vocabulary, std::string_view text) {
  std::vector<int> tokens;
  size_t at = 0;
  while (at < text.size()) {
    int best = -1;
    for (size_t id = 0; id < vocabulary.strings.size(); ++id) {
      const std::string& candidate = vocabulary.strings[id];
      if (candidate.empty() || text.substr(at, candidate.size()) != candidate) continue;
      // Strictly longer only: among equal strings the lowest id stays.
      if (best < 0 || candidate.size() > vocabulary.strings[best].size()) {
        best = static_cast<int>(id);
      }
    }
    if (best < 0) {
      throw InvalidInput(
          fmt::format("greedy_tokenize: no token matches '{}' at character {} of '{}'; expected a "
                      "vocabulary with every single character of the text as a token",
                      text.substr(at, 1), at, text));
    }
    tokens.push_back(best);
    at += vocabulary.strings[best].size();
  }
  return tokens;
}

void validate_toy_pair(const ToyPair& pair, VocabMethod method) {
  validate_vocabulary(pair.target, "target");
  validate_vocabulary(pair.draft, "draft");
  const int target_vocab = static_cast<int>(pair.target.strings.size());
  for (int a = 0; a < target_vocab; ++a) {
    for (int b = a + 1; b < target_vocab; ++b) {
      if (pair.target.strings[a] == pair.target.strings[b]) {
        throw InvalidInput(fmt::format(
            "target vocabulary tokens {} and {} are both '{}'; expected distinct target strings "
            "(a proposal's string must name one target token)",
            a, b, pair.target.strings[a]));
      }
    }
  }
  validate_chain_for(pair.target_chain, target_vocab, "target");
  validate_chain_for(pair.draft_chain, static_cast<int>(pair.draft.strings.size()), "draft");
  validate_covers(pair.target, "target", pair.draft, "draft",
                  "the draft context rule tokenizes committed target strings with the draft's "
                  "greedy tokenizer");
  if (method == VocabMethod::kStringMatch) {
    validate_covers(pair.draft, "draft", pair.target, "target",
                    "SLEM re-tokenizes the draft's text with the target's greedy tokenizer");
  }
}

int draft_state_after(const ToyPair& pair, int target_token) {
  validate_toy_pair(pair, VocabMethod::kIntersection);
  const int target_vocab = static_cast<int>(pair.target.strings.size());
  if (target_token < 0 || target_token >= target_vocab) {
    throw InvalidInput(
        fmt::format("target token is {}; expected in [0, {})", target_token, target_vocab));
  }
  return greedy_tokenize(pair.draft, pair.target.strings[target_token]).back();
}

ProposalLaw slrs_proposal_law(const ToyPair& pair, int draft_state, std::string_view pending) {
  validate_toy_pair(pair, VocabMethod::kStringRejection);
  const int draft_vocab = static_cast<int>(pair.draft.strings.size());
  if (draft_state < 0 || draft_state >= draft_vocab) {
    throw InvalidInput(fmt::format("draft state is {}; expected a draft token in [0, {})",
                                   draft_state, draft_vocab));
  }
  if (static_cast<int>(pending.size()) > kMaxTokenChars) {
    throw InvalidInput(fmt::format("pending is '{}' ({} characters); expected at most {}", pending,
                                   pending.size(), kMaxTokenChars));
  }
  const Context context(pair);
  return proposal_law(context, slrs_paths(context, draft_state, std::string(pending)));
}

Distribution enumerate_vocab_stream(const ToyPair& pair, int start, int gamma, int length,
                                    VocabMethod method, VocabMutant mutant) {
  validate_toy_pair(pair, method);
  const int target_vocab = static_cast<int>(pair.target.strings.size());
  if (start < 0 || start >= target_vocab) {
    throw InvalidInput(
        fmt::format("start token is {}; expected a target token in [0, {})", start, target_vocab));
  }
  if (gamma < 1 || gamma > kMaxVocabGamma) {
    throw InvalidInput(
        fmt::format("gamma is {}; expected 1 ≤ γ ≤ {} (exact enumeration is exponential in γ)",
                    gamma, kMaxVocabGamma));
  }
  if (length < 1 || length > kMaxVocabLength) {
    throw InvalidInput(fmt::format("length is {}; expected 1 ≤ L ≤ {} for exact enumeration",
                                   length, kMaxVocabLength));
  }
  const bool mutant_fits =
      mutant == VocabMutant::kNone ||
      (mutant == VocabMutant::kTliUnnormalised && method == VocabMethod::kIntersection) ||
      ((mutant == VocabMutant::kSlrsOneTokenization || mutant == VocabMutant::kSlrsWholePath) &&
       method == VocabMethod::kStringRejection);
  if (!mutant_fits) {
    throw InvalidInput(fmt::format("mutant {} does not apply to method {}", mutant_name(mutant),
                                   vocab_method_name(method)));
  }

  const Context context(pair);
  return enumerate_steps(start, length, [&](int last, int, const EmitStep& collect) {
    switch (method) {
      case VocabMethod::kIntersection:
        tli_step(context, last, gamma, mutant, collect);
        break;
      case VocabMethod::kStringMatch:
        slem_step(context, last, gamma, collect);
        break;
      case VocabMethod::kStringRejection:
        slrs_step(context, last, gamma, mutant, collect);
        break;
    }
  });
}

}  // namespace speclab::exact
