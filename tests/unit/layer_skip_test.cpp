// core/models/layer_skip: the `layerskip:SPEC` syntax (whole layers, `attn` and `ffn` sublayers,
// inclusive ranges, unions) and its errors, which quote the spec and the offending item.
#include "core/models/layer_skip.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/models/model_registry.hpp"
#include "tests/support/error_of.hpp"

namespace speclab {
namespace {

using ::testing::AllOf;
using testing::error_of;
using ::testing::HasSubstr;

// Indices of the true entries.
std::vector<int64_t> on(const std::vector<bool>& mask) {
  std::vector<int64_t> layers;
  for (size_t l = 0; l < mask.size(); ++l) {
    if (mask[l]) layers.push_back(static_cast<int64_t>(l));
  }
  return layers;
}

TEST(LayerSkip, WholeLayerRangeSkipsBothSublayers) {
  const LayerSkip skip = parse_layer_skip("10-12", 30);
  EXPECT_EQ(on(skip.attention), (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(on(skip.ffn), (std::vector<int64_t>{10, 11, 12}));
  EXPECT_EQ(skip.spec, "10-12");
  EXPECT_EQ(skip.attention.size(), 30u);
}

TEST(LayerSkip, SingleLayersAndRangesUnite) {
  const LayerSkip skip = parse_layer_skip("4,6,8-9,9", 12);
  EXPECT_EQ(on(skip.attention), (std::vector<int64_t>{4, 6, 8, 9}));
  EXPECT_EQ(on(skip.ffn), (std::vector<int64_t>{4, 6, 8, 9}));
}

TEST(LayerSkip, SublayerPrefixesSelectAttentionOrFfn) {
  const LayerSkip skip = parse_layer_skip("attn2-4,ffn4-5,0", 8);
  EXPECT_EQ(on(skip.attention), (std::vector<int64_t>{0, 2, 3, 4}));
  EXPECT_EQ(on(skip.ffn), (std::vector<int64_t>{0, 4, 5}));
  EXPECT_EQ(skip.skipped_attention(), 4);
  EXPECT_EQ(skip.skipped_ffn(), 3);
}

TEST(LayerSkip, LastLayerIsInRangeAndOnePastIsNot) {
  EXPECT_EQ(on(parse_layer_skip("29", 30).ffn), (std::vector<int64_t>{29}));
  EXPECT_THAT(error_of([] { parse_layer_skip("20-30", 30); }),
              AllOf(HasSubstr("'20-30'"), HasSubstr("out of range"), HasSubstr("30 layers")));
}

TEST(LayerSkip, MalformedSpecsNameTheItem) {
  EXPECT_THAT(error_of([] { parse_layer_skip(""); }), HasSubstr("empty"));
  EXPECT_THAT(error_of([] { parse_layer_skip("4,,6"); }),
              AllOf(HasSubstr("'4,,6'"), HasSubstr("item ''"), HasSubstr("is empty")));
  EXPECT_THAT(error_of([] { parse_layer_skip("4,"); }), HasSubstr("is empty"));
  EXPECT_THAT(error_of([] { parse_layer_skip("mlp3"); }),
              AllOf(HasSubstr("'mlp3'"), HasSubstr("unknown sublayer prefix")));
  EXPECT_THAT(error_of([] { parse_layer_skip("attn"); }),
              AllOf(HasSubstr("item 'attn'"), HasSubstr("not a layer number")));
  EXPECT_THAT(error_of([] { parse_layer_skip("3-x"); }),
              AllOf(HasSubstr("item '3-x'"), HasSubstr("not a layer number")));
  EXPECT_THAT(error_of([] { parse_layer_skip("1-2-3"); }), HasSubstr("not a layer number"));
  EXPECT_THAT(error_of([] { parse_layer_skip("-3"); }), HasSubstr("not a layer number"));
  EXPECT_THAT(error_of([] { parse_layer_skip("7-5"); }),
              AllOf(HasSubstr("item '7-5'"), HasSubstr("ends below its start")));
  EXPECT_THAT(error_of([] { parse_layer_skip("2, 3"); }), HasSubstr("item ' 3'"));
}

// Syntax errors surface from the registry before the model file is needed.
TEST(LayerSkip, RegistryRejectsABadSpecWithoutTheModelFile) {
  EXPECT_THAT(error_of([] { make_model("layerskip:4-x"); }),
              AllOf(HasSubstr("layer-skip spec '4-x'"), HasSubstr("item '4-x'")));
  EXPECT_THAT(error_of([] { make_model("layerskip:"); }), HasSubstr("layer-skip spec is empty"));
  EXPECT_TRUE(is_model_name("layerskip:attn12-20,ffn20-27"));
  EXPECT_FALSE(is_model_name("layerskip:12-"));
  EXPECT_TRUE(is_model_name("ngram3-smollm2"));
  EXPECT_FALSE(is_model_name("ngram9-smollm2"));
}

}  // namespace
}  // namespace speclab
