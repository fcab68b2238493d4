// base/alignment.h: the one address-alignment computation behind the cuDNN graph, convolution and
// cuBLASLt keys (each only names its cap; their own tests check the caps).
#include <gtest/gtest.h>

#include <cstdint>

#include "base/alignment.h"

namespace dp {
namespace {

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(AddressAlignment, IsTheLowestSetBitOfTheAddressUpToTheCap) {
  EXPECT_EQ(address_alignment(at(0x1000), 256), 256);
  EXPECT_EQ(address_alignment(at(0x1000), 16), 16);
  EXPECT_EQ(address_alignment(at(0x1080), 256), 128);
  EXPECT_EQ(address_alignment(at(0x1006), 256), 2);
  EXPECT_EQ(address_alignment(at(0x1001), 256), 1);
  EXPECT_EQ(address_alignment(nullptr, 16), 16);  // an absent operand constrains nothing
}

TEST(AddressAlignment, OfAListIsTheLeastOfItsAddresses) {
  EXPECT_EQ(address_alignment({at(0x1000), at(0x1040), at(0x1008)}, 256), 8);
  EXPECT_EQ(address_alignment({at(0x1000), nullptr}, 256), 256);
  EXPECT_EQ(address_alignment({}, 64), 64);
}

}  // namespace
}  // namespace dp
