// Oracle helper for tests/oracle/test_safetensors_py.py: the C++ side of the interoperability
// check with Python's `safetensors` library.
//
//   safetensors_dump write <path>   writes known values in every dtype + metadata (the values are
//                                   spelled out again in the Python script)
//   safetensors_dump read <path>    prints the file as JSON on stdout:
//     {"metadata": {k: v}, "names": [...], "tensors": {name: {"dtype", "shape", "data": [...]}}}
//     F16/BF16 data are printed as raw uint16 bit patterns; floats with round-trip precision.
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/safetensors.h"

namespace {

using dp::DType;
using dp::Tensor;

template <typename T>
Tensor from_values(const dp::Shape& shape, DType dt, std::initializer_list<T> values) {
  Tensor t = Tensor::zeros(shape, dt);
  DP_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "{} values for {}", values.size(), t.describe());
  T* p = static_cast<T*>(t.raw());
  for (T v : values) *p++ = v;
  return t;
}

void write_known(const std::string& path) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Wider dtypes first, so that every tensor is aligned to its element size (see safetensors.h).
  std::vector<std::pair<std::string, Tensor>> ts = {
      {"f64", from_values<double>({2, 2}, DType::F64, {1.0 / 3.0, -1e-300, 6.02214076e23, -0.0})},
      {"i64", from_values<int64_t>({3}, DType::I64, {std::numeric_limits<int64_t>::min(), -1, int64_t{1} << 53})},
      {"f32", from_values<float>({2, 3}, DType::F32, {0.1f, -2.5f, 1e-45f, inf, nan, -0.0f})},
      {"i32", from_values<int32_t>({2, 1, 2}, DType::I32, {-7, 0, 2147483647, -2147483647 - 1})},
      // 1.0, -2.0, 0.5, 65504 (max half), 2^-24 (smallest subnormal), -inf
      {"f16", from_values<uint16_t>({6}, DType::F16, {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0xfc00})},
      // 1.0, -2.0, 0.5, 3.140625, 1e-40-ish subnormal (0x0001 = 2^-133)
      {"bf16", from_values<uint16_t>({5}, DType::BF16, {0x3f80, 0xc000, 0x3f00, 0x4049, 0x0001})},
      {"u8", from_values<uint8_t>({5}, DType::U8, {0, 1, 127, 128, 255})},
      {"scalar", from_values<float>({}, DType::F32, {42.0f})},
      {"empty", Tensor::zeros({0, 4}, DType::F32)},
  };
  std::map<std::string, std::string> meta = {
      {"format", "dptrain-test/1"},
      {"quoted", "a \"b\" \\ c\nnext line\ttab"},
      {"unicode", "r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93"},  // "résumé ✓" in UTF-8
      {"empty", ""},
  };
  dp::write_safetensors(path, ts, meta);
}

template <typename T>
nlohmann::json values(const Tensor& t) {
  nlohmann::json out = nlohmann::json::array();
  const T* p = static_cast<const T*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(p[i]);
  return out;
}

void read_and_print(const std::string& path) {
  auto f = dp::SafetensorsFile::open(path);
  nlohmann::json out;
  out["metadata"] = f.metadata();
  out["names"] = f.names();
  out["tensors"] = nlohmann::json::object();
  for (const auto& name : f.names()) {
    Tensor t = f.get(name);
    nlohmann::json e;
    e["dtype"] = dp::safetensors_dtype_name(t.dtype());
    e["shape"] = t.shape();
    switch (t.dtype()) {
      case DType::F32: e["data"] = values<float>(t); break;
      case DType::F64: e["data"] = values<double>(t); break;
      case DType::F16:
      case DType::BF16: e["data"] = values<uint16_t>(t); break;
      case DType::I32: e["data"] = values<int32_t>(t); break;
      case DType::I64: e["data"] = values<int64_t>(t); break;
      case DType::U8: e["data"] = values<uint8_t>(t); break;
    }
    out["tensors"][name] = std::move(e);
  }
  std::cout << out.dump() << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::string(argv[1]) != "write" && std::string(argv[1]) != "read")) {
    std::fprintf(stderr, "usage: %s write|read <file.safetensors>\n", argv[0]);
    return 2;
  }
  try {
    if (std::string(argv[1]) == "write") write_known(argv[2]);
    else read_and_print(argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "safetensors_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
