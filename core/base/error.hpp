// Error types of speclab. Library code throws; the CLI maps InvalidInput to exit status 2 and
// every other error to 1 (docs/architecture.md "Errors").
#pragma once

#include <stdexcept>
#include <string>

namespace speclab {

/// Base of every error speclab throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// The caller's input is wrong: bad shape, NaN, unnormalised row, bad config, missing file.
/// The message names the argument, where in it, the value found and the value expected.
class InvalidInput : public Error {
 public:
  explicit InvalidInput(const std::string& message) : Error(message) {}
};

/// Reading or writing a file failed for a reason other than the caller's input.
class IoError : public Error {
 public:
  explicit IoError(const std::string& message) : Error(message) {}
};

}  // namespace speclab
