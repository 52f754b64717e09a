// Vocabularies as byte strings (core/models/vocab_map.hpp): the GPT-2, SentencePiece and raw
// forms read back to bytes, the intersection of two vocabularies with its unmapped ids, collisions
// and summary, the byte trie and greedy longest match on small vocabularies whose segmentations
// are worked out by hand; with the real SmolLM2 GGUF (after `speclab fetch-model smollm2-135m`)
// its intersection with the byte vocabulary, checked against the tokenizer's own lookups, and
// round trips of its encodings.
#include "core/models/vocab_map.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"
#include "core/models/tokenizer.hpp"
#include "tests/support/error_of.hpp"
#include "tests/support/smollm2_tokenizer.hpp"

namespace speclab {
namespace {

using testing::error_of;
using Ids = std::vector<int32_t>;
using Strings = std::vector<std::string>;

Strings bytes_of(const TokenVocabulary& v) { return v.bytes; }

// ---- vocabularies -------------------------------------------------------------------------------

TEST(VocabMap, ByteVocabularySpellsEachByte) {
  const TokenVocabulary v = byte_vocabulary();
  EXPECT_EQ(v.name, "bytes");
  ASSERT_EQ(v.size(), 256);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(v.bytes[static_cast<size_t>(b)], std::string(1, static_cast<char>(b)));
    EXPECT_FALSE(v.is_control(b));
  }
}

TEST(VocabMap, RawVocabularyKeepsItsStrings) {
  const TokenVocabulary v = raw_vocabulary("toy", {"a", "bc", ""}, {0, 0, 1});
  EXPECT_EQ(bytes_of(v), (Strings{"a", "bc", ""}));
  EXPECT_TRUE(v.is_control(2));
  EXPECT_EQ(error_of([] {
              raw_vocabulary("toy", {"a", ""});
            }),
            "toy: token 1 is the empty string; expected every non-control token to spell at "
            "least one byte");
  EXPECT_EQ(error_of([] {
              raw_vocabulary("toy", {"a", "b"}, {0});
            }),
            "toy: 1 control flags for 2 strings; expected none or one per string");
}

// 'Ġ' (U+0120) is byte 0x20 and 'Ċ' (U+010A) byte 0x0A, the 33rd and 11th bytes outside the
// printable ranges; 'Âł' is C2 A0 (U+00A0, a no-break space: 'ł' is U+0141, the 66th such byte,
// 0xA0), 'ÃŃ' is C3 AD ('í': 'Ń' is U+0143, the 68th, 0xAD) and 'ġ' (U+0121, the 34th) is 0x7F.
// The last three are the symbols a reading of U+0100 + byte instead of U+0100 + order gets wrong.
TEST(VocabMap, Gpt2VocabularyReadsSymbolsBackToBytes) {
  const Strings strings = {"\u0120",       "\u010A",       "\u0120\u0120", "a",
                           "\u00C2\u0142", "\u00C3\u0143", "\u0121",       "\u0120the"};
  const TokenVocabulary v = gpt2_vocabulary("toy", strings);
  EXPECT_EQ(v.name, "toy");
  EXPECT_EQ(bytes_of(v), (Strings{" ", "\n", "  ", "a", "\xC2\xA0", "\xC3\xAD", "\x7F", " the"}));
}

TEST(VocabMap, Gpt2VocabularyReadsEverySymbol) {
  const Strings& symbols = gpt2_byte_symbols();
  const TokenVocabulary v = gpt2_vocabulary("symbols", symbols);
  EXPECT_EQ(bytes_of(v), bytes_of(byte_vocabulary()));
}

TEST(VocabMap, Gpt2VocabularyKeepsControlText) {
  const TokenVocabulary v =
      gpt2_vocabulary("toy", Strings{"<|im_end|>", "\u0120x"}, std::vector<uint8_t>{1, 0});
  EXPECT_EQ(bytes_of(v), (Strings{"<|im_end|>", " x"}));
  EXPECT_TRUE(v.is_control(0));
  EXPECT_FALSE(v.is_control(1));
}

TEST(VocabMap, Gpt2VocabularyRejectsCodePointsOutsideTheAlphabet) {
  // A space is U+0020, which the alphabet writes as 'Ġ'; U+00AD (soft hyphen) is written 'Ń'.
  EXPECT_EQ(error_of([] {
              gpt2_vocabulary("smol", Strings{"a", "a b"});
            }),
            "smol: token 1 'a b' has code point U+0020 at byte offset 1, which is not a GPT-2 byte "
            "symbol; expected only the 256 symbols of the byte-level alphabet");
  EXPECT_NE(error_of([] {
              gpt2_vocabulary("smol", Strings{"x\u00AD"});
            }).find("smol: token 0 'x\\xC2\\xAD' has code point U+00AD at byte offset 1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              gpt2_vocabulary("smol", Strings{"\u2581the"});
            }).find("has code point U+2581 at byte offset 0"),
            std::string::npos);
  EXPECT_EQ(error_of([] { gpt2_vocabulary("smol", Strings{"ab\xC3"}); }),
            "smol: token 0 'ab\\xC3' has invalid UTF-8 at byte offset 2 (byte 0xC3); expected a "
            "string of GPT-2 byte symbols");
}

