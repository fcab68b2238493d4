// Tests for runtime/data/image/decode.h: a JPEG and a PNG made by PIL decode to their pixels
// (the PNG exactly; the JPEG within its compression error), a reduced decode has the reduced
// size, a region decode holds at least the region, and every bad input is a UserError naming the
// file: not an image, a JPEG cut short ("Premature end of JPEG file", as PIL's "image file is
// truncated"), a corrupt header, a PNG cut short. Pixel equality with PIL on every kind of image:
// tests/oracle/test_image_torchvision.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <zlib.h>

#include <algorithm>
#include <array>

#include "base/error.h"
#include "runtime/data/image/decode.h"
#include "tests/runtime/data/tiny_images.h"

namespace img = dp::data::image;
using dp::data::testing::kTinyJpeg;
using dp::data::testing::kTinyPng;
using ::testing::HasSubstr;

namespace {

std::string decode_error(const std::vector<uint8_t>& bytes, const std::string& name) {
  try {
    img::decode_image(bytes.data(), bytes.size(), name);
  } catch (const dp::UserError& e) {
    return e.what();
  }
  return "no error";
}

// Pixel (y, x) of an RGB image.
std::array<int, 3> at(const img::DecodedImage& d, int y, int x) {
  const uint8_t* p = d.rgb.data() + (static_cast<size_t>(y) * d.width + x) * 3;
  return {p[0], p[1], p[2]};
}

}  // namespace

TEST(ImageDecode, PngIsExact) {
  const img::DecodedImage d = img::decode_image(kTinyPng.data(), kTinyPng.size(), "tiny.png");
  ASSERT_EQ(d.height, 8);
  ASSERT_EQ(d.width, 8);
  EXPECT_EQ(at(d, 0, 0), (std::array<int, 3>{200, 30, 30}));
  EXPECT_EQ(at(d, 7, 7), (std::array<int, 3>{30, 200, 30}));
  EXPECT_EQ(at(d, 0, 7), (std::array<int, 3>{0, 0, 0}));
}

TEST(ImageDecode, JpegIsCloseAndReducible) {
  const img::DecodedImage d = img::decode_image(kTinyJpeg.data(), kTinyJpeg.size(), "tiny.jpg");
  ASSERT_EQ(d.height, 8);
  ASSERT_EQ(d.width, 8);
  // Quality 75 with 4:2:0 chroma: the flat corners come back within a few levels of lightness;
  // the colour of a 4x4 block is blurred by the chroma subsampling.
  EXPECT_NEAR(at(d, 0, 0)[0], 200, 40);
  EXPECT_NEAR(at(d, 7, 7)[1], 200, 40);
  const img::DecodedImage half = img::decode_image(kTinyJpeg.data(), kTinyJpeg.size(), "tiny.jpg",
                                                   [](int h, int w, bool jpeg) {
                                                     EXPECT_EQ(h, 8);
                                                     EXPECT_EQ(w, 8);
                                                     EXPECT_TRUE(jpeg);
                                                     return img::DecodeRequest{2, {}};
                                                   });
  EXPECT_EQ(half.full_height, 4);
  EXPECT_EQ(half.full_width, 4);
  EXPECT_EQ(half.rgb.size(), 4u * 4 * 3);
}

TEST(ImageDecode, RegionHoldsWhatWasAsked) {
  const img::DecodedImage full = img::decode_image(kTinyJpeg.data(), kTinyJpeg.size(), "tiny.jpg");
  const img::DecodedImage part = img::decode_image(kTinyJpeg.data(), kTinyJpeg.size(), "tiny.jpg", [](int, int, bool) {
    return img::DecodeRequest{1, img::Region{2, 3, 5, 6}};
  });
  ASSERT_LE(part.x0, 2);
  ASSERT_LE(part.y0, 3);
  ASSERT_GE(part.x0 + part.width, 5);
  ASSERT_GE(part.y0 + part.height, 6);
  for (int y = 3; y < 6; ++y)
    for (int x = 2; x < 5; ++x) EXPECT_EQ(at(part, y - part.y0, x - part.x0), at(full, y, x)) << y << "," << x;
}

