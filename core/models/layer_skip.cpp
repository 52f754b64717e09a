// The layer-skip spec syntax and mask; see layer_skip.hpp.
#include "core/models/layer_skip.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/base/error.hpp"

namespace speclab {
namespace {

constexpr std::string_view kSyntax =
    "expected comma-separated items like 10-25, 4, attn12-20 or ffn20-27 (0-based layers, "
    "ranges inclusive)";

// A non-negative decimal layer number that fills `text` exactly.
bool parse_layer(std::string_view text, int64_t& value) {
  if (text.empty() || text.size() > 9) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::vector<LayerSkipRange> parse_layer_skip(std::string_view spec) {
  if (spec.empty()) {
    throw InvalidInput(fmt::format("layer-skip spec is empty; {}", kSyntax));
  }
  std::vector<LayerSkipRange> ranges;
  size_t begin = 0;
  while (true) {
    const size_t comma = spec.find(',', begin);
    const std::string_view item = spec.substr(
        begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin);
    auto fail = [&](std::string_view why) {
      throw InvalidInput(fmt::format("layer-skip spec '{}': item '{}' (at character {}) {}; {}",
                                     spec, item, begin, why, kSyntax));
    };
    if (item.empty()) fail("is empty");
    LayerSkipRange range;
    std::string_view layers = item;
    if (layers.starts_with("attn")) {
      range.ffn = false;
      layers.remove_prefix(4);
    } else if (layers.starts_with("ffn")) {
      range.attention = false;
      layers.remove_prefix(3);
    } else if (!layers.empty() && std::isalpha(static_cast<unsigned char>(layers.front()))) {
      fail("has an unknown sublayer prefix (expected none, 'attn' or 'ffn')");
    }
    const size_t dash = layers.find('-');
    const std::string_view first = layers.substr(0, dash);
    const std::string_view last = dash == std::string_view::npos ? first : layers.substr(dash + 1);
    if (!parse_layer(first, range.first) || !parse_layer(last, range.last)) {
      fail("is not a layer number or a range N-M");
    }
    if (range.last < range.first) fail("ends below its start");
    ranges.push_back(range);
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return ranges;
}

int64_t LayerSkip::skipped_attention() const {
  return std::count(attention.begin(), attention.end(), true);
}

int64_t LayerSkip::skipped_ffn() const { return std::count(ffn.begin(), ffn.end(), true); }

LayerSkip layer_skip_mask(std::span<const LayerSkipRange> ranges, int64_t n_layer,
                          std::string_view spec) {
  LayerSkip skip;
  skip.spec = std::string(spec);
  skip.attention.assign(static_cast<size_t>(n_layer), false);
  skip.ffn.assign(static_cast<size_t>(n_layer), false);
  for (const LayerSkipRange& r : ranges) {
    if (r.first < 0 || r.last >= n_layer) {
      throw InvalidInput(fmt::format(
          "layer-skip spec '{}': layers {}-{} are out of range; the model has {} layers "
          "(0-{})",
          spec, r.first, r.last, n_layer, n_layer - 1));
    }
    for (int64_t l = r.first; l <= r.last; ++l) {
      if (r.attention) skip.attention[static_cast<size_t>(l)] = true;
      if (r.ffn) skip.ffn[static_cast<size_t>(l)] = true;
    }
  }
  return skip;
}

LayerSkip parse_layer_skip(std::string_view spec, int64_t n_layer) {
  return layer_skip_mask(parse_layer_skip(spec), n_layer, spec);
}

}  // namespace speclab
