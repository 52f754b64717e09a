// N-gram language models with interpolated Kneser–Ney smoothing (Chen & Goodman 1998, "An
// empirical study of smoothing techniques for language modeling", §3.5, one discount per order)
// over bytes or a tokenizer's ids, trained on the public-domain English corpus of data/corpus/
// (docs/architecture.md "core/models"): real language statistics for speculative decoding, target =
// high order, draft = low order, or a cheap draft for a real target over the target's tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/model.hpp"

namespace speclab {

/// Byte-level vocabulary: token = byte value.
inline constexpr int64_t kByteVocab = 256;
/// Highest n-gram order a byte-level KneserNey model supports (an n-gram is packed into 64 bits;
/// a vocabulary of V tokens allows 64 / ⌈log2 V⌉ orders, e.g. 4 for SmolLM2's 49152).
inline constexpr int kMaxNGramOrder = 8;

// ---- corpus and tokens --------------------------------------------------------------------------

/// A text corpus split into a training part and a held-out tail (the last ~10%, cut at a line
/// start). Models train on the training part; prompts and perplexity use the held-out part.
struct NGramCorpus {
  std::string path;
  std::string text;        ///< the whole file, bytes
  int64_t train_size = 0;  ///< text[0, train_size) trains the models; the rest is held out

  std::string_view train_text() const { return std::string_view(text).substr(0, train_size); }
  std::string_view held_out_text() const { return std::string_view(text).substr(train_size); }
};

/// The corpus the presets train on: $SPECLAB_NGRAM_CORPUS when set, else
/// <source root>/data/corpus/english.txt (the source root is where this file was compiled from).
std::string default_corpus_path();

/// Reads a corpus (once per path per process; later calls return the cached one).
/// Throws InvalidInput naming the path when the file is missing, unreadable or empty.
std::shared_ptr<const NGramCorpus> load_corpus(const std::string& path);

/// Byte tokens of a text: one token per byte, value 0–255.
std::vector<int32_t> text_to_tokens(std::string_view text);
/// The text of byte tokens; throws InvalidInput naming the first token outside [0, 256).
std::string tokens_to_text(std::span<const int32_t> tokens);

/// `length` tokens of the corpus's held-out part starting at byte `offset` of that part: prompts
/// the models never saw in training. Throws InvalidInput when the range does not fit.
std::vector<int32_t> corpus_prompt(int64_t offset, int64_t length,
                                   const std::string& corpus_path = default_corpus_path());

// ---- interpolated Kneser–Ney --------------------------------------------------------------------

/// The count tables and discounts of an interpolated Kneser–Ney model of order N over a
/// vocabulary of V tokens (bytes, V = 256, or the ids of a tokenizer).
/// Order N uses raw counts c(h w); each lower order n < N uses continuation counts
/// N1+(• h w) = the number of distinct tokens v such that v h w occurs in the text. With
/// c(h) = Σ_w count(h w), N1+(h •) = #{w : count(h w) > 0} and D_n = n1 / (n1 + 2 n2) (n_r = the
/// number of order-n grams whose count is r; 0.5 when n1 or n2 is 0):
///   P_n(w | h) = (max(count(h w) - D_n, 0) + D_n N1+(h •) P_{n-1}(w | h')) / c(h)
/// where h' drops the oldest token of h, P_n(· | h) = P_{n-1}(· | h') when c(h) = 0, and
/// P_0(w) = 1/V. Every row is a distribution with all V entries > 0; it is sparse-friendly: every
/// token that follows none of the context's suffixes in the text gets the same floor value.
class KneserNey {
 public:
  /// Trains on `text` (bytes). Throws InvalidInput for an order outside [1, kMaxNGramOrder] or a
  /// text shorter than 2 bytes. Counting sorts the packed n-grams: O(T log T) for T bytes.
  KneserNey(std::string_view text, int order);
  /// Trains on `tokens`, each in [0, vocab). Throws InvalidInput for vocab < 2, a token outside
  /// [0, vocab) (naming its position), an order outside [1, 64 / ⌈log2 vocab⌉] or fewer than 2
  /// tokens.
  KneserNey(std::span<const int32_t> tokens, int order, int64_t vocab);

  int order() const { return order_; }
  int64_t vocab() const { return vocab_; }
  /// D_n, n in [1, order].
  double discount(int n) const;
  /// The count order |gram| uses for `gram` (raw at the top order, continuation below); 0 when
  /// absent. |gram| in [1, order].
  int64_t count(std::string_view gram) const;
  /// The same for a gram of token ids.
  int64_t count(std::span<const int32_t> gram) const;
  /// P(· | context) into probs [V]; only the last order-1 tokens of `context` matter, and a
  /// shorter context uses the orders it can fill. Tokens must be in [0, V). Returns the floor:
  /// the value, bit for bit, of every entry whose token follows no suffix of the context.
  double distribution(std::span<const int32_t> context, std::span<double> probs) const;

 private:
  /// Contexts of one order, sorted by packed key, each with its sorted children (next tokens).
  struct Table {
    double discount = 0.5;
    std::vector<uint64_t> context_keys;
    std::vector<uint64_t> context_totals;  ///< c(h)
    std::vector<uint32_t> child_begin;     ///< size contexts + 1
    std::vector<uint32_t> child_tokens;
    std::vector<uint32_t> child_counts;
  };
  void train(std::span<const int32_t> tokens);
  Table make_table(std::span<const uint64_t> grams, std::span<const uint32_t> counts) const;
  /// Index of context `key` in `table`, or -1.
  static int64_t find_context(const Table& table, uint64_t key);
  /// The packed key of `gram`, oldest token in the highest bits.
  uint64_t pack(std::span<const int32_t> gram) const;

  int order_;
  int64_t vocab_;
  int bits_;                   ///< bits per token in a packed key: ⌈log2 vocab⌉
  std::vector<Table> tables_;  ///< tables_[n-1] holds order n
};

/// A LanguageModel over a trained KneserNey model (V = its vocabulary, no EOS: eos_token() = -1).
/// Stateless; thread-compatible (score() updates counters).
class NGramModel : public LanguageModel {
 public:
  NGramModel(std::shared_ptr<const KneserNey> lm, std::string name);

  int64_t vocab() const override { return lm_->vocab(); }
  std::string name() const override { return name_; }
  const KneserNey& kneser_ney() const { return *lm_; }

 protected:
  void score_logits(std::span<const ScoreRequest> requests, std::span<float> logits) override;

 private:
  std::shared_ptr<const KneserNey> lm_;
  std::string name_;
};

/// The KneserNey model of `order` trained on the training part of the corpus at `corpus_path`,
/// trained once per (path, order) per process and shared afterwards.
std::shared_ptr<const KneserNey> trained_kneser_ney(
    int order, const std::string& corpus_path = default_corpus_path());

/// Names make_ngram_model accepts: ngram-1 … ngram-5, prompt-lookup.
std::vector<std::string> ngram_model_presets();

/// A model by preset name: `ngram-N` is the order-N KneserNey model of the corpus (ngram-5 a
/// target, ngram-1/2 drafts); `prompt-lookup` is PromptLookupModel with its defaults (see
/// core/models/prompt_lookup.hpp). Throws InvalidInput listing the known names for an unknown
/// preset, or naming the path for a missing or empty corpus.
std::unique_ptr<LanguageModel> make_ngram_model(
    std::string_view preset, const std::string& corpus_path = default_corpus_path());

}  // namespace speclab