TEST(VocabMap, SentencePieceVocabularyReadsSpacesAndBytePieces) {
  const Strings pieces = {"\u2581the", "<0x0A>", "<0xff>", "a\u2581\u2581b",
                          "<s>",       "\u2581", "<0x"};
  const TokenVocabulary v =
      sentencepiece_vocabulary("sp", pieces, std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0});
  EXPECT_EQ(bytes_of(v), (Strings{" the", "\n", "\xFF", "a  b", "<s>", " ", "<0x"}));
  EXPECT_TRUE(v.is_control(4));
}

TEST(VocabMap, SentencePieceVocabularyRejectsMalformedBytePieces) {
  EXPECT_EQ(error_of([] {
              sentencepiece_vocabulary("sp", Strings{"a", "<0xZZ>"});
            }),
            "sp: token 1 '<0xZZ>' is a malformed byte piece; expected \"<0xNN>\" with NN two hex "
            "digits");
  EXPECT_NE(error_of([] {
              sentencepiece_vocabulary("sp", Strings{"<0x1>"});
            }).find("sp: token 0 '<0x1>' is a malformed byte piece"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              sentencepiece_vocabulary("sp", Strings{"<0x0A0>"});
            }).find("malformed byte piece"),
            std::string::npos);
}

// ---- intersection -------------------------------------------------------------------------------

TEST(VocabMap, IntersectionMapsEqualStrings) {
  const TokenVocabulary target = raw_vocabulary("target", {"a", "b", "ab", "ba", "aba"});
  const TokenVocabulary draft = raw_vocabulary("draft", {"ba", "x", "aba", "a", "abab"});
  const VocabMap map = intersect_vocabularies(target, draft);
  EXPECT_EQ(map.draft_to_target, (Ids{3, -1, 4, 0, -1}));
  EXPECT_EQ(map.mapped, 3);
  EXPECT_EQ(map.unmapped_draft, (Ids{1, 4}));
  EXPECT_TRUE(map.target_collisions.empty());
  EXPECT_TRUE(map.draft_collisions.empty());
  EXPECT_EQ(map.summary(target, draft),
            "3 of 5 draft tokens (draft) map to the target (target); 2 unmapped ('x', 'abab'); "
            "collisions: none");
}

TEST(VocabMap, IntersectionReportsCollisionsOnBothSides) {
  // Target ids 1 and 3 both spell "ab", and 2 and 5 "b"; draft ids 0 and 2 both spell "ab".
  const TokenVocabulary target = raw_vocabulary("target", {"a", "ab", "b", "ab", "c", "b"});
  const TokenVocabulary draft = raw_vocabulary("draft", {"ab", "x", "ab", "b"});
  const VocabMap map = intersect_vocabularies(target, draft);
  EXPECT_EQ(map.draft_to_target, (Ids{1, -1, 1, 2}));  // the lowest target id of "ab" and "b"
  EXPECT_EQ(map.mapped, 3);
  EXPECT_EQ(map.unmapped_draft, (Ids{1}));
  EXPECT_EQ(map.target_collisions, (std::vector<Ids>{{1, 3}, {2, 5}}));
  EXPECT_EQ(map.draft_collisions, (std::vector<Ids>{{0, 2}}));
  EXPECT_EQ(map.summary(target, draft),
            "3 of 4 draft tokens (draft) map to the target (target); 1 unmapped ('x'); "
            "collisions: target 'ab' (ids 1, 3), 'b' (ids 2, 5); draft 'ab' (ids 0, 2)");
}

