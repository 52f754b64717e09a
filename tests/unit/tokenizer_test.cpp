// Byte-level BPE tokenizer (core/models/tokenizer.hpp): the GPT-2 byte alphabet, the "smollm"
// pre-tokenizer and UTF-8 checks without a model; with the real SmolLM2 GGUF (after `speclab
// fetch-model smollm2-135m`) ids derived by hand from its vocabulary and merges, round trips
// (fixed strings and a RapidCheck property), special tokens, errors and the ChatML template.
#include "core/models/tokenizer.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/smollm2_tokenizer.hpp"

namespace speclab {
namespace {

using testing::error_of;
using Ids = std::vector<int32_t>;

std::vector<std::string> strings_of(const std::vector<std::string_view>& views) {
  return {views.begin(), views.end()};
}

TEST(Tokenizer, ByteSymbolsAreTheGpt2Alphabet) {
  const std::vector<std::string>& s = gpt2_byte_symbols();
  ASSERT_EQ(s.size(), 256u);
  EXPECT_EQ(s['A'], "A");
  EXPECT_EQ(s['!'], "!");
  EXPECT_EQ(s[0], "\u0100");     // first non-printable byte → U+0100 "Ā"
  EXPECT_EQ(s[' '], "\u0120");   // 33rd non-printable → U+0120 "Ġ"
  EXPECT_EQ(s['\n'], "\u010A");  // "Ċ"
  EXPECT_EQ(s[0xAD], "\u0143");  // soft hyphen is the 68th and last: U+0100 + 67
  EXPECT_EQ(s[0xE9], "\u00E9");  // printable Latin-1 maps to itself
}

TEST(Tokenizer, PretokenizerSplitsDigitsAndWords) {
  using V = std::vector<std::string>;
  EXPECT_EQ(strings_of(pretokenize_smollm("Hello, world!")), (V{"Hello", ",", " world", "!"}));
  EXPECT_EQ(strings_of(pretokenize_smollm("in 2026!")), (V{"in", " ", "2", "0", "2", "6", "!"}));
  // \s+(?!\S) leaves the last space to prefix the next word; "\n\n " stays one piece.
  EXPECT_EQ(strings_of(pretokenize_smollm("a   b\n\n  c")), (V{"a", "  ", " b", "\n\n ", " c"}));
  EXPECT_EQ(strings_of(pretokenize_smollm("don't you're")), (V{"don", "'t", " you", "'re"}));
  EXPECT_EQ(strings_of(pretokenize_smollm("x\t\ty  ")), (V{"x", "\t", "\t", "y", "  "}));
  EXPECT_EQ(strings_of(pretokenize_smollm("café ½?'s")), (V{"café", " ", "½", "?'", "s"}));
  EXPECT_EQ(strings_of(pretokenize_smollm("\xF0\x9F\x98\x80 ok")), (V{"\xF0\x9F\x98\x80", " ok"}));
  EXPECT_TRUE(pretokenize_smollm("").empty());
}

TEST(Tokenizer, UnicodeClasses) {
  EXPECT_TRUE(unicode_is_letter(U'é'));
  EXPECT_TRUE(unicode_is_letter(U'Ж'));
  EXPECT_TRUE(unicode_is_letter(U'中'));
  EXPECT_FALSE(unicode_is_letter(U'1'));
  EXPECT_FALSE(unicode_is_letter(U'€'));
  EXPECT_TRUE(unicode_is_number(U'7'));
  EXPECT_TRUE(unicode_is_number(U'²'));
  EXPECT_TRUE(unicode_is_space(U'\u00A0'));
  EXPECT_TRUE(unicode_is_space(U'\n'));
  EXPECT_FALSE(unicode_is_space(U'x'));
}

TEST(Tokenizer, CheckUtf8NamesTheByteOffset) {
  EXPECT_EQ(error_of([] { check_utf8("ab\xFFz"); }),
            "text: invalid UTF-8 at byte offset 2 (byte 0xFF); expected UTF-8 text");
  EXPECT_NE(error_of([] { check_utf8("abc\xC3"); }).find("byte offset 3"), std::string::npos);
  EXPECT_NE(error_of([] { check_utf8("\xC0\xAF"); }).find("byte offset 0"), std::string::npos);
  EXPECT_NE(error_of([] { check_utf8("x\xED\xA0\x80"); }).find("byte offset 1"),
            std::string::npos);  // surrogate U+D800
  EXPECT_NE(error_of([] { check_utf8("xy\x80"); }).find("byte offset 2"), std::string::npos);
  EXPECT_EQ(error_of([] { check_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80"); }), "(no error)");
}

// ---- the real model ----

using testing::smollm2;

TEST(Tokenizer, ReadsSmolLM2Vocabulary) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  EXPECT_EQ(tok.n_vocab(), 49152);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.token_text(1), "<|im_start|>");
  EXPECT_TRUE(tok.is_control(0));
  EXPECT_FALSE(tok.is_control(19556));
  EXPECT_EQ(tok.token_id("\u0120World"), 2260);
  EXPECT_EQ(tok.token_id("no such token"), -1);
}

// Ids found by looking the pieces up in tokenizer.ggml.tokens (index = id): "Hello" 19556,
// "ĠWorld" 2260, "Ġworld" 905, "," 28, "!" 17, "0" 32, "2" 34, "6" 38, "Ġ" 216, "in" 254,
// "user" 4093, "Ċ" 198, "Hi" 26843, "don" 12420, "'t" 982, "Ġyou" 346, "'re" 2316, "ĊĊĠ" 8866,
// "ĠĠ" 256, "Ġb" 278, "Ġc" 265, "a" 81. Every multi-byte piece is in the vocabulary, so a chain
// of merges builds it (checked: e.g. "H e" and "l l" then "He llo"); no merge joins two pieces
// (the pre-tokenizer keeps them apart). Cross-checked with a Python BPE over the same file.
TEST(Tokenizer, EncodesKnownStrings) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  EXPECT_EQ(tok.encode("Hello"), (Ids{19556}));
  EXPECT_EQ(tok.encode("Hello World"), (Ids{19556, 2260}));
  EXPECT_EQ(tok.encode("Hello, world!"), (Ids{19556, 28, 905, 17}));
  EXPECT_EQ(tok.encode("2026"), (Ids{34, 32, 34, 38}));  // digits one by one
  EXPECT_EQ(tok.encode("in 2026!"), (Ids{254, 216, 34, 32, 34, 38, 17}));
  EXPECT_EQ(tok.encode("don't you're"), (Ids{12420, 982, 346, 2316}));
  EXPECT_EQ(tok.encode("a   b\n\n  c"), (Ids{81, 256, 278, 8866, 265}));
  // "café": c, af, then "Ã©" (the two bytes C3 A9 of é in the GPT-2 alphabet, id 2756).
  EXPECT_EQ(tok.encode("caf\xC3\xA9"), (Ids{83, 1939, 2756}));
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(Tokenizer, SpecialTokensEncodeToTheirIds) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  EXPECT_EQ(tok.encode("<|endoftext|>"), (Ids{0}));
  EXPECT_EQ(tok.encode("<|im_start|>"), (Ids{1}));
  EXPECT_EQ(tok.encode("<|im_end|>"), (Ids{2}));
  EXPECT_EQ(tok.encode("<|im_start|>user\nHi<|im_end|>\n"), (Ids{1, 4093, 198, 26843, 2, 198}));
  EXPECT_EQ(tok.decode(Ids{1, 4093, 198, 26843, 2, 198}), "<|im_start|>user\nHi<|im_end|>\n");
  // A broken special token is plain text.
  EXPECT_GT(tok.encode("<|im_end").size(), 1u);
}

TEST(Tokenizer, RoundTripsFixedStrings) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const std::vector<std::string> texts = {
      "",
      "Hello, World!",
      "The quick brown fox jumps over the lazy dog.",
      "!!!???...;;;:::,,,---___+++===***&&&^^^%%%$$$###@@@~~~```|||\\\\\\///",
      "0123456789 3.14159 -42 1e-9 2026-01-01",
      "   leading and trailing   ",
      "tabs\t\tand\nnew\r\nlines\n\n\n",
      "caf\xC3\xA9 na\xC3\xAFve \xC3\x9C"
      "ber Stra\xC3\x9F"
      "e",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xCE\xB3\xCE\xB5\xCE\xB9\xCE\xB1",
      "\xE4\xB8\xAD\xE6\x96\x87 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
      "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xE2\x9D\xA4\xEF\xB8\x8F",
      "it's we've they'll I'd I'm you're isn't 'quoted'",
      "<|im_start|>system\nx<|im_end|>\n<|endoftext|><file_sep>",
      "a\xC2\xA0"
      "b\xE2\x80\x83"
      "c",
  };
  for (const std::string& s : texts) {
    EXPECT_EQ(tok.decode(tok.encode(s)), s) << "text: " << s;
  }
}

TEST(Tokenizer, RoundTripsRandomPrintableStrings) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  // Code points from blocks the vocabulary covers (bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D and
  // the lead bytes of planes 4 to 11 have no token, see EncodeRejects...).
  const auto gen_code_point = rc::gen::oneOf(
      rc::gen::inRange<char32_t>(0x20, 0x7F), rc::gen::element<char32_t>(U'\n', U'\t', U' '),
      rc::gen::inRange<char32_t>(0xA0, 0x250), rc::gen::inRange<char32_t>(0x370, 0x530),
      rc::gen::inRange<char32_t>(0x4E00, 0xA000), rc::gen::inRange<char32_t>(0x1F300, 0x1FB00));
  const bool ok = rc::check("decode(encode(s)) == s", [&] {
    const auto cps = *rc::gen::container<std::vector<char32_t>>(gen_code_point);
    std::string s;
    for (char32_t c : cps) {
      if (c < 0x80) {
        s += static_cast<char>(c);
      } else if (c < 0x800) {
        s += static_cast<char>(0xC0 | (c >> 6));
        s += static_cast<char>(0x80 | (c & 0x3F));
      } else if (c < 0x10000) {
        s += static_cast<char>(0xE0 | (c >> 12));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      } else {
        s += static_cast<char>(0xF0 | (c >> 18));
        s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      }
    }
    RC_ASSERT(tok.decode(tok.encode(s)) == s);
  });
  EXPECT_TRUE(ok);
}