TEST(ImageDecode, BadInputsAreErrorsNamingTheFile) {
  EXPECT_EQ(decode_error({'h', 'e', 'l', 'l', 'o'}, "cat/1.jpg"),
            "cat/1.jpg: not a JPEG or PNG file (5 bytes, starting 68 65 6c 6c 6f); dptrain reads .jpg/.jpeg and .png "
            "images");
  EXPECT_EQ(decode_error({}, "cat/2.jpg"),
            "cat/2.jpg: not a JPEG or PNG file (0 bytes, starting (empty)); dptrain reads .jpg/.jpeg and .png images");
  std::vector<uint8_t> cut(kTinyJpeg.begin(), kTinyJpeg.begin() + static_cast<long>(kTinyJpeg.size()) - 60);
  EXPECT_EQ(decode_error(cut, "cat/3.jpg"), "cat/3.jpg: cannot decode this JPEG: Premature end of JPEG file");
  std::vector<uint8_t> header_only(kTinyJpeg.begin(), kTinyJpeg.begin() + 30);
  EXPECT_THAT(decode_error(header_only, "cat/4.jpg"), HasSubstr("cat/4.jpg: cannot decode this JPEG: "));
  std::vector<uint8_t> garbage = {0xFF, 0xD8, 0xFF};  // a JPEG's first bytes, then nothing a JPEG has
  garbage.resize(100, 0x00);
  EXPECT_THAT(decode_error(garbage, "cat/5.jpg"), HasSubstr("cat/5.jpg: cannot decode this JPEG: "));
  std::vector<uint8_t> png_cut(kTinyPng.begin(), kTinyPng.begin() + static_cast<long>(kTinyPng.size()) - 20);
  EXPECT_THAT(decode_error(png_cut, "cat/6.png"), HasSubstr("cat/6.png: cannot decode this PNG (pixels): "));
}

// A header that claims more pixels than PIL opens is refused before any pixel is decoded or
// allocated (fuzz_image: a 472-byte JPEG of 1 G pixels took seconds and a GiB a sample): 13,377 x
// 13,378 is 536 pixels over PIL's 2 x 89,478,485.
TEST(ImageDecode, ImagesBeyondPilsDecompressionBombLimitAreRefused) {
  const auto be16 = [](uint8_t* p, int v) { p[0] = static_cast<uint8_t>(v >> 8), p[1] = static_cast<uint8_t>(v); };
  std::vector<uint8_t> jpeg = kTinyJpeg;
  const uint8_t sof0[] = {0xFF, 0xC0};
  const auto sof = std::search(jpeg.begin(), jpeg.end(), std::begin(sof0), std::end(sof0));
  ASSERT_NE(sof, jpeg.end());
  be16(&*sof + 5, 13378), be16(&*sof + 7, 13377);  // SOF0: length, precision, height, width
  const std::string limit = " pixels is larger than the limit of 178956970 (PIL's decompression-bomb limit)";
  EXPECT_EQ(decode_error(jpeg, "big.jpg"), "big.jpg: cannot decode this JPEG: image of 13377x13378" + limit);
  std::vector<uint8_t> png = kTinyPng;  // the signature, then IHDR: length, type, width, height, ..., CRC
  ASSERT_EQ(std::string(png.begin() + 12, png.begin() + 16), "IHDR");
  be16(&png[18], 13377), be16(&png[22], 13378);
  const uLong crc = crc32(0, png.data() + 12, 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  EXPECT_EQ(decode_error(png, "big.png"), "big.png: image of 13377x13378" + limit);
  be16(&png[22], 8);  // 13,377 x 8: within the limit, and the file's pixels are then too few
  const uLong crc8 = crc32(0, png.data() + 12, 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc8 >> (24 - 8 * i));
  EXPECT_THAT(decode_error(png, "small.png"), HasSubstr("small.png: cannot decode this PNG (pixels): "));
}
