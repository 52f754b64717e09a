// Vocabularies as byte strings, their intersection, the byte trie and the string <-> token
// conversions (core/models/vocab_map.hpp).
#include "core/models/vocab_map.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_map>
#include <utility>

#include "core/base/error.hpp"
#include "core/base/mutants.hpp"
#include "core/models/tokenizer.hpp"

namespace speclab {
namespace {

bool printable_ascii(unsigned char b) { return b >= 0x20 && b < 0x7F; }

// `s` for a message: quoted, with every byte outside printable ASCII (and the quote and backslash)
// written \xNN, cut after `max_bytes` bytes.
std::string quoted(std::string_view s, size_t max_bytes = 32) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (printable_ascii(b) && b != '\'' && b != '\\') {
      out += static_cast<char>(b);
    } else {
      out += fmt::format("\\x{:02X}", b);
    }
  }
  out += s.size() > max_bytes ? "'..." : "'";
  return out;
}

// A token's bytes in a summary: a single byte outside printable ASCII as 0xNN, any other string
// quoted.
std::string shown(std::string_view s) {
  if (s.size() == 1 && !printable_ascii(static_cast<unsigned char>(s[0]))) {
    return fmt::format("0x{:02X}", static_cast<unsigned char>(s[0]));
  }
  return quoted(s);
}

// `control` is empty (no control tokens) or holds one flag per string.
std::vector<uint8_t> control_flags(std::string_view name, size_t strings,
                                   std::span<const uint8_t> control) {
  if (control.empty()) return std::vector<uint8_t>(strings, 0);
  if (control.size() != strings) {
    throw InvalidInput(
        fmt::format("{}: {} control flags for {} strings; expected none or one per string", name,
                    control.size(), strings));
  }
  return {control.begin(), control.end()};
}

// The GPT-2 byte symbols read back: code point -> byte, -1 outside the alphabet. The shifted
// symbols are U+0100..U+0143; under kVocabSymbolSlip they are taken as U+0100 + byte, so the table
// spans U+0000..U+01FF.
constexpr char32_t kSymbolTableSize = 0x200;