TEST(VocabMap, ControlTokensNeverMap) {
  // The draft's control "<e>" and the target's control "b" spell strings of the other side.
  const TokenVocabulary target = raw_vocabulary("target", {"a", "b", "<e>"}, {0, 1, 0});
  const TokenVocabulary draft = raw_vocabulary("draft", {"<e>", "b", "a"}, {1, 0, 0});
  const VocabMap map = intersect_vocabularies(target, draft);
  EXPECT_EQ(map.draft_to_target, (Ids{-1, -1, 0}));
  EXPECT_EQ(map.mapped, 1);
  EXPECT_EQ(map.unmapped_draft, (Ids{1}));
  EXPECT_EQ(map.summary(target, draft),
            "1 of 2 draft tokens (draft) map to the target (target); 1 unmapped ('b'); 1 draft "
            "control tokens excluded; collisions: none");
}

TEST(VocabMap, SummaryOfBytesAgainstASmallTargetShowsEightUnmapped) {
  const TokenVocabulary target = raw_vocabulary("toy", {"a", "b", "ab", "ba", "aba"});
  const TokenVocabulary draft = byte_vocabulary();
  const VocabMap map = intersect_vocabularies(target, draft);
  EXPECT_EQ(map.mapped, 2);
  EXPECT_EQ(map.draft_to_target['a'], 0);
  EXPECT_EQ(map.draft_to_target['b'], 1);
  EXPECT_EQ(map.unmapped_draft.size(), 254u);
  EXPECT_EQ(map.summary(target, draft),
            "2 of 256 draft tokens (bytes) map to the target (toy); 254 unmapped (0x00, 0x01, "
            "0x02, 0x03, 0x04, 0x05, 0x06, 0x07, ...); collisions: none");
  // Printable bytes are quoted, the quote and backslash escaped.
  const TokenVocabulary quotes = raw_vocabulary("q", {" ", "'", "\\", "\xC3\xA9"});
  EXPECT_EQ(intersect_vocabularies(target, quotes).summary(target, quotes),
            "0 of 4 draft tokens (q) map to the target (toy); 4 unmapped (' ', '\\x27', '\\x5C', "
            "'\\xC3\\xA9'); collisions: none");
}

// ---- byte trie and longest match ----------------------------------------------------------------

TEST(VocabMap, TrieHoldsThePrefixesOfTheStrings) {
  // Ids: a 0, b 1, ab 2, ba 3, aba 4, and a second "ab" 5 and a control "abc" 6 that do not count.
  const TokenVocabulary v =
      raw_vocabulary("toy", {"a", "b", "ab", "ba", "aba", "ab", "abc"}, {0, 0, 0, 0, 0, 0, 1});
  const ByteTrie trie(v);
  EXPECT_EQ(trie.nodes(), 6);  // the root, a, b, ab, ba, aba
  EXPECT_EQ(trie.max_length(), 3);
  EXPECT_EQ(trie.walk(ByteTrie::kRoot, ""), ByteTrie::kRoot);
  EXPECT_EQ(trie.token(ByteTrie::kRoot), -1);
  EXPECT_EQ(trie.token(trie.walk(ByteTrie::kRoot, "ab")), 2);
  EXPECT_EQ(trie.token(trie.walk(ByteTrie::kRoot, "aba")), 4);
  EXPECT_EQ(trie.walk(ByteTrie::kRoot, "abc"), ByteTrie::kNone);
  EXPECT_EQ(trie.walk(ByteTrie::kRoot, "c"), ByteTrie::kNone);
  EXPECT_EQ(trie.token(ByteTrie::kNone), -1);
  const int32_t a = trie.child(ByteTrie::kRoot, 'a');
  EXPECT_EQ(trie.child(a, 'b'), trie.walk(ByteTrie::kRoot, "ab"));
  EXPECT_EQ(trie.walk(a, "ba"), trie.walk(ByteTrie::kRoot, "aba"));
  const auto next = [&](std::string_view s) {
    const std::span<const uint8_t> bytes = trie.next_bytes(trie.walk(ByteTrie::kRoot, s));
    return std::string(bytes.begin(), bytes.end());
  };
  EXPECT_EQ(next(""), "ab");
  EXPECT_EQ(next("a"), "b");
  EXPECT_EQ(next("ab"), "a");
  EXPECT_EQ(next("aba"), "");
  EXPECT_EQ(next("b"), "a");

  // A proper prefix only: "abc" is in P but no string.
  const ByteTrie long_only(raw_vocabulary("toy", {"abcd", "x"}));
  EXPECT_EQ(long_only.token(long_only.walk(ByteTrie::kRoot, "abc")), -1);
  EXPECT_EQ(long_only.token(long_only.walk(ByteTrie::kRoot, "abcd")), 0);
}

