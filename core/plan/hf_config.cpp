// A Hugging Face config.json as a planner model (hardware.hpp's model_from_hf_config): a small
// JSON reader that keeps the scalars of the top-level object and of its nested objects under
// dotted names (quantization_config.bits), then the Llama layout's keys read from them with
// messages that name the key, the value found and what was expected.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "core/base/error.hpp"
#include "core/plan/hardware.hpp"

namespace speclab {
namespace {

struct JsonScalar {
  enum class Kind { kNumber, kString, kBool, kNull, kArray, kObject } kind = Kind::kNull;
  double number = 0.0;
  bool integral = false;  ///< a number written without fraction or exponent
  std::string text;       ///< strings; the source text of numbers
  bool boolean = false;
};

// Recursive descent over the text; scalars are stored under their dotted path, arrays and objects
// by kind only (their elements are parsed and dropped, except an object's members).
class JsonReader {
 public:
  JsonReader(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  std::map<std::string, JsonScalar> read() {
    skip_space();
    if (peek() != '{') fail("expected a JSON object '{'");
    value("");
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the JSON object");
    return std::move(values_);
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    int64_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    throw InvalidInput(fmt::format("{}:{}:{}: {}", source_, line, column, what));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated string");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (pos_ + 4 > text_.size()) fail("short \\u escape");
          pos_ += 4;
          out += '?';  // the planner reads no non-ASCII text
          break;
        default:
          fail(fmt::format("unknown escape '\\{}'", e));
      }
    }
  }

  void value(const std::string& path) {
    skip_space();
    JsonScalar v;
    const char c = peek();
    if (c == '{') {
      ++pos_;
      v.kind = JsonScalar::Kind::kObject;
      skip_space();
      if (peek() == '}') {
        ++pos_;
      } else {
        while (true) {
          const std::string key = string();
          expect(':');
          value(path.empty() ? key : path + "." + key);
          skip_space();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect('}');
          break;
        }
      }
    } else if (c == '[') {
      ++pos_;
      v.kind = JsonScalar::Kind::kArray;
      skip_space();
      if (peek() == ']') {
        ++pos_;
      } else {
        for (int64_t i = 0;; ++i) {
          value(fmt::format("{}[{}]", path, i));
          skip_space();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          expect(']');
          break;
        }
      }
    } else if (c == '"') {
      v.kind = JsonScalar::Kind::kString;
      v.text = string();
    } else if (literal("true")) {
      v.kind = JsonScalar::Kind::kBool;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = JsonScalar::Kind::kBool;
    } else if (literal("null")) {
      v.kind = JsonScalar::Kind::kNull;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t start = pos_;
      while (pos_ < text_.size() &&
             std::string_view("+-0123456789.eE").find(text_[pos_]) != std::string_view::npos)
        ++pos_;
      v.kind = JsonScalar::Kind::kNumber;
      v.text = std::string(text_.substr(start, pos_ - start));
      char* end = nullptr;
      v.number = std::strtod(v.text.c_str(), &end);
      if (end != v.text.c_str() + v.text.size()) {
        pos_ = start;
        fail(fmt::format("'{}' is not a number", v.text));
      }
      v.integral = v.text.find_first_of(".eE") == std::string::npos;
    } else {
      fail("expected a JSON value");
    }
    if (!path.empty()) values_[path] = v;
  }

  std::string_view text_, source_;
  size_t pos_ = 0;
  std::map<std::string, JsonScalar> values_;
};

std::string describe(const JsonScalar& v) {
  switch (v.kind) {
    case JsonScalar::Kind::kNumber:
      return v.text;
    case JsonScalar::Kind::kString:
      return "\"" + v.text + "\"";
    case JsonScalar::Kind::kBool:
      return v.boolean ? "true" : "false";
    case JsonScalar::Kind::kNull:
      return "null";
    case JsonScalar::Kind::kArray:
      return "an array";
    case JsonScalar::Kind::kObject:
      return "an object";
  }
  return "?";
}

class ConfigKeys {
 public:
  ConfigKeys(std::map<std::string, JsonScalar> values, std::string_view source)
      : values_(std::move(values)), source_(source) {}

