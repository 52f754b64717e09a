// Vocabularies as byte strings, and the maps between two of them that the heterogeneous-vocabulary
// verifiers read (docs/verifiers.md "Drafts from another vocabulary"): the token-level intersection
// (ids of the two vocabularies that spell the same bytes), a byte trie of a vocabulary's strings
// (prefix tests and maximal munch), and string <-> token conversions for either side.
//
// Real vocabularies do not store bytes: GPT-2 byte-level BPE (SmolLM2, Llama 3, Qwen) writes each
// byte as a printable code point ('Ġ' for a space, 'Ċ' for a newline), and SentencePiece writes a
// space as '▁' and an unknown byte as "<0xNN>". TokenVocabulary reads each form back to bytes, so
// that two vocabularies are compared by what their tokens spell.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

class BpeTokenizer;

/// A vocabulary: the bytes each id spells. Control tokens ("<|im_end|>") spell no text: they never
/// map and never match a string.
struct TokenVocabulary {
  std::string name;                ///< for messages: "smollm2-135m", "bytes"
  std::vector<std::string> bytes;  ///< [V] the bytes of each id (the control text for a control)
  std::vector<uint8_t> control;    ///< [V] 1 for a control token

  int64_t size() const { return static_cast<int64_t>(bytes.size()); }
  bool is_control(int32_t id) const { return control[static_cast<size_t>(id)] != 0; }
};

/// The 256-id vocabulary of the byte-level models (ngram-N, prompt-lookup): id b spells byte b.
TokenVocabulary byte_vocabulary();

/// A GPT-2 byte-level vocabulary from its stored strings: every code point of a non-control string
/// must be one of gpt2_byte_symbols() (core/models/tokenizer.hpp) and stands for its byte.
/// `control` may be empty (no control tokens) or hold one flag per string. Throws InvalidInput
/// naming `name`, the id and the code point for a string that is not in the byte alphabet.
TokenVocabulary gpt2_vocabulary(std::string name, std::span<const std::string> strings,
                                std::span<const uint8_t> control = {});

/// A SentencePiece vocabulary from its pieces: "▁" (U+2581) is a space, "<0xNN>" is byte NN, every
/// other piece spells its own UTF-8 bytes. `control` as above. Throws InvalidInput naming `name`
/// and the id for a malformed "<0x..>" piece.
TokenVocabulary sentencepiece_vocabulary(std::string name, std::span<const std::string> pieces,
                                         std::span<const uint8_t> control = {});

/// A vocabulary whose strings are already bytes (synthetic tokenizers, tests). Throws InvalidInput
/// naming `name` and the id for an empty string.
TokenVocabulary raw_vocabulary(std::string name, std::vector<std::string> strings,
                               std::vector<uint8_t> control = {});

/// SmolLM2's (or any GGUF gpt2 tokenizer's) vocabulary.
TokenVocabulary vocabulary_of(const BpeTokenizer& tokenizer, std::string name);

/// The token-level intersection of a draft and a target vocabulary: draft id -> the target id
/// that spells the same bytes (control tokens excluded), with what did not map.
struct VocabMap {
  std::vector<int32_t> draft_to_target;  ///< [V_draft] target id, or -1
  int64_t mapped = 0;                    ///< draft ids with a target id
  std::vector<int32_t> unmapped_draft;   ///< non-control draft ids no target id spells
  /// Ids of one vocabulary that spell the same bytes as another id of that vocabulary: each entry
  /// lists the ids of one string, lowest first. A target collision maps to its lowest id.
  std::vector<std::vector<int32_t>> target_collisions, draft_collisions;

  /// "250 of 256 draft tokens map; 6 unmapped (first: 0x04 ...); no collisions".
  std::string summary(const TokenVocabulary& target, const TokenVocabulary& draft) const;
};

/// Intersects two vocabularies by their bytes.
VocabMap intersect_vocabularies(const TokenVocabulary& target, const TokenVocabulary& draft);

/// A byte trie of a vocabulary's non-control strings: the set P of their non-empty prefixes, the
/// id each complete string spells (its lowest id on collisions), and the bytes that extend a
/// prefix within P.
class ByteTrie {
 public:
  explicit ByteTrie(const TokenVocabulary& vocabulary);

  static constexpr int32_t kRoot = 0;  ///< the empty string
  static constexpr int32_t kNone = -1;

  /// The node of `bytes` appended to `node`, or kNone when that string is not in P.
  int32_t child(int32_t node, uint8_t byte) const;
  int32_t walk(int32_t node, std::string_view bytes) const;
  /// The id spelled by the string of `node`, or -1 when it is a proper prefix only.
  int32_t token(int32_t node) const;
  /// The bytes c such that child(node, c) != kNone, ascending.
  std::span<const uint8_t> next_bytes(int32_t node) const;
  /// Length in bytes of the longest string.
  int64_t max_length() const { return max_length_; }
  int64_t nodes() const { return static_cast<int64_t>(token_.size()); }

 private:
  std::vector<int32_t> first_edge_, edge_count_;  // per node: its edges in edges_
  std::vector<uint8_t> edge_byte_;
  std::vector<int32_t> edge_child_;
  std::vector<int32_t> token_;
  int64_t max_length_ = 0;
};

/// The id of each byte (-1 for a byte no token spells) when every non-control token spells exactly
/// one byte and no two the same (a byte-level vocabulary, whose strings have one tokenization
/// each), else empty.
std::vector<int32_t> single_byte_ids(const TokenVocabulary& vocabulary);

/// The bytes of `ids` concatenated (control tokens give their text). InvalidInput naming the
/// position for an id outside the vocabulary.
std::string decode_tokens(const TokenVocabulary& vocabulary, std::span<const int32_t> ids);

/// Greedy longest-match tokenisation over the trie: at each offset the longest string of the
/// vocabulary that is a prefix of the rest. Stops before the first byte no string starts with;
/// `consumed` (when given) receives the bytes covered. The canonical tokenizer of the synthetic
/// vocabularies, and of a byte vocabulary (its bytes).
std::vector<int32_t> encode_longest_match(const ByteTrie& trie, std::string_view bytes,
                                          size_t* consumed = nullptr);

/// A GGUF BPE tokenizer's encoding of arbitrary bytes, for text a draft wrote: each maximal run of
/// valid UTF-8 is encoded by the tokenizer (control-token text included); a byte that is not
/// valid UTF-8 there becomes its single-byte token. Stops before a byte the vocabulary has no
/// token for; `consumed` as above.
std::vector<int32_t> encode_bytes(const BpeTokenizer& tokenizer, std::string_view bytes,
                                  size_t* consumed = nullptr);

}  // namespace speclab
