// defines: error_of, the message of the exception a callable throws ("(no error)" when it returns):
// what the tests of user-facing errors compare with the exact words.
#pragma once
#include <exception>
#include <functional>
#include <string>

namespace dp::testutil {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace dp::testutil
