// Properties of the vocabularies as byte strings (core/models/vocab_map.hpp) over random byte
// strings with all 256 byte values: a string written in the GPT-2 byte alphabet reads back to its
// bytes, the intersection of the GPT-2 and the raw vocabulary of the same strings maps every id
// to the lowest id of its string, and greedy longest match over the byte trie decodes back to its
// input with the longest string taken at each offset. The first two are what the mutant sweep
// (scripts/mutant_sweep.sh) reads the GPT-2 symbol mutant with.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/models/tokenizer.hpp"
#include "core/models/vocab_map.hpp"

namespace speclab {
namespace {

// A byte string of length [min_length, 12], every byte value equally likely from the first test on
// (at full size, where inRange is uniform).
rc::Gen<std::string> gen_bytes(int min_length) {
  const rc::Gen<char> byte = rc::gen::resize(
      rc::kNominalSize,
      rc::gen::map(rc::gen::inRange(0, 256), [](int b) { return static_cast<char>(b); }));
  return rc::gen::mapcat(rc::gen::inRange(min_length, 13), [byte](int length) {
    return rc::gen::container<std::string>(static_cast<size_t>(length), byte);
  });
}

// Non-empty strings, some of them repeated.
std::vector<std::string> gen_strings() {
  std::vector<std::string> strings =
      *rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(gen_bytes(1)));
  const int repeats = *rc::gen::inRange(0, 3);
  for (int k = 0; k < repeats; ++k) {
    strings.push_back(strings[*rc::gen::inRange<size_t>(0, strings.size())]);
  }
  return strings;
}

// `bytes` in the GPT-2 byte alphabet.
std::string gpt2_string(const std::string& bytes) {
  std::string out;
  for (char c : bytes) out += gpt2_byte_symbols()[static_cast<unsigned char>(c)];
  return out;
}

std::vector<std::string> gpt2_strings(const std::vector<std::string>& strings) {
  std::vector<std::string> out;
  for (const std::string& s : strings) out.push_back(gpt2_string(s));
  return out;
}

RC_GTEST_PROP(VocabMapProperty, Gpt2StringsReadBackToTheirBytes, ()) {
  const std::vector<std::string> strings = gen_strings();
  const TokenVocabulary v = gpt2_vocabulary("random", gpt2_strings(strings));
  RC_ASSERT(v.bytes == strings);
  RC_ASSERT(v.size() == static_cast<int64_t>(strings.size()));
}

RC_GTEST_PROP(VocabMapProperty, IntersectionMapsEachIdToItsString, ()) {
  const std::vector<std::string> strings = gen_strings();
  const TokenVocabulary target = gpt2_vocabulary("gpt2", gpt2_strings(strings));
  const TokenVocabulary draft = raw_vocabulary("raw", strings);
  const VocabMap map = intersect_vocabularies(target, draft);
  std::map<std::string, std::vector<int32_t>> ids_of;
  for (size_t id = 0; id < strings.size(); ++id) {
    ids_of[strings[id]].push_back(static_cast<int32_t>(id));
  }
  for (size_t id = 0; id < strings.size(); ++id) {
    RC_ASSERT(map.draft_to_target[id] == ids_of[strings[id]].front());
  }
  RC_ASSERT(map.mapped == static_cast<int64_t>(strings.size()));
  RC_ASSERT(map.unmapped_draft.empty());
  std::vector<std::vector<int32_t>> collisions;
  for (const auto& [s, ids] : ids_of) {
    if (ids.size() > 1) collisions.push_back(ids);
  }
  std::sort(collisions.begin(), collisions.end());
  RC_ASSERT(map.target_collisions == collisions);
  RC_ASSERT(map.draft_collisions == collisions);
}

RC_GTEST_PROP(VocabMapProperty, LongestMatchDecodesBackTakingTheLongestString, ()) {
  // Random strings over a small alphabet, so that they overlap, and every single byte of it.
  const auto gen_text = [] {
    return rc::gen::container<std::string>(rc::gen::element('a', 'b', 'c'));
  };
  std::vector<std::string> strings = {"a", "b"};
  for (const std::string& s :
       *rc::gen::container<std::vector<std::string>>(rc::gen::nonEmpty(gen_text()))) {
    strings.push_back(s);
  }
  const TokenVocabulary v = raw_vocabulary("toy", strings);
  const ByteTrie trie(v);
  const std::string text = *gen_text();
  size_t consumed = 0;
  const std::vector<int32_t> ids = encode_longest_match(trie, text, &consumed);
  RC_ASSERT(decode_tokens(v, ids) == text.substr(0, consumed));
  // Stops only where no string starts.
  for (const std::string& s : strings) {
    RC_ASSERT(consumed == text.size() || text.compare(consumed, s.size(), s) != 0);
  }
  size_t offset = 0;
  for (int32_t id : ids) {
    const std::string& s = v.bytes[static_cast<size_t>(id)];
    for (size_t k = 0; k < strings.size(); ++k) {
      const bool is_prefix = text.compare(offset, strings[k].size(), strings[k]) == 0;
      // No longer string at this offset; the lowest id among equal ones.
      RC_ASSERT(!is_prefix || strings[k].size() < s.size() ||
                (strings[k] == s && static_cast<int32_t>(k) >= id));
    }
    offset += s.size();
  }
}

}  // namespace
}  // namespace speclab
