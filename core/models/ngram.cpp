// Interpolated Kneser–Ney n-gram models over bytes or token ids, their corpus and presets; see
// ngram.hpp.
#include "core/models/ngram.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "core/base/error.hpp"
#include "core/base/source_tree.hpp"
#include "core/models/prompt_lookup.hpp"

namespace speclab {
namespace {

// Share of the corpus held out at its end (for prompts and perplexity).
constexpr double kHeldOutShare = 0.1;
constexpr int kPresetMaxOrder = 5;

// The low `bits` bits of a key.
uint64_t low_bits_mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

// Sorted keys -> distinct keys and their multiplicities.
void run_lengths(std::span<const uint64_t> sorted, std::vector<uint64_t>& keys,
                 std::vector<uint32_t>& counts) {
  keys.clear();
  counts.clear();
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    keys.push_back(sorted[i]);
    counts.push_back(static_cast<uint32_t>(j - i));
    i = j;
  }
}

}  // namespace

// ---- corpus and tokens --------------------------------------------------------------------------

std::string default_corpus_path() {
  if (const char* env = std::getenv("SPECLAB_NGRAM_CORPUS"); env != nullptr && *env != '\0') {
    return env;
  }
  return source_tree_path("data/corpus/english.txt").string();
}

std::shared_ptr<const NGramCorpus> load_corpus(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const NGramCorpus>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(path); it != cache.end()) return it->second;

  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InvalidInput(fmt::format(
        "n-gram corpus '{}' cannot be read (missing or unreadable); expected a text file (the "
        "default is data/corpus/english.txt of the source tree; set SPECLAB_NGRAM_CORPUS to "
        "point elsewhere)",
        path));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  auto corpus = std::make_shared<NGramCorpus>();
  corpus->path = path;
  corpus->text = std::move(buffer).str();
  const int64_t size = static_cast<int64_t>(corpus->text.size());
  if (size < 2) {
    throw InvalidInput(fmt::format(
        "n-gram corpus '{}' has {} bytes; expected a text of at least 2 bytes", path, size));
  }
  if (size >= std::numeric_limits<uint32_t>::max()) {
    throw InvalidInput(
        fmt::format("n-gram corpus '{}' has {} bytes; expected under 4 GiB", path, size));
  }
  // Hold out the tail from the first line start after (1 - kHeldOutShare) of the text.
  int64_t cut = static_cast<int64_t>(static_cast<double>(size) * (1.0 - kHeldOutShare));
  if (const auto newline = corpus->text.find('\n', cut); newline != std::string::npos) {
    cut = static_cast<int64_t>(newline) + 1;
  }
  corpus->train_size = std::max<int64_t>(2, std::min(cut, size));
  cache.emplace(path, corpus);
  return corpus;
}

std::vector<int32_t> text_to_tokens(std::string_view text) {
  std::vector<int32_t> tokens(text.size());
  std::transform(text.begin(), text.end(), tokens.begin(),
                 [](char c) { return static_cast<int32_t>(static_cast<unsigned char>(c)); });
  return tokens;
}

std::string tokens_to_text(std::span<const int32_t> tokens) {
  std::string text(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= kByteVocab) {
      throw InvalidInput(
          fmt::format("tokens_to_text: token {} is {}; expected a byte in [0, 256)", i, tokens[i]));
    }
    text[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return text;
}

std::vector<int32_t> corpus_prompt(int64_t offset, int64_t length, const std::string& corpus_path) {
  const auto corpus = load_corpus(corpus_path);
  const std::string_view held_out = corpus->held_out_text();
  const int64_t size = static_cast<int64_t>(held_out.size());
  if (offset < 0 || length < 1 || offset + length > size) {
    throw InvalidInput(fmt::format(
        "corpus_prompt: offset {} and length {} do not fit the {} held-out bytes of '{}'; expected "
        "offset ≥ 0, length ≥ 1, offset + length ≤ {}",
        offset, length, size, corpus_path, size));
  }
  return text_to_tokens(held_out.substr(offset, length));
}

// ---- interpolated Kneser–Ney --------------------------------------------------------------------

KneserNey::KneserNey(std::string_view text, int order)
    : order_(order), vocab_(kByteVocab), bits_(8) {
  if (order < 1 || order > kMaxNGramOrder) {
    throw InvalidInput(
        fmt::format("KneserNey: order {}; expected an order in [1, {}]", order, kMaxNGramOrder));
  }
  if (text.size() < 2 || text.size() >= std::numeric_limits<uint32_t>::max()) {
    throw InvalidInput(fmt::format(
        "KneserNey: training text has {} bytes; expected at least 2 and under 4 GiB", text.size()));
  }
  train(text_to_tokens(text));
}

KneserNey::KneserNey(std::span<const int32_t> tokens, int order, int64_t vocab)
    : order_(order), vocab_(vocab), bits_(1) {
  if (vocab < 2 || vocab > (int64_t{1} << 32)) {
    throw InvalidInput(
        fmt::format("KneserNey: vocabulary of {} tokens; expected 2 ≤ V ≤ 2^32", vocab));
  }
  while ((int64_t{1} << bits_) < vocab) ++bits_;
  const int max_order = 64 / bits_;
  if (order < 1 || order > max_order) {
    throw InvalidInput(fmt::format(
        "KneserNey: order {}; expected an order in [1, {}] for a vocabulary of {} tokens ({} bits "
        "each in a 64-bit key)",
        order, max_order, vocab, bits_));
  }
  if (tokens.size() < 2 || tokens.size() >= std::numeric_limits<uint32_t>::max()) {
    throw InvalidInput(
        fmt::format("KneserNey: training text has {} tokens; expected at least 2 and under 2^32",
                    tokens.size()));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      throw InvalidInput(
          fmt::format("KneserNey: training token {} is {}; expected a token id in [0, {})", i,
                      tokens[i], vocab));
    }
  }
  train(tokens);
}