TEST(Tokenizer, EncodeRejectsInvalidUtf8AndUnknownBytes) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  EXPECT_EQ(error_of([&] { tok.encode("Hello \xC3("); }),
            "text: invalid UTF-8 at byte offset 6 (byte 0xC3); expected UTF-8 text");
  EXPECT_NE(error_of([&] { tok.encode("<|im_end|>\xFF"); }).find("byte offset 10"),
            std::string::npos);
  // U+0004 is valid UTF-8 but SmolLM2 has no token for byte 0x04.
  EXPECT_NE(error_of([&] {
              tok.encode(std::string("ab\x04", 3));
            }).find("byte 0x04 at byte offset 2 has no token"),
            std::string::npos);
}

TEST(Tokenizer, DecodeRejectsIdsOutOfRange) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  EXPECT_NE(error_of([&] {
              tok.decode(Ids{1, 49152});
            }).find("token id 49152 at position 1 is outside [0, 49152)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tok.decode(Ids{-1}); }).find("token id -1 at position 0"),
            std::string::npos);
}

TEST(Tokenizer, AppliesChatMLTemplate) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(tok.apply_chat_template(with_system),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
  // Without a system message the template's default one comes first.
  const std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  EXPECT_EQ(tok.apply_chat_template(user_only, false),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  const Ids ids = tok.encode(tok.apply_chat_template(with_system));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(tok.decode(ids), tok.apply_chat_template(with_system));
}

}  // namespace
}  // namespace speclab
