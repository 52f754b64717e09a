// libFuzzer target for the GGUF reader (core/io/gguf.hpp): any byte string must either parse or
// throw InvalidInput; a crash, a sanitizer report or another exception is a bug. A file that
// parses has every metadata value and every supported tensor read back, so the views are
// exercised too.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/base/error.hpp"
#include "core/io/gguf.hpp"

namespace {

void touch(const speclab::GgufValue& v) {
  if (v.type() != speclab::GgufValueType::kArray) return;
  for (size_t i = 0; i < v.size(); ++i) touch(v.at(i));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto file = speclab::GgufFile::from_memory(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size), "fuzz");
    for (const auto& [key, value] : file.metadata()) touch(value);
    for (const auto& info : file.tensor_infos()) {
      const speclab::GgufTensor t = file.tensor(info.name);
      if (!speclab::ggml_type_supported(t.type()) || t.n_rows() == 0) continue;
      std::vector<float> row(static_cast<size_t>(t.row_length()));
      t.dequantize_row(t.n_rows() - 1, row);  // the last row touches the end of the tensor
    }
  } catch (const speclab::InvalidInput&) {
  }
  return 0;
}