std::array<int16_t, kSymbolTableSize> gpt2_symbol_bytes() {
  std::array<int16_t, kSymbolTableSize> byte_of;
  byte_of.fill(-1);
  const std::vector<std::string>& symbols = gpt2_byte_symbols();
  for (int b = 0; b < 256; ++b) {
    char32_t cp = read_utf8(symbols[static_cast<size_t>(b)], 0).cp;
    if (cp >= 0x100 && mutant(Mutant::kVocabSymbolSlip)) cp = 0x100 + static_cast<char32_t>(b);
    byte_of[cp] = static_cast<int16_t>(b);
  }
  return byte_of;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Groups the ids of `vocabulary` by the bytes they spell (control tokens and empty strings
// excluded): string -> its lowest id, and every string spelled by two or more ids, lowest first.
struct Spellings {
  std::unordered_map<std::string_view, int32_t> lowest;
  std::vector<std::vector<int32_t>> collisions;
};

Spellings spellings(const TokenVocabulary& vocabulary) {
  Spellings out;
  out.lowest.reserve(vocabulary.bytes.size());
  std::unordered_map<int32_t, size_t> collision_of;  // lowest id -> index in out.collisions
  for (int32_t id = 0; id < vocabulary.size(); ++id) {
    const std::string& s = vocabulary.bytes[static_cast<size_t>(id)];
    if (vocabulary.is_control(id) || s.empty()) continue;
    const auto [it, inserted] = out.lowest.emplace(s, id);
    if (inserted) continue;
    const auto [group, created] = collision_of.emplace(it->second, out.collisions.size());
    if (created) out.collisions.push_back({it->second});
    out.collisions[group->second].push_back(id);
  }
  std::sort(out.collisions.begin(), out.collisions.end());
  return out;
}

// "'ab' (ids 3, 7), ..." for at most `max_shown` groups.
std::string collision_list(const TokenVocabulary& vocabulary,
                           const std::vector<std::vector<int32_t>>& collisions,
                           size_t max_shown = 4) {
  std::string out;
  for (size_t k = 0; k < collisions.size() && k < max_shown; ++k) {
    const std::vector<int32_t>& ids = collisions[k];
    out += fmt::format("{}{} (ids", k == 0 ? "" : ", ",
                       shown(vocabulary.bytes[static_cast<size_t>(ids.front())]));
    for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{} {}", i == 0 ? "" : ",", ids[i]);
    out += ")";
  }
  if (collisions.size() > max_shown)
    out += fmt::format(", and {} more", collisions.size() - max_shown);
  return out;
}

}  // namespace

// ---- vocabularies -------------------------------------------------------------------------------

TokenVocabulary byte_vocabulary() {
  TokenVocabulary v;
  v.name = "bytes";
  v.bytes.resize(256);
  for (int b = 0; b < 256; ++b)
    v.bytes[static_cast<size_t>(b)] = std::string(1, static_cast<char>(b));
  v.control.assign(256, 0);
  return v;
}

TokenVocabulary gpt2_vocabulary(std::string name, std::span<const std::string> strings,
                                std::span<const uint8_t> control) {
  TokenVocabulary v;
  v.control = control_flags(name, strings.size(), control);
  // Built on every call, so that the mutant in force now is the one read.
  const std::array<int16_t, kSymbolTableSize> byte_of = gpt2_symbol_bytes();
  v.bytes.resize(strings.size());
  for (size_t id = 0; id < strings.size(); ++id) {
    const std::string& text = strings[id];
    if (v.control[id] != 0) {
      v.bytes[id] = text;
      continue;
    }
    std::string& bytes = v.bytes[id];
    bytes.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const Utf8Char u = read_utf8(text, i);
      if (u.length == 0) {
        throw InvalidInput(fmt::format(
            "{}: token {} {} has invalid UTF-8 at byte offset {} (byte 0x{:02X}); expected a "
            "string of GPT-2 byte symbols",
            name, id, quoted(text), i, static_cast<unsigned char>(text[i])));
      }
      const int byte = u.cp < kSymbolTableSize ? byte_of[u.cp] : -1;
      if (byte < 0) {
        throw InvalidInput(fmt::format(
            "{}: token {} {} has code point U+{:04X} at byte offset {}, which is not a GPT-2 byte "
            "symbol; expected only the 256 symbols of the byte-level alphabet",
            name, id, quoted(text), static_cast<uint32_t>(u.cp), i));
      }
      bytes += static_cast<char>(byte);
      i += static_cast<size_t>(u.length);
    }
  }
  v.name = std::move(name);
  return v;
}

TokenVocabulary sentencepiece_vocabulary(std::string name, std::span<const std::string> pieces,
                                         std::span<const uint8_t> control) {
  constexpr std::string_view kSpace = "\u2581";
  TokenVocabulary v;
  v.control = control_flags(name, pieces.size(), control);
  v.bytes.resize(pieces.size());
  for (size_t id = 0; id < pieces.size(); ++id) {
    const std::string& piece = pieces[id];
    if (v.control[id] != 0) {
      v.bytes[id] = piece;
      continue;
    }
    // A byte piece: exactly "<0xNN>", NN two hex digits.
    if (piece.starts_with("<0x") && piece.ends_with(">") && piece.size() >= 4) {
      const int hi = piece.size() == 6 ? hex_digit(piece[3]) : -1;
      const int lo = piece.size() == 6 ? hex_digit(piece[4]) : -1;
      if (hi < 0 || lo < 0) {
        throw InvalidInput(fmt::format(
            "{}: token {} {} is a malformed byte piece; expected \"<0xNN>\" with NN two hex "
            "digits",
            name, id, quoted(piece)));
      }
      v.bytes[id] = std::string(1, static_cast<char>(hi * 16 + lo));
      continue;
    }
    std::string& bytes = v.bytes[id];
    bytes.reserve(piece.size());
    for (size_t i = 0; i < piece.size();) {
      if (std::string_view(piece).substr(i).starts_with(kSpace)) {
        bytes += ' ';
        i += kSpace.size();
      } else {
        bytes += piece[i++];
      }
    }
  }
  v.name = std::move(name);
  return v;
}