TEST(VocabMap, LongestMatchTakesTheLongestStringAtEachOffset) {
  const TokenVocabulary v = raw_vocabulary("toy", {"a", "b", "ab", "ba", "aba"});
  const ByteTrie trie(v);
  size_t consumed = 99;
  EXPECT_EQ(encode_longest_match(trie, "abab", &consumed), (Ids{4, 1}));  // aba|b, not ab|ab
  EXPECT_EQ(consumed, 4u);
  EXPECT_EQ(encode_longest_match(trie, "abba"), (Ids{2, 3}));           // ab|ba
  EXPECT_EQ(encode_longest_match(trie, "baba"), (Ids{3, 3}));           // ba|ba
  EXPECT_EQ(encode_longest_match(trie, "abaab"), (Ids{4, 2}));          // aba|ab
  EXPECT_EQ(encode_longest_match(trie, "abcab", &consumed), (Ids{2}));  // stops before 'c'
  EXPECT_EQ(consumed, 2u);
  EXPECT_EQ(encode_longest_match(trie, "cab", &consumed), (Ids{}));
  EXPECT_EQ(consumed, 0u);
  EXPECT_EQ(encode_longest_match(trie, "", &consumed), (Ids{}));
  EXPECT_EQ(consumed, 0u);
}

TEST(VocabMap, LongestMatchFallsBackWhenTheLongestPrefixIsNoString) {
  // "abc" is the longest P-prefix of "abcx" but no string: the match is "a", then "b", "c".
  const TokenVocabulary v = raw_vocabulary("toy", {"a", "b", "c", "abcd", "bc"});
  const ByteTrie trie(v);
  size_t consumed = 0;
  EXPECT_EQ(encode_longest_match(trie, "abcx", &consumed), (Ids{0, 4}));  // a|bc, then no 'x'
  EXPECT_EQ(consumed, 3u);
  EXPECT_EQ(encode_longest_match(trie, "abcdabc"), (Ids{3, 0, 4}));
  // Collisions: the lowest id.
  const ByteTrie twice(raw_vocabulary("toy", {"x", "ab", "a", "ab"}));
  EXPECT_EQ(encode_longest_match(twice, "aba"), (Ids{1, 2}));
}

TEST(VocabMap, LongestMatchOverBytesIsTheBytes) {
  const ByteTrie trie(byte_vocabulary());
  EXPECT_EQ(trie.nodes(), 257);
  EXPECT_EQ(trie.max_length(), 1);
  const std::string s("a\0\xFF\n", 4);
  EXPECT_EQ(encode_longest_match(trie, s), (Ids{'a', 0, 0xFF, '\n'}));
}

TEST(VocabMap, DecodeTokensConcatenatesAndChecksIds) {
  const TokenVocabulary v = raw_vocabulary("toy", {"a", "bc", "<e>"}, {0, 0, 1});
  EXPECT_EQ(decode_tokens(v, Ids{1, 0, 2, 1}), "bca<e>bc");
  EXPECT_EQ(decode_tokens(v, Ids{}), "");
  EXPECT_EQ(error_of([&] {
              decode_tokens(v, Ids{0, 3});
            }),
            "toy: token id 3 at position 1 is outside [0, 3)");
  EXPECT_NE(error_of([&] { decode_tokens(v, Ids{-1}); }).find("token id -1 at position 0"),
            std::string::npos);
}

// ---- the real model -----------------------------------------------------------------------------

using testing::smollm2;

