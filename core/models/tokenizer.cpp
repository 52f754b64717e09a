// Byte-level BPE tokenizer (core/models/tokenizer.hpp). The pre-tokenizer follows llama.cpp's
// hand-written GPT-2 splitter (unicode_regex_split_custom_gpt2) applied after the \p{N} split of
// "smollm".
#include "core/models/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"

namespace speclab {
namespace {

constexpr int32_t kTokenTypeControl = 3;

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}


struct CodePoint {
  char32_t cp;
  size_t offset;  // of its first byte in the text
};

std::vector<CodePoint> code_points(std::string_view text) {
  std::vector<CodePoint> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const Utf8Char d = read_utf8(text, i);
    cps.push_back({d.cp, i});
    i += d.length;
  }
  return cps;
}

bool in(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

// The GPT-2 regex on code points [begin, end) of one non-digit run; appends match ends.
void split_gpt2(const std::vector<CodePoint>& cps, size_t begin, size_t end,
                std::vector<size_t>& ends) {
  const auto cp_at = [&](size_t k) -> char32_t { return k < end ? cps[k].cp : 0; };
  const auto is_other = [](char32_t c) {
    return !unicode_is_space(c) && !unicode_is_letter(c) && !unicode_is_number(c);
  };
  size_t i = begin;
  while (i < end) {
    const char32_t c = cps[i].cp;
    // 's|'t|'re|'ve|'m|'ll|'d
    if (c == U'\'' && i + 1 < end) {
      const char32_t c1 = cp_at(i + 1);
      if (c1 == U's' || c1 == U't' || c1 == U'm' || c1 == U'd') {
        ends.push_back(i += 2);
        continue;
      }
      if (i + 2 < end) {
        const char32_t c2 = cp_at(i + 2);
        if ((c1 == U'r' && c2 == U'e') || (c1 == U'v' && c2 == U'e') ||
            (c1 == U'l' && c2 == U'l')) {
          ends.push_back(i += 3);
          continue;
        }
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
    const size_t start = (c == U' ' && i + 1 < end) ? i + 1 : i;
    const char32_t first = cps[start].cp;
    bool (*cls)(char32_t) = nullptr;
    if (unicode_is_letter(first)) {
      cls = unicode_is_letter;
    } else if (unicode_is_number(first)) {
      cls = unicode_is_number;
    } else if (is_other(first)) {
      cls = is_other;
    }
    if (cls != nullptr) {
      size_t j = start + 1;
      while (j < end && cls(cps[j].cp)) ++j;
      ends.push_back(i = j);
      continue;
    }
    // '\s+(?!\S)|\s+': a whitespace run keeps its last character for the next word.
    size_t j = i + 1;
    while (j < end && unicode_is_space(cps[j].cp)) ++j;
    if (j < end && j - i > 1) --j;
    ends.push_back(i = j);
  }
}

}  // namespace

Utf8Char read_utf8(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return {b0, 1};
  int length = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    length = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    length = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    length = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (i + length > text.size()) return {};
  for (int k = 1; k < length; ++k) {
    const unsigned char b = byte(i + k);
    if ((b & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {cp, length};
}

const std::vector<std::string>& gpt2_byte_symbols() {
  static const std::vector<std::string> symbols = [] {
    std::vector<std::string> s(256);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = in(b, '!', '~') || in(b, 0xA1, 0xAC) || in(b, 0xAE, 0xFF);
      append_utf8(s[b], printable ? static_cast<char32_t>(b) : next++);
    }
    return s;
  }();
  return symbols;
}

bool unicode_is_letter(char32_t c) {
  if (c < 0x80) return in(c, 'A', 'Z') || in(c, 'a', 'z');
  if (c < 0x100) {
    return c == 0xAA || c == 0xB5 || c == 0xBA || in(c, 0xC0, 0xD6) || in(c, 0xD8, 0xF6) ||
           c >= 0xF8;
  }
  return in(c, 0x100, 0x2C1) ||                         // Latin Extended-A/B, IPA
         in(c, 0x2C6, 0x2D1) || in(c, 0x2E0, 0x2E4) ||  // modifier letters
         in(c, 0x370, 0x374) || in(c, 0x376, 0x377) || in(c, 0x37A, 0x37D) || c == 0x37F ||
         c == 0x386 || in(c, 0x388, 0x3F5) || in(c, 0x3F7, 0x481) ||           // Greek, Cyrillic
         in(c, 0x48A, 0x52F) || in(c, 0x531, 0x556) || in(c, 0x561, 0x587) ||  // Armenian
         in(c, 0x5D0, 0x5EA) || in(c, 0x620, 0x64A) ||                         // Hebrew, Arabic
         in(c, 0x904, 0x939) || in(c, 0xE01, 0xE30) ||                         // Devanagari, Thai
         in(c, 0x10A0, 0x10FF) || in(c, 0x1100, 0x11FF) ||  // Georgian, Hangul Jamo
         in(c, 0x1E00, 0x1FBC) ||                           // Latin/Greek Extended
         in(c, 0x3041, 0x3096) || in(c, 0x30A1, 0x30FA) ||  // Hiragana, Katakana
         in(c, 0x3400, 0x4DBF) || in(c, 0x4E00, 0x9FFF) ||  // CJK
         in(c, 0xAC00, 0xD7A3) ||                           // Hangul syllables
         in(c, 0xFF21, 0xFF3A) || in(c, 0xFF41, 0xFF5A) ||  // fullwidth Latin
         in(c, 0x20000, 0x2FA1F);                           // CJK extensions
}

bool unicode_is_number(char32_t c) {
  if (c < 0x80) return in(c, '0', '9');
  return c == 0xB2 || c == 0xB3 || c == 0xB9 || in(c, 0xBC, 0xBE) ||  // ²³¹¼½¾
         in(c, 0x660, 0x669) || in(c, 0x6F0, 0x6F9) || in(c, 0x966, 0x96F) || in(c, 0xE50, 0xE59) ||
         c == 0x2070 || in(c, 0x2074, 0x2079) || in(c, 0x2080, 0x2089) ||
         in(c, 0x2150, 0x2189) ||                           // fractions, Roman numerals
         in(c, 0x2460, 0x249B) || in(c, 0x24EA, 0x24FF) ||  // circled numbers
         in(c, 0x2776, 0x2793) || in(c, 0xFF10, 0xFF19);
}

bool unicode_is_space(char32_t c) {
  return in(c, 0x09, 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         in(c, 0x2000, 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

void check_utf8(std::string_view text, std::string_view what) {
  for (size_t i = 0; i < text.size();) {
    const Utf8Char d = read_utf8(text, i);
    if (d.length == 0) {
      throw InvalidInput(
          fmt::format("{}: invalid UTF-8 at byte offset {} (byte 0x{:02X}); expected UTF-8 text",
                      what, i, static_cast<unsigned char>(text[i])));
    }
    i += d.length;
  }
}

std::vector<std::string_view> pretokenize_smollm(std::string_view text) {
  check_utf8(text);
  const std::vector<CodePoint> cps = code_points(text);
  std::vector<size_t> ends;  // code point index where each piece ends
  size_t run = 0;            // start of the current non-number run
  for (size_t i = 0; i < cps.size(); ++i) {
    if (!unicode_is_number(cps[i].cp)) continue;
    if (run < i) split_gpt2(cps, run, i, ends);
    ends.push_back(i + 1);
    run = i + 1;
  }
  if (run < cps.size()) split_gpt2(cps, run, cps.size(), ends);

  std::vector<std::string_view> pieces;
  pieces.reserve(ends.size());
  size_t from = 0;
  for (size_t end : ends) {
    const size_t to = end < cps.size() ? cps[end].offset : text.size();
    pieces.push_back(text.substr(from, to - from));
    from = to;
  }
  return pieces;
}

BpeTokenizer::BpeTokenizer(const GgufFile& gguf) : file_name_(gguf.name()) {
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  if (model != "gpt2") {
    throw InvalidInput(fmt::format(
        "{}: tokenizer.ggml.model is '{}'; expected 'gpt2' (byte-level BPE)", file_name_, model));
  }
  const GgufValue* pre = gguf.find("tokenizer.ggml.pre");
  if (pre != nullptr && pre->as_string() != "smollm") {
    throw InvalidInput(fmt::format(
        "{}: tokenizer.ggml.pre is '{}'; expected 'smollm' (the only pre-tokenizer implemented)",
        file_name_, pre->as_string()));
  }
  tokens_ = gguf.at("tokenizer.ggml.tokens").strings();
  const GgufValue& types = gguf.at("tokenizer.ggml.token_type");
  if (types.size() != tokens_.size()) {
    throw InvalidInput(fmt::format("{}: tokenizer.ggml.token_type has {} entries; expected {}",
                                   file_name_, types.size(), tokens_.size()));
  }
  if (tokens_.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw InvalidInput(
        fmt::format("{}: {} tokens; at most 2^31-1 supported", file_name_, tokens_.size()));
  }

  std::unordered_map<std::string, unsigned char> byte_of;  // GPT-2 symbol → byte
  const std::vector<std::string>& symbols = gpt2_byte_symbols();
  for (int b = 0; b < 256; ++b) byte_of.emplace(symbols[b], static_cast<unsigned char>(b));

  token_types_.resize(tokens_.size());
  token_bytes_.resize(tokens_.size());
  ids_.reserve(tokens_.size());
  control_by_first_byte_.resize(256);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& text = tokens_[id];
    const auto id32 = static_cast<int32_t>(id);
    token_types_[id] = static_cast<int32_t>(types.at(id).as_int());
    ids_.emplace(text, id32);
    if (token_types_[id] == kTokenTypeControl) {
      token_bytes_[id] = text;
      if (!text.empty()) {
        control_by_first_byte_[static_cast<unsigned char>(text[0])].push_back(id32);
      }
      continue;
    }
    // Map each symbol back to its byte; text outside the alphabet is kept as it is.
    std::string& bytes = token_bytes_[id];
    for (size_t i = 0; i < text.size();) {
      const Utf8Char d = read_utf8(text, i);
      const size_t n = d.length == 0 ? 1 : static_cast<size_t>(d.length);
      const auto it = byte_of.find(text.substr(i, n));
      if (it != byte_of.end()) {
        bytes += static_cast<char>(it->second);
      } else {
        bytes.append(text, i, n);
      }
      i += n;
    }
  }
  for (auto& list : control_by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
  }
  for (int b = 0; b < 256; ++b) byte_ids_[b] = token_id(symbols[b]);

  const std::vector<std::string>& merges = gguf.at("tokenizer.ggml.merges").strings();
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t space = m.find(' ');
    const int32_t left = space == std::string::npos ? -1 : token_id(m.substr(0, space));
    const int32_t right = space == std::string::npos ? -1 : token_id(m.substr(space + 1));
    const int32_t merged =
        space == std::string::npos ? -1 : token_id(m.substr(0, space) + m.substr(space + 1));
    if (left < 0 || right < 0 || merged < 0) {
      throw InvalidInput(fmt::format(
          "{}: tokenizer.ggml.merges[{}] is '{}'; expected two vocabulary tokens separated by "
          "one space whose concatenation is a token too",
          file_name_, rank, m));
    }
    const uint64_t key = (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
    merges_.try_emplace(key, Merge{static_cast<int32_t>(rank), merged});  // first rank wins
  }

  if (const GgufValue* v = gguf.find("tokenizer.ggml.bos_token_id")) {
    bos_id_ = static_cast<int32_t>(v->as_int());
  }
  if (const GgufValue* v = gguf.find("tokenizer.ggml.eos_token_id")) {
    eos_id_ = static_cast<int32_t>(v->as_int());
  }
  if (const GgufValue* v = gguf.find("tokenizer.chat_template")) chat_template_ = v->as_string();
  // The default system message is the literal the template emits when messages[0] is not one.
  constexpr std::string_view kSystemOpen = "<|im_start|>system\n";
  const size_t open = chat_template_.find(kSystemOpen);
  if (open != std::string::npos) {
    const size_t from = open + kSystemOpen.size();
    const size_t close = chat_template_.find("<|im_end|>", from);
    if (close != std::string::npos) default_system_ = chat_template_.substr(from, close - from);
  }
}

const std::string& BpeTokenizer::token_text(int32_t id) const {
  check_id(id, 0);
  return tokens_[static_cast<size_t>(id)];
}

int32_t BpeTokenizer::token_id(std::string_view text) const {
  const auto it = ids_.find(std::string(text));
  return it == ids_.end() ? -1 : it->second;
}

bool BpeTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && token_types_[static_cast<size_t>(id)] == kTokenTypeControl;
}

void BpeTokenizer::check_id(int32_t id, size_t position) const {
  if (id < 0 || id >= n_vocab()) {
    throw InvalidInput(fmt::format("{}: token id {} at position {} is outside [0, {})", file_name_,
                                   id, position, n_vocab()));
  }
}

void BpeTokenizer::bpe(std::string_view piece, size_t offset, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    const auto byte = static_cast<unsigned char>(piece[i]);
    symbols[i] = byte_ids_[byte];
    if (symbols[i] < 0) {
      throw InvalidInput(
          fmt::format("text: byte 0x{:02X} at byte offset {} has no token in the vocabulary of {}",
                      byte, offset + i, file_name_));
    }
  }
  // Merge the adjacent pair of lowest rank (leftmost on ties) until none is left; words are short.
  while (symbols.size() > 1) {
    int32_t best_rank = std::numeric_limits<int32_t>::max();
    size_t best = 0;
    int32_t best_merged = -1;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const uint64_t key =
          (static_cast<uint64_t>(symbols[i]) << 32) | static_cast<uint32_t>(symbols[i + 1]);
      const auto it = merges_.find(key);
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        best = i;
        best_merged = it->second.merged;
      }
    }
    if (best_merged < 0) break;
    symbols[best] = best_merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  check_utf8(text);
  std::vector<int32_t> ids;
  const auto encode_plain = [&](size_t from, size_t to) {
    if (from == to) return;
    const std::string_view plain = text.substr(from, to - from);
    for (std::string_view piece : pretokenize_smollm(plain)) {
      bpe(piece, from + static_cast<size_t>(piece.data() - plain.data()), ids);
    }
  };
  size_t plain_from = 0;
  for (size_t i = 0; i < text.size();) {
    int32_t special = -1;
    for (int32_t id : control_by_first_byte_[static_cast<unsigned char>(text[i])]) {
      if (text.substr(i).starts_with(tokens_[static_cast<size_t>(id)])) {
        special = id;
        break;
      }
    }
    if (special < 0) {
      ++i;
      continue;
    }
    encode_plain(plain_from, i);
    ids.push_back(special);
    i += tokens_[static_cast<size_t>(special)].size();
    plain_from = i;
  }
  encode_plain(plain_from, text.size());
  return ids;
}

std::string BpeTokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    check_id(ids[k], k);
    out += token_bytes_[static_cast<size_t>(ids[k])];
  }
  return out;
}

std::string BpeTokenizer::apply_chat_template(std::span<const ChatMessage> messages,
                                              bool add_generation_prompt) const {
  if (chat_template_.find("<|im_start|>") == std::string::npos ||
      chat_template_.find("<|im_end|>") == std::string::npos) {
    throw InvalidInput(fmt::format(
        "{}: tokenizer.chat_template is not ChatML (no <|im_start|>/<|im_end|>); only ChatML is "
        "implemented",
        file_name_));
  }
  std::string out;
  const auto turn = [&](std::string_view role, std::string_view content) {
    out += "<|im_start|>";
    out += role;
    out += '\n';
    out += content;
    out += "<|im_end|>\n";
  };
  if (!default_system_.empty() && !messages.empty() && messages.front().role != "system") {
    turn("system", default_system_);
  }
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace speclab
