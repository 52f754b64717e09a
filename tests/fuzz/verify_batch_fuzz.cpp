// libFuzzer target for verify-batch's input reader (experiments/verify_batch_io.hpp): any byte
// string, written to a file and opened with the HDF5 C library, must either read as a batch or
// throw InvalidInput; a crash, a sanitizer report or another exception is a bug. A batch that
// reads is verified as the command verifies it (verify_chain, or verify_match for the match
// verifiers), so a gap in the validation that lets a verifier index out of range shows up here
// too. The seeds (tests/fuzz/verify_batch_seeds.cpp) are small valid inputs.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/base/error.hpp"
#include "core/verify/verify_chain.hpp"
#include "experiments/verify_batch_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // One file per process (libFuzzer may run several jobs side by side), rewritten for each input.
  static const std::string path =
      "/tmp/speclab_verify_batch_fuzz_" + std::to_string(::getpid()) + ".h5";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  const bool written = std::fwrite(data, 1, size, file) == size;
  std::fclose(file);
  if (!written) return 0;
  try {
    const speclab::experiments::VerifyBatchInput input =
        speclab::experiments::read_verify_batch_input(path);
    const speclab::ChainResult result = speclab::experiments::verify_batch(input);
    if (result.emitted_tokens.size() != static_cast<size_t>(input.batch * (input.gamma + 1))) {
      __builtin_trap();
    }
  } catch (const speclab::InvalidInput&) {
  }
  std::remove(path.c_str());
  return 0;
}