const TokenVocabulary& smollm2_vocabulary() {
  static const TokenVocabulary vocabulary = vocabulary_of(smollm2(), "smollm2-135m");
  return vocabulary;
}

TEST(VocabMapSmolLM2, VocabularyIsTheTokenizers) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const TokenVocabulary& v = smollm2_vocabulary();
  EXPECT_EQ(v.name, "smollm2-135m");
  ASSERT_EQ(v.size(), tok.n_vocab());
  int controls = 0;
  for (int32_t id = 0; id < v.size(); ++id) {
    EXPECT_EQ(v.is_control(id), tok.is_control(id)) << "id " << id;
    EXPECT_EQ(v.bytes[static_cast<size_t>(id)], tok.decode(Ids{id})) << "id " << id;
    controls += v.is_control(id) ? 1 : 0;
  }
  EXPECT_EQ(controls, 17);
  EXPECT_EQ(v.bytes[static_cast<size_t>(tok.token_id("\u0120World"))], " World");
  EXPECT_EQ(v.bytes[2], "<|im_end|>");
}

TEST(VocabMapSmolLM2, BytesMapToTheirSymbolTokens) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const TokenVocabulary& target = smollm2_vocabulary();
  const TokenVocabulary draft = byte_vocabulary();
  const VocabMap map = intersect_vocabularies(target, draft);
  // Expected from the tokenizer's own lookup of each byte's symbol.
  Ids expected_unmapped;
  for (int b = 0; b < 256; ++b) {
    const int32_t id = tok.token_id(gpt2_byte_symbols()[static_cast<size_t>(b)]);
    EXPECT_EQ(map.draft_to_target[static_cast<size_t>(b)], id) << "byte " << b;
    if (id < 0) expected_unmapped.push_back(b);
  }
  EXPECT_EQ(map.unmapped_draft, expected_unmapped);
  // The bytes tokenizer.hpp names, and the bytes that never occur in UTF-8
  // (0xC0, 0xC1, 0xF5 to 0xFF).
  EXPECT_EQ(map.unmapped_draft,
            (Ids{0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5,
                 0xF6, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF}));
  EXPECT_EQ(map.mapped, 235);
  EXPECT_EQ(map.draft_to_target[' '], tok.token_id("\u0120"));
  EXPECT_EQ(map.draft_to_target['\n'], tok.token_id("\u010A"));
  EXPECT_EQ(map.draft_to_target['a'], tok.token_id("a"));
  EXPECT_EQ(map.draft_to_target[' '], 216);  // ids read in tokenizer_test.cpp
  EXPECT_EQ(map.draft_to_target['\n'], 198);
  EXPECT_EQ(map.draft_to_target['a'], 81);
  EXPECT_TRUE(map.target_collisions.empty());
  EXPECT_TRUE(map.draft_collisions.empty());
  EXPECT_EQ(map.summary(target, draft),
            "235 of 256 draft tokens (bytes) map to the target (smollm2-135m); 21 unmapped (0x04, "
            "0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, ...); collisions: none");

  // The other way round: the single-byte tokens map, the 17 control tokens are left out.
  const VocabMap back = intersect_vocabularies(draft, target);
  EXPECT_EQ(back.mapped, 235);
  EXPECT_EQ(back.draft_to_target[static_cast<size_t>(tok.token_id("\u0120"))], ' ');
  EXPECT_EQ(back.draft_to_target[2], -1);
  EXPECT_EQ(static_cast<int64_t>(back.unmapped_draft.size()), target.size() - 17 - 235);
}

TEST(VocabMapSmolLM2, EncodingsDecodeBack) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const TokenVocabulary& v = smollm2_vocabulary();
  const ByteTrie trie(v);
  const Strings texts = {
      "Hello, World!",
      "The quick brown fox jumps over the lazy dog.",
      "  tabs\t\tand\nnew\r\nlines\n\n",
      "caf\xC3\xA9 na\xC3\xAFve \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
      "emoji \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87",
      "<|im_start|>user\nHi<|im_end|>\n",
  };
  for (const std::string& s : texts) {
    EXPECT_EQ(decode_tokens(v, tok.encode(s)), s) << "text: " << s;
    size_t consumed = 0;
    const Ids longest = encode_longest_match(trie, s, &consumed);
    EXPECT_EQ(decode_tokens(v, longest), s) << "text: " << s;
    EXPECT_EQ(consumed, s.size()) << "text: " << s;  // every byte here has a token
  }
}