TokenVocabulary raw_vocabulary(std::string name, std::vector<std::string> strings,
                               std::vector<uint8_t> control) {
  TokenVocabulary v;
  v.control = control_flags(name, strings.size(), control);
  for (size_t id = 0; id < strings.size(); ++id) {
    if (v.control[id] == 0 && strings[id].empty()) {
      throw InvalidInput(fmt::format(
          "{}: token {} is the empty string; expected every non-control token to spell at least "
          "one byte",
          name, id));
    }
  }
  v.bytes = std::move(strings);
  v.name = std::move(name);
  return v;
}

TokenVocabulary vocabulary_of(const BpeTokenizer& tokenizer, std::string name) {
  const int32_t n = tokenizer.n_vocab();
  std::vector<std::string> strings(static_cast<size_t>(n));
  std::vector<uint8_t> control(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    strings[static_cast<size_t>(id)] = tokenizer.token_text(id);
    control[static_cast<size_t>(id)] = tokenizer.is_control(id) ? 1 : 0;
  }
  return gpt2_vocabulary(std::move(name), strings, control);
}

// ---- intersection -------------------------------------------------------------------------------

VocabMap intersect_vocabularies(const TokenVocabulary& target, const TokenVocabulary& draft) {
  const Spellings target_spellings = spellings(target);
  VocabMap map;
  map.draft_to_target.assign(draft.bytes.size(), -1);
  for (int32_t id = 0; id < draft.size(); ++id) {
    if (draft.is_control(id)) continue;
    const std::string& s = draft.bytes[static_cast<size_t>(id)];
    const auto it = s.empty() ? target_spellings.lowest.end() : target_spellings.lowest.find(s);
    if (it == target_spellings.lowest.end()) {
      map.unmapped_draft.push_back(id);
      continue;
    }
    map.draft_to_target[static_cast<size_t>(id)] = it->second;
    ++map.mapped;
  }
  map.target_collisions = target_spellings.collisions;
  map.draft_collisions = spellings(draft).collisions;
  return map;
}

std::string VocabMap::summary(const TokenVocabulary& target, const TokenVocabulary& draft) const {
  int64_t controls = 0;
  for (int32_t id = 0; id < draft.size(); ++id) controls += draft.is_control(id) ? 1 : 0;
  std::string out =
      fmt::format("{} of {} draft tokens ({}) map to the target ({}); {} unmapped", mapped,
                  draft.size() - controls, draft.name, target.name, unmapped_draft.size());
  constexpr size_t kMaxShown = 8;
  if (!unmapped_draft.empty()) {
    out += " (";
    for (size_t k = 0; k < unmapped_draft.size() && k < kMaxShown; ++k) {
      if (k > 0) out += ", ";
      out += shown(draft.bytes[static_cast<size_t>(unmapped_draft[k])]);
    }
    out += unmapped_draft.size() > kMaxShown ? ", ...)" : ")";
  }
  if (controls > 0) out += fmt::format("; {} draft control tokens excluded", controls);
  if (target_collisions.empty() && draft_collisions.empty()) return out + "; collisions: none";
  out += "; collisions:";
  if (!target_collisions.empty()) {
    out += fmt::format(" target {}", collision_list(target, target_collisions));
  }
  if (!draft_collisions.empty()) {
    out += fmt::format("{} draft {}", target_collisions.empty() ? "" : ";",
                       collision_list(draft, draft_collisions));
  }
  return out;
}

// ---- byte trie ----------------------------------------------------------------------------------

