// Layer-skip self-speculation (Elhoushi et al. 2024, "LayerSkip"; Zhang et al. 2024, "Draft &
// Verify"): the draft is the target itself with some transformer sublayers left out of the
// residual stream. This file holds the skip set and the text syntax that names it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

/// One item of a layer-skip spec: layers first..last (inclusive, 0-based) and which sublayers.
struct LayerSkipRange {
  bool attention = true;  ///< skip the attention sublayer
  bool ffn = true;        ///< skip the feed-forward sublayer
  int64_t first = 0;
  int64_t last = 0;
};

/// Parses a layer-skip spec: items separated by commas, each an optional sublayer prefix and a
/// layer or an inclusive layer range, 0-based:
///   `12` or `10-25`          skips whole layers (attention and FFN);
///   `attn12` or `attn12-20`  skips only the attention sublayers;
///   `ffn20` or `ffn20-27`    skips only the feed-forward sublayers.
/// Items may overlap (the union is skipped). Examples: `10-25`, `4,6,8-11`, `attn12-20,ffn20-27`.
/// Throws InvalidInput quoting the spec and the offending item for an empty spec or item, an
/// unknown prefix, a non-number, or a range whose end is below its start. Layer bounds are checked
/// by layer_skip_mask, which knows the layer count.
std::vector<LayerSkipRange> parse_layer_skip(std::string_view spec);

/// The sublayers a model skips, per layer.
struct LayerSkip {
  std::string spec;             ///< the text it was parsed from ("" when nothing is skipped)
  std::vector<bool> attention;  ///< [n_layer] true: layer l's attention sublayer is skipped
  std::vector<bool> ffn;        ///< [n_layer] true: layer l's feed-forward sublayer is skipped

  /// Sublayers skipped (attention and FFN counted separately).
  int64_t skipped_attention() const;
  int64_t skipped_ffn() const;
};

/// The mask of `ranges` for a model of `n_layer` layers. Throws InvalidInput quoting `spec` when
/// a range reaches past layer n_layer - 1.
LayerSkip layer_skip_mask(std::span<const LayerSkipRange> ranges, int64_t n_layer,
                          std::string_view spec);

/// parse_layer_skip then layer_skip_mask.
LayerSkip parse_layer_skip(std::string_view spec, int64_t n_layer);

}  // namespace speclab
