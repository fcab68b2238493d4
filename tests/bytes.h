// defines: what tests compare bytes and memory with: file_bytes (a whole file, binary),
// tensor_bytes (a CPU tensor's raw bytes) and transient_host_bytes (the memory account's peak
// during a call over what was live before it). Header-only.
#pragma once
#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

#include "runtime/memory_account.h"
#include "runtime/tensor.h"

namespace dp::test {

// The whole file's bytes ("" when it cannot be read).
inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A CPU tensor's raw bytes.
inline std::string tensor_bytes(const Tensor& t) { return std::string(static_cast<const char*>(t.raw()), t.nbytes()); }

// The host bytes `call` holds at its peak beyond what was live before it (the memory account).
template <class F>
size_t transient_host_bytes(F&& call) {
  const size_t before = memory_breakdown().total;
  reset_memory_peak();
  call();
  return memory_breakdown().peak - before;
}

}  // namespace dp::test