ByteTrie::ByteTrie(const TokenVocabulary& vocabulary) {
  // The strings in byte order (lowest id first among equal ones), inserted one after another:
  // each shares the path of its common prefix with the previous one, and a node's children are
  // created in ascending byte order.
  std::vector<int32_t> order;
  order.reserve(vocabulary.bytes.size());
  for (int32_t id = 0; id < vocabulary.size(); ++id) {
    if (!vocabulary.is_control(id) && !vocabulary.bytes[static_cast<size_t>(id)].empty()) {
      order.push_back(id);
    }
  }
  const auto text = [&](int32_t id) -> std::string_view {
    return vocabulary.bytes[static_cast<size_t>(id)];
  };
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    const int c = text(a).compare(text(b));
    return c != 0 ? c < 0 : a < b;
  });

  std::vector<int32_t> parent = {kNone};
  std::vector<uint8_t> byte_in = {0};
  token_ = {-1};
  std::vector<int32_t> path = {kRoot};  // path[d]: node of the previous string's first d bytes
  std::string_view previous;
  for (int32_t id : order) {
    const std::string_view s = text(id);
    size_t common = 0;
    while (common < s.size() && common < previous.size() && s[common] == previous[common]) {
      ++common;
    }
    path.resize(common + 1);
    for (size_t d = common; d < s.size(); ++d) {
      parent.push_back(path.back());
      byte_in.push_back(static_cast<uint8_t>(s[d]));
      token_.push_back(-1);
      path.push_back(static_cast<int32_t>(token_.size() - 1));
    }
    int32_t& token = token_[static_cast<size_t>(path.back())];
    if (token < 0) token = id;
    max_length_ = std::max(max_length_, static_cast<int64_t>(s.size()));
    previous = s;
  }

  // Each node but the root is the child of one edge; lay the edges out by parent, in creation
  // order within a parent, which is ascending by byte.
  const size_t n = token_.size();
  edge_count_.assign(n, 0);
  for (size_t node = 1; node < n; ++node) ++edge_count_[static_cast<size_t>(parent[node])];
  first_edge_.assign(n, 0);
  for (size_t node = 1; node < n; ++node) {
    first_edge_[node] = first_edge_[node - 1] + edge_count_[node - 1];
  }
  edge_byte_.resize(n - 1);
  edge_child_.resize(n - 1);
  std::vector<int32_t> filled(n, 0);
  for (size_t node = 1; node < n; ++node) {
    const auto p = static_cast<size_t>(parent[node]);
    const auto slot = static_cast<size_t>(first_edge_[p] + filled[p]++);
    edge_byte_[slot] = byte_in[node];
    edge_child_[slot] = static_cast<int32_t>(node);
  }
}

int32_t ByteTrie::child(int32_t node, uint8_t byte) const {
  if (node < 0) return kNone;
  const std::span<const uint8_t> bytes = next_bytes(node);
  const auto it = std::lower_bound(bytes.begin(), bytes.end(), byte);
  if (it == bytes.end() || *it != byte) return kNone;
  return edge_child_[static_cast<size_t>(first_edge_[static_cast<size_t>(node)] +
                                         (it - bytes.begin()))];
}

int32_t ByteTrie::walk(int32_t node, std::string_view bytes) const {
  for (char c : bytes) {
    node = child(node, static_cast<uint8_t>(c));
    if (node == kNone) break;
  }
  return node;
}

int32_t ByteTrie::token(int32_t node) const {
  return node < 0 ? -1 : token_[static_cast<size_t>(node)];
}

std::span<const uint8_t> ByteTrie::next_bytes(int32_t node) const {
  if (node < 0) return {};
  const auto k = static_cast<size_t>(node);
  return std::span<const uint8_t>(edge_byte_)
      .subspan(static_cast<size_t>(first_edge_[k]), static_cast<size_t>(edge_count_[k]));
}

// ---- strings and tokens -------------------------------------------------------------------------

