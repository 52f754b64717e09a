// The message of the speclab::InvalidInput a call throws, for asserting on error texts.
#pragma once

#include <string>

#include "core/base/error.hpp"

namespace speclab::testing {

/// Runs f; returns the InvalidInput message, or "(no error)" when nothing is thrown.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace speclab::testing
