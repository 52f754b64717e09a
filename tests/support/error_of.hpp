// The message of the speclab error a call throws, for asserting on error texts.
#pragma once

#include <string>

#include "core/base/error.hpp"

namespace speclab::testing {

/// Runs f; returns the message of the E it throws (InvalidInput unless named, e.g.
/// error_of<IoError>), or "(no error)" when nothing is thrown.
template <class E = InvalidInput, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace speclab::testing
