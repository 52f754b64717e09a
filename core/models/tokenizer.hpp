// Byte-level BPE tokenizer (GPT-2 style) read from a GGUF file, for the real target model
// SmolLM2-135M (issue "A real LLM as target"): bytes → GPT-2 unicode alphabet, the "smollm"
// pre-tokenizer of llama.cpp (every \p{N} alone, then the GPT-2 regex), merges by rank, CONTROL
// tokens matched whole, and the ChatML chat template.
//
// Limitation: \p{L}, \p{N} and \s are decided by a small hand-written classifier (ASCII, Latin-1,
// Latin Extended, Greek, Cyrillic, Armenian, Hebrew, Arabic, Devanagari, Thai, CJK, kana, Hangul,
// common digit blocks). Letters of other scripts and combining marks count as "other" (the
// punctuation class), so their split may differ from llama.cpp / Hugging Face; decode(encode(s))
// == s holds regardless, since the encoding is byte-level.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace speclab {

class GgufFile;

/// The 256 GPT-2 byte symbols (bytes_to_unicode in openai/gpt-2 encoder.py): entry b is the UTF-8
/// text of the code point byte b stands for in the vocabulary ('!'..'~', '¡'..'¬', '®'..'ÿ' as
/// themselves, the other 68 bytes as U+0100 + their order, e.g. ' ' → "Ġ", '\n' → "Ċ").
const std::vector<std::string>& gpt2_byte_symbols();

/// Unicode classes the pre-tokenizer uses (see the limitation above).
bool unicode_is_letter(char32_t cp);
bool unicode_is_number(char32_t cp);
bool unicode_is_space(char32_t cp);

/// One UTF-8 sequence at text[i]: its code point and byte length; length 0 where text[i] starts
/// no valid sequence (truncated, overlong, surrogate, above U+10FFFF, stray continuation byte).
struct Utf8Char {
  char32_t cp = 0;
  int length = 0;
};
Utf8Char read_utf8(std::string_view text, size_t i);

/// Throws InvalidInput naming `what` and the byte offset of the first invalid UTF-8 sequence
/// (truncated, overlong, surrogate, above U+10FFFF, stray continuation byte).
void check_utf8(std::string_view text, std::string_view what = "text");

/// The "smollm" pre-tokenisation of `text` (valid UTF-8, no special tokens): each \p{N} code point
/// alone, then on every other run 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
/// \s+(?!\S)|\s+. Returns views into `text` that concatenate to it.
std::vector<std::string_view> pretokenize_smollm(std::string_view text);

/// One turn of a conversation.
struct ChatMessage {
  std::string role;  ///< "system", "user", "assistant"
  std::string content;
};

/// GPT-2 byte-level BPE over a GGUF vocabulary (tokenizer.ggml.model "gpt2").
class BpeTokenizer {
 public:
  /// Reads tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,eos_token_id} and
  /// tokenizer.chat_template. InvalidInput naming the file and key when the model is not "gpt2",
  /// the pre-tokenizer is not "smollm", arrays disagree in length, or a merge names an unknown
  /// token.
  explicit BpeTokenizer(const GgufFile& gguf);

  /// Token ids of `text`. CONTROL tokens (token_type 3, e.g. "<|im_start|>") written in the text
  /// become their single id (longest match first). InvalidInput naming the byte offset for invalid
  /// UTF-8, and for a byte the vocabulary has no symbol for (SmolLM2 lacks 0x04, 0x06, 0x13, 0x14,
  /// 0x16, 0x1D and the lead bytes 0xF1, 0xF2 of planes 4 to 11).
  std::vector<int32_t> encode(std::string_view text) const;

  /// The bytes of `ids` concatenated; CONTROL tokens give their text. The result may be invalid
  /// UTF-8 when the ids cut a character. InvalidInput naming the position for an id outside
  /// [0, n_vocab()).
  std::string decode(std::span<const int32_t> ids) const;

  /// The conversation in ChatML: "<|im_start|>role\ncontent<|im_end|>\n" per message, preceded
  /// by the template's default system message when the first message is not "system", and
  /// followed by "<|im_start|>assistant\n" when `add_generation_prompt`. InvalidInput when the
  /// GGUF chat template is not ChatML.
  std::string apply_chat_template(std::span<const ChatMessage> messages,
                                  bool add_generation_prompt = true) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  /// The vocabulary string of `id` (GPT-2 alphabet, e.g. "ĠWorld"); InvalidInput when out of range.
  const std::string& token_text(int32_t id) const;
  /// The id of vocabulary string `text`, or -1.
  int32_t token_id(std::string_view text) const;
  bool is_control(int32_t id) const;

 private:
  void bpe(std::string_view piece, size_t offset, std::vector<int32_t>& out) const;
  void check_id(int32_t id, size_t position) const;

  struct Merge {
    int32_t rank = 0;
    int32_t merged = 0;
  };
  std::vector<std::string> tokens_;
  std::vector<int32_t> token_types_;
  std::vector<std::string> token_bytes_;  // decoded bytes of each token
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) → rank, result
  int32_t byte_ids_[256];                       // token of each byte symbol, -1 when absent
  std::vector<std::vector<int32_t>> control_by_first_byte_;  // 256 lists, longest first
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  std::string chat_template_;
  std::string default_system_;
  std::string file_name_;
};

}  // namespace speclab
