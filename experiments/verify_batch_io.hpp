// The files of `speclab verify-batch` (docs/hdf5.md, the verify-batch sections): reading and
// validating a batch of draft chains a user dumped to HDF5, and writing the verified step. The
// command and the libFuzzer target tests/fuzz/verify_batch_fuzz.cpp share the reader, so what the
// fuzzer proves of it holds for the command.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string_view>

#include "core/io/hdf5_file.hpp"
#include "core/sampling/sampling.hpp"
#include "core/verify/verifier.hpp"
#include "core/verify/verify_chain.hpp"

namespace speclab::experiments {

inline constexpr std::string_view kVerifyBatchSchema = "speclab.verify_batch";
inline constexpr int64_t kVerifyBatchSchemaVersion = 1;

/// Everything read from IN.h5, owned here because ChainBatch only borrows.
struct VerifyBatchInput {
  Hdf5Array<float> probs_target;                ///< [B, γ+1, V]
  std::optional<Hdf5Array<float>> probs_draft;  ///< [B, γ, V]; may be absent for greedy and
                                                ///< the match verifiers
  Hdf5Array<int32_t> draft_tokens;              ///< [B, γ]
  std::optional<Hdf5Array<int32_t>> n_draft;    ///< [B]
  /// [B] the output position of each request's first draft token (match verifiers only).
  std::optional<Hdf5Array<int64_t>> positions;
  /// The verifier: ChainVerifier (token, greedy, lenient) or MatchVerifier (coupled,
  /// sampled-match, with the target's sampling rule).
  VerifierSpec spec;
  /// The seed and step (and for a chain verifier its method and leniency; step is 0 for the
  /// match verifiers, which address their noise by output position).
  ChainParams params;
  int64_t batch = 0;
  int64_t gamma = 0;
  int64_t vocab = 0;

  /// The arrays as the verifiers take them (borrowed from this object).
  ChainBatch view() const;
  /// The registry name of the verifier: "token", "coupled", ...
  std::string_view method() const { return verifier_name(spec); }
  /// The match verifiers' sampling rule, or nothing for a chain verifier.
  std::optional<TokenSampling> sampling() const;
};

/// The root attributes and datasets an input may hold; anything else is refused with a
/// suggestion, so that a misspelt `lenency` cannot silently run at the default.
std::span<const std::string_view> verify_batch_input_attributes();
std::span<const std::string_view> verify_batch_input_datasets();

/// The verifiers verify-batch runs, in registry order: the chain verifiers V1-V3 and the match
/// verifiers (coupled, sampled-match).
std::span<const std::string_view> verify_batch_methods();

/// Reads IN.h5 and validates all of it (shapes against probs_target, every row of
/// docs/verifiers.md "Bad input"). Throws InvalidInput naming the file, the dataset or attribute
/// and the location, and nothing else for any file content.
VerifyBatchInput read_verify_batch_input(const std::filesystem::path& path);

/// One verification step of the input with its verifier (verify_chain or verify_match).
ChainResult verify_batch(const VerifyBatchInput& input);

/// Writes the step's output as OUT.partial and renames it onto `out` (schema speclab.verify_batch).
/// `source` is recorded as the input's path.
void write_verify_batch_output(const std::filesystem::path& out,
                               const std::filesystem::path& source, const VerifyBatchInput& input,
                               const ChainResult& result);

/// InvalidInput when `out` names the same file as `in` (through any path, link or hard link):
/// the output would replace the only copy of the input.
void check_distinct_output(const std::filesystem::path& in, const std::filesystem::path& out);

}  // namespace speclab::experiments
