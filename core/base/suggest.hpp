// "Did you mean" suggestions for a misspelt name (a config key, a model, a verifier): the nearest
// candidate by edit distance, or one with the same last dotted component.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

/// Levenshtein distance.
size_t edit_distance(std::string_view a, std::string_view b);
/// " (did you mean \"X\"?)" for the candidate nearest to `word` when it is close enough, else "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace speclab