std::string decode_tokens(const TokenVocabulary& vocabulary, std::span<const int32_t> ids) {
  std::string out;
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= vocabulary.size()) {
      throw InvalidInput(fmt::format("{}: token id {} at position {} is outside [0, {})",
                                     vocabulary.name, ids[k], k, vocabulary.size()));
    }
    out += vocabulary.bytes[static_cast<size_t>(ids[k])];
  }
  return out;
}

std::vector<int32_t> encode_longest_match(const ByteTrie& trie, std::string_view bytes,
                                          size_t* consumed) {
  std::vector<int32_t> ids;
  size_t offset = 0;
  while (offset < bytes.size()) {
    // Walk the longest P-prefix of the rest, remembering the last node on the way that is a token.
    int32_t best = -1;
    size_t best_length = 0;
    int32_t node = ByteTrie::kRoot;
    for (size_t i = offset; i < bytes.size(); ++i) {
      node = trie.child(node, static_cast<uint8_t>(bytes[i]));
      if (node == ByteTrie::kNone) break;
      if (trie.token(node) >= 0) {
        best = trie.token(node);
        best_length = i + 1 - offset;
      }
    }
    if (best < 0) break;
    ids.push_back(best);
    offset += best_length;
  }
  if (consumed != nullptr) *consumed = offset;
  return ids;
}

std::vector<int32_t> encode_bytes(const BpeTokenizer& tokenizer, std::string_view bytes,
                                  size_t* consumed) {
  // The single-byte token of each byte, looked up when first needed (-2: not yet, -1: none).
  std::array<int32_t, 256> byte_token;
  byte_token.fill(-2);
  const auto token_of = [&](unsigned char b) {
    if (byte_token[b] == -2) byte_token[b] = tokenizer.token_id(gpt2_byte_symbols()[b]);
    return byte_token[b];
  };

  std::vector<int32_t> ids;
  const auto append = [&](std::string_view run) {
    if (run.empty()) return;
    const std::vector<int32_t> run_ids = tokenizer.encode(run);
    ids.insert(ids.end(), run_ids.begin(), run_ids.end());
  };
  size_t offset = 0;
  while (offset < bytes.size()) {
    // The maximal run of valid UTF-8 at `offset`, cut before the first byte with no token.
    size_t end = offset;
    size_t missing = std::string_view::npos;
    while (end < bytes.size() && missing == std::string_view::npos) {
      const Utf8Char u = read_utf8(bytes, end);
      if (u.length == 0) break;
      for (size_t k = end; k < end + static_cast<size_t>(u.length); ++k) {
        if (token_of(static_cast<unsigned char>(bytes[k])) < 0) {
          missing = k;
          break;
        }
      }
      if (missing == std::string_view::npos) end += static_cast<size_t>(u.length);
    }
    append(bytes.substr(offset, end - offset));
    offset = end;
    if (missing != std::string_view::npos) {
      // The bytes of the cut character before the missing one, each its own token.
      for (; offset < missing; ++offset) {
        ids.push_back(token_of(static_cast<unsigned char>(bytes[offset])));
      }
      break;
    }
    if (offset == bytes.size()) break;
    // A byte that is not valid UTF-8 here: its single-byte token, if it has one.
    const int32_t id = token_of(static_cast<unsigned char>(bytes[offset]));
    if (id < 0) break;
    ids.push_back(id);
    ++offset;
  }
  if (consumed != nullptr) *consumed = offset;
  return ids;
}

std::vector<int32_t> single_byte_ids(const TokenVocabulary& vocabulary) {
  std::vector<int32_t> ids(256, -1);
  for (int32_t x = 0; x < vocabulary.size(); ++x) {
    if (vocabulary.is_control(x)) continue;
    const std::string& s = vocabulary.bytes[static_cast<size_t>(x)];
    if (s.size() != 1 || ids[static_cast<uint8_t>(s[0])] >= 0) return {};
    ids[static_cast<uint8_t>(s[0])] = x;
  }
  return ids;
}

}  // namespace speclab
