// Shared helpers of the experiment-driver tests (Config, Sweep, Results, RunCli, ...): a fresh
// directory per test, config files written from text, and the message of an expected error.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/base/error.hpp"

namespace speclab::testing {

/// A fresh, empty directory per test under the build tree.
inline std::filesystem::path fresh_test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(SPECLAB_BINARY_DIR) / "test_tmp" /
                                    info->test_suite_name() / info->name();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::filesystem::path write_text(const std::filesystem::path& path,
                                        const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The message of the InvalidInput that `statement` throws ("" and a test failure otherwise).
template <typename F>
std::string invalid_input_message(F&& statement) {
  try {
    statement();
  } catch (const InvalidInput& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception thrown";
  return {};
}

/// The text of tests/data/tiny_sweep.toml: a small speculative sweep over the tiny LinearSoftmax
/// pair (V = 16), 2 × 2 points named "tiny". The installed-tool and Slurm tests read the same file.
inline std::string tiny_sweep_toml() {
  const std::filesystem::path path =
      std::filesystem::path(SPECLAB_SOURCE_DIR) / "tests" / "data" / "tiny_sweep.toml";
  std::string text = read_text(path);
  if (text.empty()) ADD_FAILURE() << "cannot read " << path;
  return text;
}

}  // namespace speclab::testing