uint64_t KneserNey::pack(std::span<const int32_t> gram) const {
  uint64_t key = 0;
  for (const int32_t t : gram) key = (key << bits_) | static_cast<uint32_t>(t);
  return key;
}

void KneserNey::train(std::span<const int32_t> tokens) {
  const int order = order_;
  const int64_t size = static_cast<int64_t>(tokens.size());
  tables_.resize(order);

  // Top order: raw counts of every n-gram in the text.
  std::vector<uint64_t> sorted;
  if (size >= order) {
    sorted.resize(size - order + 1);
    const uint64_t mask = low_bits_mask(bits_ * order);
    uint64_t key = pack(tokens.first(order - 1));
    for (int64_t i = 0; i + order <= size; ++i) {
      key = ((key << bits_) | static_cast<uint32_t>(tokens[i + order - 1])) & mask;
      sorted[i] = key;
    }
    std::sort(sorted.begin(), sorted.end());
  }
  std::vector<uint64_t> grams;
  std::vector<uint32_t> counts;
  run_lengths(sorted, grams, counts);
  tables_[order - 1] = make_table(grams, counts);

  // Lower orders: N1+(• g) = the number of distinct (n+1)-grams whose last n tokens are g.
  // `grams` holds the distinct (n+1)-grams of the text on entry to each step.
  for (int n = order - 1; n >= 1; --n) {
    const uint64_t mask = low_bits_mask(bits_ * n);
    sorted.resize(grams.size());
    std::transform(grams.begin(), grams.end(), sorted.begin(),
                   [mask](uint64_t g) { return g & mask; });
    std::sort(sorted.begin(), sorted.end());
    run_lengths(sorted, grams, counts);
    tables_[n - 1] = make_table(grams, counts);
    // The distinct n-grams are those with a predecessor (just counted) plus the one at token 0.
    if (n > size) continue;
    const uint64_t first = pack(tokens.first(n));
    if (auto it = std::lower_bound(grams.begin(), grams.end(), first);
        it == grams.end() || *it != first) {
      grams.insert(it, first);
    }
  }
}

KneserNey::Table KneserNey::make_table(std::span<const uint64_t> grams,
                                       std::span<const uint32_t> counts) const {
  Table table;
  const uint64_t token_mask = low_bits_mask(bits_);
  int64_t n1 = 0, n2 = 0;
  for (size_t i = 0; i < grams.size(); ++i) {
    const uint64_t context = grams[i] >> bits_;
    if (table.context_keys.empty() || table.context_keys.back() != context) {
      table.context_keys.push_back(context);
      table.context_totals.push_back(0);
      table.child_begin.push_back(static_cast<uint32_t>(i));
    }
    table.context_totals.back() += counts[i];
    table.child_tokens.push_back(static_cast<uint32_t>(grams[i] & token_mask));
    table.child_counts.push_back(counts[i]);
    n1 += counts[i] == 1;
    n2 += counts[i] == 2;
  }
  table.child_begin.push_back(static_cast<uint32_t>(grams.size()));
  // Chen & Goodman's estimate; it lies in (0, 1) whenever both counts are positive, which keeps
  // every count - D ≥ 0 and every back-off weight > 0.
  table.discount =
      n1 > 0 && n2 > 0 ? static_cast<double>(n1) / static_cast<double>(n1 + 2 * n2) : 0.5;
  return table;
}

int64_t KneserNey::find_context(const Table& table, uint64_t key) {
  const auto it = std::lower_bound(table.context_keys.begin(), table.context_keys.end(), key);
  if (it == table.context_keys.end() || *it != key) return -1;
  return it - table.context_keys.begin();
}

double KneserNey::discount(int n) const {
  if (n < 1 || n > order_) {
    throw InvalidInput(fmt::format("KneserNey::discount: order {}; expected [1, {}]", n, order_));
  }
  return tables_[n - 1].discount;
}

int64_t KneserNey::count(std::string_view gram) const {
  if (vocab_ != kByteVocab) {
    throw InvalidInput(
        fmt::format("KneserNey::count: gram '{}' is text but the model has {} tokens, not bytes",
                    gram, vocab_));
  }
  return count(text_to_tokens(gram));
}