TEST(VocabMapSmolLM2, TrieWalksTokens) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const ByteTrie trie(smollm2_vocabulary());
  const int32_t the = trie.walk(ByteTrie::kRoot, " the");
  ASSERT_NE(the, ByteTrie::kNone);
  EXPECT_EQ(trie.token(the), tok.token_id("\u0120the"));
  EXPECT_GE(trie.token(the), 0);
  EXPECT_EQ(trie.token(trie.walk(ByteTrie::kRoot, " World")), 2260);
  EXPECT_EQ(trie.walk(ByteTrie::kRoot, "<|im_end|>"), ByteTrie::kNone);  // control text
  EXPECT_EQ(trie.child(ByteTrie::kRoot, 0x04), ByteTrie::kNone);
  EXPECT_EQ(trie.next_bytes(ByteTrie::kRoot).size(), 235u);
  int64_t longest = 0;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_control(id)) continue;
    longest = std::max(longest, static_cast<int64_t>(tok.decode(Ids{id}).size()));
  }
  EXPECT_EQ(trie.max_length(), longest);
}

TEST(VocabMapSmolLM2, EncodeBytesCoversInvalidUtf8) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  const TokenVocabulary& v = smollm2_vocabulary();
  // A stray continuation byte: its own token between the encodings of the valid runs.
  const int32_t stray = tok.token_id(gpt2_byte_symbols()[0x80]);
  ASSERT_GE(stray, 0);
  size_t consumed = 0;
  const std::string text = "ab\x80 c";
  const Ids ids = encode_bytes(tok, text, &consumed);
  EXPECT_EQ(consumed, text.size());
  EXPECT_EQ(decode_tokens(v, ids), text);
  Ids expected = tok.encode("ab");
  expected.push_back(stray);
  for (int32_t id : tok.encode(" c")) expected.push_back(id);
  EXPECT_EQ(ids, expected);

  // Truncated characters: each of their bytes alone; control text is encoded whole.
  for (const std::string s : {"caf\xC3", "\xE4\xB8 x\x80\x80y", "<|im_end|>\xE2\x96\n", "\xC3("}) {
    const Ids got = encode_bytes(tok, s, &consumed);
    EXPECT_EQ(consumed, s.size()) << "text: " << s;
    EXPECT_EQ(decode_tokens(v, got), s) << "text: " << s;
  }
  EXPECT_EQ(encode_bytes(tok, "<|im_end|>\x80"), (Ids{2, stray}));
  EXPECT_EQ(encode_bytes(tok, "valid text"), tok.encode("valid text"));
  EXPECT_EQ(encode_bytes(tok, "", &consumed), (Ids{}));
  EXPECT_EQ(consumed, 0u);
}

TEST(VocabMapSmolLM2, EncodeBytesStopsBeforeAByteWithoutToken) {
  SPECLAB_REQUIRE_MODEL();
  const BpeTokenizer& tok = smollm2();
  size_t consumed = 99;
  EXPECT_EQ(encode_bytes(tok,
                         std::string("ab\x04"
                                     "cd",
                                     5),
                         &consumed),
            tok.encode("ab"));
  EXPECT_EQ(consumed, 2u);
  // 0xFF is never UTF-8, and SmolLM2 has no token for it.
  EXPECT_EQ(encode_bytes(tok, "ab\xFF c", &consumed), tok.encode("ab"));
  EXPECT_EQ(consumed, 2u);
  // 0xF1 leads a valid character of plane 4 and an invalid sequence alike: no token either way.
  EXPECT_EQ(encode_bytes(tok, "x\xF1\x80\x80\x80", &consumed), tok.encode("x"));
  EXPECT_EQ(consumed, 1u);
  EXPECT_EQ(encode_bytes(tok, "\x80\xF1z", &consumed),
            (Ids{tok.token_id(gpt2_byte_symbols()[0x80])}));
  EXPECT_EQ(consumed, 1u);
  EXPECT_EQ(encode_bytes(tok, std::string("\x04", 1), &consumed), (Ids{}));
  EXPECT_EQ(consumed, 0u);
}

}  // namespace
}  // namespace speclab
