// kernels/cpu/reduce on buffers at odd byte addresses, as the ring hands them over from its
// shared-memory FIFOs and socket buffers: the same bits as on aligned copies, for every dtype
// and op. (A typed load at such an address is undefined behaviour: the sanitizer build,
// tools/ci/sanitize.sh, fails this test on the old kernels, 96 misaligned loads in the ring tests.)
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "kernels/cpu/reduce.h"

namespace dp::kernels::cpu {
namespace {

TEST(ReduceUnaligned, OddAddressesGiveTheBitsOfAlignedOnes) {
  constexpr int64_t n = 37;
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::F16, DType::BF16}) {
    const size_t bytes = static_cast<size_t>(n) * dtype_size(dt);
    std::vector<unsigned char> a(bytes), b(bytes);
    for (size_t i = 0; i < bytes; ++i) {
      a[i] = static_cast<unsigned char>((i * 37 + 11) % 251 % 64);  // small exponents: no NaN/inf patterns
      b[i] = static_cast<unsigned char>((i * 53 + 7) % 241 % 64);
    }
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min}) {
      std::vector<unsigned char> want(bytes);
      reduce(dt, kind, want.data(), a.data(), b.data(), n);
      for (size_t off : {size_t{1}, size_t{3}}) {
        std::vector<unsigned char> ua(bytes + off), ub(bytes + off), ud(bytes + off);
        std::memcpy(ua.data() + off, a.data(), bytes);
        std::memcpy(ub.data() + off, b.data(), bytes);
        reduce(dt, kind, ud.data() + off, ua.data() + off, ub.data() + off, n);
        EXPECT_EQ(0, std::memcmp(ud.data() + off, want.data(), bytes)) << dtype_name(dt) << " offset " << off;
        reduce(dt, kind, ua.data() + off, ua.data() + off, ub.data() + off, n);  // in place (dst == a)
        EXPECT_EQ(0, std::memcmp(ua.data() + off, want.data(), bytes)) << dtype_name(dt) << " in place";
      }
    }
    std::vector<unsigned char> want = a, odd(bytes + 1);
    divide(dt, want.data(), n, 3);
    std::memcpy(odd.data() + 1, a.data(), bytes);
    divide(dt, odd.data() + 1, n, 3);
    EXPECT_EQ(0, std::memcmp(odd.data() + 1, want.data(), bytes)) << dtype_name(dt) << " divide";
  }
}

}  // namespace
}  // namespace dp::kernels::cpu