  const JsonScalar* find(const std::string& key) const {
    const auto it = values_.find(key);
    return it == values_.end() ? nullptr : &it->second;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw InvalidInput(fmt::format("{}: {}", source_, what.empty() ? key : key + " " + what));
  }
  std::optional<int64_t> positive_integer(const std::string& key, bool required) const {
    const JsonScalar* v = find(key);
    if (v == nullptr) {
      if (required) fail(key, "is missing; expected a positive integer (a Llama-style config)");
      return std::nullopt;
    }
    if (v->kind != JsonScalar::Kind::kNumber || !v->integral || v->number < 1 || v->number > 1e15) {
      fail(key, fmt::format("is {}; expected a positive integer", describe(*v)));
    }
    return static_cast<int64_t>(v->number);
  }
  std::optional<std::string> string(const std::string& key, bool required) const {
    const JsonScalar* v = find(key);
    if (v == nullptr) {
      if (required) fail(key, "is missing; expected a string");
      return std::nullopt;
    }
    if (v->kind != JsonScalar::Kind::kString) {
      fail(key, fmt::format("is {}; expected a string", describe(*v)));
    }
    return v->text;
  }
  std::optional<bool> boolean(const std::string& key) const {
    const JsonScalar* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->kind != JsonScalar::Kind::kBool) {
      fail(key, fmt::format("is {}; expected true or false", describe(*v)));
    }
    return v->boolean;
  }

 private:
  std::map<std::string, JsonScalar> values_;
  std::string source_;
};

WeightDtype torch_dtype(const ConfigKeys& keys) {
  const std::string name = *keys.string("torch_dtype", true);
  if (name == "float32") return WeightDtype::kFp32;
  if (name == "float16") return WeightDtype::kFp16;
  if (name == "bfloat16") return WeightDtype::kBf16;
  keys.fail("torch_dtype", fmt::format("is \"{}\"; expected float32, float16 or bfloat16", name));
}

// quantization_config: fp8 (per-tensor or per-channel scales, negligible) or bits 4 / 8 with
// group_size (GPTQ, AWQ). Sets dtype and group_size of `model`.
void quantization(const ConfigKeys& keys, ModelSpec& model) {
  const JsonScalar* config = keys.find("quantization_config");
  if (config == nullptr || config->kind == JsonScalar::Kind::kNull) return;
  if (config->kind != JsonScalar::Kind::kObject) {
    keys.fail("quantization_config", fmt::format("is {}; expected an object", describe(*config)));
  }
  const std::optional<std::string> method = keys.string("quantization_config.quant_method", true);
  if (*method == "fp8") {
    model.dtype = WeightDtype::kFp8;
    return;
  }
  if (*method != "gptq" && *method != "awq") {
    keys.fail("quantization_config.quant_method",
              fmt::format("is \"{}\"; expected fp8, gptq or awq", *method));
  }
  const int64_t bits = *keys.positive_integer("quantization_config.bits", true);
  if (bits == 8) {
    model.dtype = WeightDtype::kInt8;
    return;
  }
  if (bits != 4) {
    keys.fail("quantization_config.bits", fmt::format("is {}; expected 4 or 8", bits));
  }
  model.dtype = WeightDtype::kInt4;
  model.group_size = *keys.positive_integer("quantization_config.group_size", true);
}

}  // namespace

ModelSpec model_from_hf_config(std::string_view json, std::string_view source) {
  const ConfigKeys keys(JsonReader(json, source).read(), source);
  ModelSpec m;
  m.name = std::string(source);
  m.description = keys.string("_name_or_path", false).value_or(std::string(source));
  m.hidden = *keys.positive_integer("hidden_size", true);
  m.layers = *keys.positive_integer("num_hidden_layers", true);
  m.heads = *keys.positive_integer("num_attention_heads", true);
  m.kv_heads = *keys.positive_integer("num_key_value_heads", true);
  m.intermediate = *keys.positive_integer("intermediate_size", true);
  m.vocab = *keys.positive_integer("vocab_size", true);
  const WeightDtype dtype = torch_dtype(keys);
  if (m.heads % m.kv_heads != 0) {
    keys.fail("num_key_value_heads", fmt::format("is {}; expected a divisor of "
                                                 "num_attention_heads ({})",
                                                 m.kv_heads, m.heads));
  }
  if (const auto head_dim = keys.positive_integer("head_dim", false)) {
    m.head_dim = *head_dim;
  } else {
    if (m.hidden % m.heads != 0) {
      keys.fail("head_dim", fmt::format("is missing and hidden_size {} is not a multiple of "
                                        "num_attention_heads {}; expected head_dim",
                                        m.hidden, m.heads));
    }
    m.head_dim = m.hidden / m.heads;
  }
  m.tied_embeddings = keys.boolean("tie_word_embeddings").value_or(false);
  m.dtype = dtype;
  m.kv_dtype = dtype;
  quantization(keys, m);
  m.parameters = static_cast<double>(m.layout_parameters());
  return m;
}

ModelSpec read_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InvalidInput(fmt::format(
        "--target-config {}: cannot open the file; expected a Hugging Face config.json", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return model_from_hf_config(text.str(), path);
}

}  // namespace speclab
