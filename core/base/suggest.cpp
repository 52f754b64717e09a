// "Did you mean" suggestions; see suggest.hpp.
#include "core/base/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace speclab {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string* best = nullptr;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const std::string& c : candidates) {
    const size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best = &c;
      best_distance = d;
    }
  }
  // Close enough: about a third of the word's length (at least 2 edits).
  if (best != nullptr && best_distance > 0 &&
      best_distance <= std::max<size_t>(2, (word.size() + 2) / 3)) {
    return fmt::format(" (did you mean \"{}\"?)", *best);
  }
  // "gamma" or "sampling.gamma" for "decode.gamma": the same last component elsewhere.
  const std::string_view tail = word.substr(word.rfind('.') + 1);
  std::vector<std::string> tails;
  for (const std::string& c : candidates) {
    const size_t dot = c.rfind('.');
    if (dot != std::string::npos && c != word && std::string_view(c).substr(dot + 1) == tail) {
      tails.push_back(fmt::format("\"{}\"", c));
    }
  }
  if (!tails.empty()) return fmt::format(" (did you mean {}?)", fmt::join(tails, " or "));
  return {};
}

}  // namespace speclab
