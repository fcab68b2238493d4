#include "kernels/cpu/reduce.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "base/half.h"

namespace dp::kernels::cpu {
namespace {

[[noreturn]] void unsupported(const char* what, DType dtype) {
  throw std::invalid_argument(std::string(what) + ": unsupported dtype (code " +
                              std::to_string(static_cast<int>(dtype)) + "); use f32, f16, bf16, f64 or i32");
}

// NaN-propagating max/min; for integers `a != a` is always false.
struct SumOp {
  float operator()(float a, float b) const { return a + b; }
  double operator()(double a, double b) const { return a + b; }
  int32_t operator()(int32_t a, int32_t b) const {
    return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
  }
};
struct MaxOp {
  template <typename T>
  T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct MinOp {
  template <typename T>
  T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};

// Element i of a buffer that may sit at any byte address: the ring hands over slices of its
// shared-memory FIFOs and socket buffers, aligned to nothing (a plain T* load there is undefined
// behaviour, and UBSan says so). memcpy of sizeof(T) compiles to one unaligned load or store.
template <typename T>
T load(const void* p, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(p) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void store(void* p, int64_t i, T v) {
  std::memcpy(static_cast<char*>(p) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

template <typename T, typename Op>
void apply(void* dst, const void* a, const void* b, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) store<T>(dst, i, op(load<T>(a, i), load<T>(b, i)));
}

// 16-bit floats: widen, combine in f32, round back.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float), typename Op>
void apply16(void* dst, const void* a, const void* b, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i)
    store<uint16_t>(dst, i, Narrow(op(Widen(load<uint16_t>(a, i)), Widen(load<uint16_t>(b, i)))));
}

template <typename Op>
void reduce_with(DType dtype, void* dst, const void* a, const void* b, int64_t n, Op op) {
  switch (dtype) {
    case DType::F32: return apply<float>(dst, a, b, n, op);
    case DType::F64: return apply<double>(dst, a, b, n, op);
    case DType::I32: return apply<int32_t>(dst, a, b, n, op);
    case DType::F16: return apply16<f16_to_f32, f32_to_f16>(dst, a, b, n, op);
    case DType::BF16: return apply16<bf16_to_f32, f32_to_bf16>(dst, a, b, n, op);
    default:
      unsupported("reduce", dtype);
  }
}

template <typename T>
void divide_as(void* dst, int64_t n, T divisor) {
  for (int64_t i = 0; i < n; ++i) store<T>(dst, i, load<T>(dst, i) / divisor);
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void divide16(void* dst, int64_t n, float divisor) {
  for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, Narrow(Widen(load<uint16_t>(dst, i)) / divisor));
}

}  // namespace

void reduce(DType dtype, ReduceKind kind, void* dst, const void* a, const void* b, int64_t n) {
  if (n <= 0) return;
  switch (kind) {
    case ReduceKind::Sum: return reduce_with(dtype, dst, a, b, n, SumOp{});
    case ReduceKind::Max: return reduce_with(dtype, dst, a, b, n, MaxOp{});
    case ReduceKind::Min: return reduce_with(dtype, dst, a, b, n, MinOp{});
  }
}

void divide(DType dtype, void* dst, int64_t n, int divisor) {
  if (n <= 0) return;
  switch (dtype) {
    case DType::F32: return divide_as<float>(dst, n, static_cast<float>(divisor));
    case DType::F64: return divide_as<double>(dst, n, static_cast<double>(divisor));
    case DType::I32: return divide_as<int32_t>(dst, n, static_cast<int32_t>(divisor));
    case DType::F16: return divide16<f16_to_f32, f32_to_f16>(dst, n, static_cast<float>(divisor));
    case DType::BF16: return divide16<bf16_to_f32, f32_to_bf16>(dst, n, static_cast<float>(divisor));
    default: unsupported("divide", dtype);
  }
}

}  // namespace dp::kernels::cpu
