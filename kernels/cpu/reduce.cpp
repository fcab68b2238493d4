#include "kernels/cpu/reduce.h"

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

template <typename T, typename Op>
void apply(T* dst, const T* a, const T* b, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) dst[i] = op(a[i], b[i]);
}

// 16-bit floats: widen, combine in f32, round back.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float), typename Op>
void apply16(uint16_t* dst, const uint16_t* a, const uint16_t* b, int64_t n, Op op) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Narrow(op(Widen(a[i]), Widen(b[i])));
}

template <typename Op>
void reduce_with(DType dtype, void* dst, const void* a, const void* b, int64_t n, Op op) {
  switch (dtype) {
    case DType::F32:
      return apply(static_cast<float*>(dst), static_cast<const float*>(a), static_cast<const float*>(b), n, op);
    case DType::F64:
      return apply(static_cast<double*>(dst), static_cast<const double*>(a), static_cast<const double*>(b), n, op);
    case DType::I32:
      return apply(static_cast<int32_t*>(dst), static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), n,
                   op);
    case DType::F16:
      return apply16<f16_to_f32, f32_to_f16>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                             static_cast<const uint16_t*>(b), n, op);
    case DType::BF16:
      return apply16<bf16_to_f32, f32_to_bf16>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                                               static_cast<const uint16_t*>(b), n, op);
    default:
      unsupported("reduce", dtype);
  }
}

template <typename T>
void divide_as(T* dst, int64_t n, T divisor) {
  for (int64_t i = 0; i < n; ++i) dst[i] = dst[i] / divisor;
}

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void divide16(uint16_t* dst, int64_t n, float divisor) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Narrow(Widen(dst[i]) / divisor);
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
    case DType::F32: return divide_as(static_cast<float*>(dst), n, static_cast<float>(divisor));
    case DType::F64: return divide_as(static_cast<double*>(dst), n, static_cast<double>(divisor));
    case DType::I32: return divide_as(static_cast<int32_t*>(dst), n, static_cast<int32_t>(divisor));
    case DType::F16: return divide16<f16_to_f32, f32_to_f16>(static_cast<uint16_t*>(dst), n, divisor);
    case DType::BF16: return divide16<bf16_to_f32, f32_to_bf16>(static_cast<uint16_t*>(dst), n, divisor);
    default: unsupported("divide", dtype);
  }
}

}  // namespace dp::kernels::cpu