int64_t KneserNey::count(std::span<const int32_t> gram) const {
  const int n = static_cast<int>(gram.size());
  if (n < 1 || n > order_) {
    throw InvalidInput(
        fmt::format("KneserNey::count: gram has {} tokens; expected [1, {}]", n, order_));
  }
  for (const int32_t t : gram) {
    if (t < 0 || t >= vocab_) {
      throw InvalidInput(
          fmt::format("KneserNey::count: token {}; expected a token id in [0, {})", t, vocab_));
    }
  }
  const Table& table = tables_[n - 1];
  const uint64_t key = pack(gram);
  const int64_t c = find_context(table, key >> bits_);
  if (c < 0) return 0;
  const auto token = static_cast<uint32_t>(key & low_bits_mask(bits_));
  const auto begin = table.child_tokens.begin() + table.child_begin[c];
  const auto end = table.child_tokens.begin() + table.child_begin[c + 1];
  const auto it = std::lower_bound(begin, end, token);
  if (it == end || *it != token) return 0;
  return table.child_counts[it - table.child_tokens.begin()];
}

double KneserNey::distribution(std::span<const int32_t> context, std::span<double> probs) const {
  // Every entry starts at the floor and is scaled by the same back-off weights; only the
  // children of the contexts found get more, so untouched entries equal `floor` bit for bit.
  double floor = 1.0 / static_cast<double>(vocab_);
  std::fill(probs.begin(), probs.end(), floor);
  const int64_t length = static_cast<int64_t>(context.size());
  for (int n = 1; n <= order_ && n - 1 <= length; ++n) {
    const uint64_t key = pack(context.subspan(length - (n - 1)));
    const Table& table = tables_[n - 1];
    const int64_t c = find_context(table, key);
    if (c < 0) continue;  // c(h) = 0: P_n(· | h) = P_{n-1}(· | h')
    const double total = static_cast<double>(table.context_totals[c]);
    const uint32_t begin = table.child_begin[c], end = table.child_begin[c + 1];
    const double d = table.discount;
    const double backoff = d * static_cast<double>(end - begin) / total;
    for (double& p : probs) p *= backoff;
    floor *= backoff;
    for (uint32_t i = begin; i < end; ++i) {
      probs[table.child_tokens[i]] += (static_cast<double>(table.child_counts[i]) - d) / total;
    }
  }
  return floor;
}

NGramModel::NGramModel(std::shared_ptr<const KneserNey> lm, std::string name)
    : lm_(std::move(lm)), name_(std::move(name)) {
  if (!lm_) throw InvalidInput(fmt::format("{}: no KneserNey model given", name_));
}

void NGramModel::score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) {
  const int64_t vocab = lm_->vocab();
  std::vector<double> probs(static_cast<size_t>(vocab));
  int64_t row = 0;
  for (const auto& r : requests) {
    const int64_t length = static_cast<int64_t>(r.tokens.size());
    for (int64_t j = 0; j < r.n_positions; ++j, ++row) {
      const double floor = lm_->distribution(r.tokens.first(length - r.n_positions + 1 + j), probs);
      // Most of a large vocabulary sits at the floor: one logarithm serves them all.
      const auto log_floor = static_cast<float>(std::log(floor));
      float* out = logits.data() + row * vocab;
      for (int64_t t = 0; t < vocab; ++t) {
        const double p = probs[static_cast<size_t>(t)];
        out[t] = p == floor ? log_floor
                 : p > 0.0  ? static_cast<float>(std::log(p))
                            : -std::numeric_limits<float>::infinity();
      }
    }
  }
}

// ---- presets ------------------------------------------------------------------------------------

std::shared_ptr<const KneserNey> trained_kneser_ney(int order, const std::string& corpus_path) {
  const auto corpus = load_corpus(corpus_path);
  static std::mutex mutex;
  static std::map<std::pair<std::string, int>, std::shared_ptr<const KneserNey>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[{corpus_path, order}];
  if (!slot) slot = std::make_shared<const KneserNey>(corpus->train_text(), order);
  return slot;
}

std::vector<std::string> ngram_model_presets() {
  std::vector<std::string> names;
  for (int n = 1; n <= kPresetMaxOrder; ++n) names.push_back(fmt::format("ngram-{}", n));
  names.emplace_back("prompt-lookup");
  return names;
}

std::unique_ptr<LanguageModel> make_ngram_model(std::string_view preset,
                                                const std::string& corpus_path) {
  if (preset == "prompt-lookup") return std::make_unique<PromptLookupModel>();
  for (int n = 1; n <= kPresetMaxOrder; ++n) {
    if (preset == fmt::format("ngram-{}", n)) {
      return std::make_unique<NGramModel>(trained_kneser_ney(n, corpus_path), std::string(preset));
    }
  }
  throw InvalidInput(fmt::format("unknown n-gram model preset '{}'; expected one of: {}", preset,
                                 fmt::join(ngram_model_presets(), ", ")));
}

}  // namespace speclab
