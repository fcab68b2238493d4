// defines: helpers the launch tests share to read what a run left behind: read_file, tensors_of
// (every tensor's raw bytes, by name), differing (names whose bytes differ), max_abs_diff (largest
// |a - b| over two weight files' f32 tensors). Header-only; GoogleTest for the checks.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/safetensors.h"

namespace dp::testutil {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// name -> raw bytes of every tensor in a safetensors file.
inline std::map<std::string, std::string> tensors_of(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::map<std::string, std::string> out;
  for (const auto& n : f.names()) {
    Tensor t = f.get(n);
    out[n] = std::string(static_cast<const char*>(t.raw()), t.nbytes());
  }
  return out;
}

// Names of tensors whose bytes differ (or that only one side has).
inline std::vector<std::string> differing(const std::map<std::string, std::string>& a,
                                          const std::map<std::string, std::string>& b) {
  std::vector<std::string> out;
  for (const auto& [n, v] : a)
    if (!b.count(n) || b.at(n) != v) out.push_back(n);
  for (const auto& [n, v] : b)
    if (!a.count(n)) out.push_back(n);
  return out;
}

// Largest |a - b| over the f32 tensors of two files (names and shapes must agree: checked).
inline double max_abs_diff(const std::string& a, const std::string& b) {
  SafetensorsFile fa = SafetensorsFile::open(a), fb = SafetensorsFile::open(b);
  EXPECT_EQ(fa.names(), fb.names());
  double worst = 0;
  for (const auto& name : fa.names()) {
    Tensor x = fa.get(name), y = fb.get(name);
    EXPECT_EQ(x.shape(), y.shape()) << name;
    if (x.dtype() != DType::F32 || x.shape() != y.shape()) continue;
    for (int64_t i = 0; i < x.numel(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return worst;
}

}  // namespace dp::testutil
