// Tests for runtime/data/npy.h: .npy files written here (numpy's format, versions 1 and 2) read
// back as data sets: u8 samples as bytes (get() = / 255), f32 as they are, f16 widened, any sample
// shape, any integer label type, the class count from the labels; and the errors, each naming the
// file: not .npy, Fortran order, an unsupported dtype, a truncated file, counts that differ.
// (numpy itself writing the files: tests/oracle/test_image_torchvision.py.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/data/npy.h"
#include "tests/npy_file.h"
#include "tests/runtime/data/data_test_util.h"

namespace fs = std::filesystem;
using dp::data::testing::TempDir;
using dp::data::testing::user_error;

namespace {

using dp::test::write_npy;

// A version-1 .npy file as numpy.save writes it.
void save(const std::string& path, const std::string& descr, const std::string& shape, const void* data, size_t n,
          bool fortran = false) {
  write_npy(path,
            "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
                ", }",
            data, n);
}

}  // namespace

TEST(Npy, BytesFloatsAndHalves) {
  TempDir d("dp-test-npy");
  const uint8_t x8[12] = {0, 255, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const int64_t y[2] = {4, 1};
  save(d / "x8.npy", "|u1", "(2, 2, 3)", x8, sizeof x8);
  save(d / "y.npy", "<i8", "(2,)", y, sizeof y);
  auto ds = dp::data::open_npy(d / "x8.npy", d / "y.npy");
  EXPECT_EQ(ds->size(), 2);
  EXPECT_EQ(ds->sample_shape(), (dp::Shape{2, 3}));
  EXPECT_EQ(ds->num_classes(), 5);
  EXPECT_TRUE(ds->holds_bytes());
  std::vector<float> f(6);
  EXPECT_EQ(ds->get(0, f.data()), 4);
  EXPECT_EQ(f[1], 1.0f);
  const float x32[4] = {0.5f, -2.0f, 1e6f, 3.25f};
  const uint8_t y8[4] = {0, 1, 0, 2};
  save(d / "x32.npy", "<f4", "(4,)", x32, sizeof x32);
  save(d / "y8.npy", "|u1", "(4,)", y8, sizeof y8);
  auto fl = dp::data::open_npy(d / "x32.npy", d / "y8.npy");
  EXPECT_EQ(fl->sample_shape(), (dp::Shape{1}));  // a 1-dim x: one value per sample
  EXPECT_FALSE(fl->holds_bytes());
  EXPECT_EQ(fl->get(1, f.data()), 1);
  EXPECT_EQ(f[0], -2.0f);
  const uint16_t x16[2] = {0x3c00, 0xc200};  // 1.0, -3.0
  const int32_t y32[1] = {7};
  save(d / "x16.npy", "<f2", "(1, 2)", x16, sizeof x16);
  save(d / "y32.npy", "<i4", "(1,)", y32, sizeof y32);
  auto h = dp::data::open_npy(d / "x16.npy", d / "y32.npy");
  EXPECT_EQ(h->get(0, f.data()), 7);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[1], -3.0f);
}

TEST(Npy, ErrorsNameTheFile) {
  TempDir d("dp-test-npy");
  const int64_t y[2] = {0, 1};
  save(d / "y.npy", "<i8", "(2,)", y, sizeof y);
  const double xd[2] = {1, 2};
  save(d / "xd.npy", "<f8", "(2,)", xd, sizeof xd);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "xd.npy", d / "y.npy"); }),
            d / "xd.npy" + ": dtype '<f8' is not supported; x must be uint8, float32 or float16, y an integer type "
                           "(little-endian)");
  const float xf[4] = {};
  save(d / "xf.npy", "<f4", "(2, 2)", xf, sizeof xf, /*fortran=*/true);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "xf.npy", d / "y.npy"); }),
            d / "xf.npy" + ": the array is in Fortran order; save it in C order (numpy.ascontiguousarray)");
  save(d / "x3.npy", "<f4", "(3,)", xf, 12);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "x3.npy", d / "y.npy"); }),
            d / "x3.npy" + " holds 3 samples but " + d / "y.npy" + " holds 2 labels; expected the same count");
  save(d / "cut.npy", "<f4", "(4,)", xf, 10);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "cut.npy", d / "y.npy"); }),
            d / "cut.npy" + ": truncated: the header's shape needs 16 bytes of data, the file holds 10");
  std::ofstream(d / "txt.npy") << "hello, world";
  EXPECT_EQ(user_error([&] { dp::data::read_npy(d / "txt.npy"); }),
            d / "txt.npy" + ": not a .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save");
  const int64_t neg[2] = {0, -1};
  save(d / "neg.npy", "<i8", "(2,)", neg, sizeof neg);
  save(d / "x2.npy", "<f4", "(2,)", xf, 8);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "x2.npy", d / "neg.npy"); }),
            d / "neg.npy" + ": label -1 at index 1 is out of range (0 to 1e9)");
}

// Headers no numpy writes (issue 14's probing, with tools/fuzz/fuzz_npy): a dimension beyond
// int64 threw std::out_of_range from std::stoll ("dptrain: error: stoll", no file named); a
// 200000-byte header crashed dptrain (std::regex recursing per character: a stack overflow);
// dimensions whose product wraps 2^64 made "needs 0 bytes" match an empty file: an empty file
// was read as 2^32 samples of 2^32 values each; a version-2 file of 10 bytes had its header length
// read past the end (ASan, fuzz_npy).
TEST(Npy, ImpossibleHeadersAreErrorsNamingTheFile) {
  TempDir d("dp-test-npy");
  save(d / "long.npy", "<f4", "(123456789012345678901234567890,)", nullptr, 0);
  EXPECT_EQ(user_error([&] { dp::data::read_npy(d / "long.npy"); }),
            d / "long.npy" + ": the shape (123456789012345678901234567890,) in the .npy header has a dimension "
                             "of 10^16 or more");
  {
    std::ofstream f(d / "long_header.npy", std::ios::binary);
    f.write("\x93NUMPY\x02\x00\x40\x0d\x03\x00", 12);  // version 2: a 200000-byte header
    f << "{'descr': '" << std::string(199989, 'x');
  }
  EXPECT_EQ(user_error([&] { dp::data::read_npy(d / "long_header.npy"); }),
            d / "long_header.npy" + ": the .npy header is 200000 bytes, more than the 10000 numpy itself reads: the "
                                    "file is damaged");
  std::ofstream(d / "v2_cut.npy", std::ios::binary).write("\x93NUMPY\x02\x00\x10\x00", 10);
  EXPECT_EQ(user_error([&] { dp::data::read_npy(d / "v2_cut.npy"); }),
            d / "v2_cut.npy" + ": truncated: 10 bytes, too short for a version 2 .npy header");
  for (const auto& [descr, shape] : {std::pair<std::string, std::string>{"<i4", "(65536, 65536, 65536, 65536)"},
                                      {"|u1", "(4294967296, 4294967296)"}}) {
    save(d / "wrap.npy", descr, shape, nullptr, 0);
    EXPECT_EQ(user_error([&] { dp::data::read_npy(d / "wrap.npy"); }),
              d / "wrap.npy" + ": the shape " + shape + " in the .npy header needs more than 2^62 bytes of data: the "
                                                          "header is damaged");
  }
}

// Header values of the wrong kind (CI's fuzz_npy, 2026-11-30): a shape written as the empty string
// '' threw std::out_of_range from std::string::substr and aborted dptrain; a shape, descr or
// fortran_order of another kind than numpy writes is an error naming the file and the value.
TEST(Npy, HeaderValuesOfTheWrongKindAreErrorsNamingTheFile) {
  TempDir d("dp-test-npy");
  const auto raw = [&](const std::string& header) {
    const char zeros[12] = {};
    write_npy(d / "kind.npy", header, zeros, sizeof zeros);
    return user_error([&] { dp::data::read_npy(d / "kind.npy"); });
  };
  for (const std::string shape : {"''", "'x'", "'(3,)'", "\"\""})
    EXPECT_EQ(raw("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }"),
              d / "kind.npy" + ": the shape " + shape + " in the .npy header is not a tuple");
  EXPECT_EQ(raw("{'descr': True, 'fortran_order': False, 'shape': (3,), }"),
            d / "kind.npy" + ": the descr True in the .npy header is not a quoted dtype string");
  EXPECT_EQ(raw("{'descr': '<f4', 'fortran_order': 'True', 'shape': (3,), }"),
            d / "kind.npy" + ": the fortran_order 'True' in the .npy header is not True or False");
  EXPECT_EQ(raw("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"), "no error");  // the same file, well formed
}

// An array of no samples bounds nothing by its size (the same rule as IDX, fuzz_idx): one sample is
// at most 2^32 values, checked without an int64 product that could wrap.
TEST(Npy, NoSamplesOfImpossibleSizeAreRefused) {
  TempDir d;
  const int64_t none = 0;
  save(d / "y.npy", "<i8", "(0,)", &none, 0);
  save(d / "x.npy", "<f4", "(0, 1000000000000000, 1000000000000000, 1000)", nullptr, 0);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "x.npy", d / "y.npy"); }),
            d / "x.npy" + ": one sample of shape [1000000000000000, 1000000000000000, 1000] holds more than 2^32 "
                          "values (the most dptrain reads): the header is damaged");
  save(d / "x.npy", "|u1", "(0, 4, 1073741824)", nullptr, 0);  // 2^32 values: the most, still read
  EXPECT_EQ(dp::data::open_npy(d / "x.npy", d / "y.npy")->sample_shape(), (dp::Shape{4, 1073741824}));
}

// A NaN or an infinity in x is refused when the arrays are opened, naming the first sample that
// holds one and counting the others (f32 and f16 alike): on oneDNN a ReLU fused into the layer
// before it maps NaN to 0, so such a sample did not stop the run; it left NaN in that layer's
// weights and the model at chance, silently (a 2-epoch MLP run on 512 samples with one NaN value:
// top-1 0.541 against 0.957 without it, and 32 NaN weights in fc1).
TEST(Npy, NonFiniteSamplesAreRefusedNamingTheFirst) {
  TempDir d;
  const int64_t y[4] = {0, 1, 0, 1};
  save(d / "y.npy", "<i8", "(4,)", y, sizeof y);
  const std::string tail = "; a network cannot train on NaN or infinite inputs: replace or drop such samples "
                           "(numpy: np.argwhere(~np.isfinite(x)) lists them)";
  float x[4][3] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}};
  x[1][2] = std::nanf("");
  save(d / "nan.npy", "<f4", "(4, 3)", x, sizeof x);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "nan.npy", d / "y.npy"); }),
            d / "nan.npy" + ": sample 1 holds NaN (value 2 of its 3)" + tail);
  x[3][0] = -std::numeric_limits<float>::infinity();
  x[2][1] = std::numeric_limits<float>::infinity();
  save(d / "three.npy", "<f4", "(4, 3, 1)", x, sizeof x);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "three.npy", d / "y.npy"); }),
            d / "three.npy" + ": sample 1 holds NaN (value 2 of its 3), and 2 more samples hold NaN or infinite "
                              "values" + tail);
  const uint16_t h[4] = {0x3c00, 0x7c00, 0x0000, 0xfc00};  // f16: 1, inf, 0, -inf
  save(d / "h.npy", "<f2", "(4,)", h, sizeof h);
  EXPECT_EQ(user_error([&] { dp::data::open_npy(d / "h.npy", d / "y.npy"); }),
            d / "h.npy" + ": sample 1 holds inf (value 0 of its 1), and 1 more samples hold NaN or infinite values" + tail);
  // The largest finite values are data like any other.
  const float big[4] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 0, 1e-45f};
  save(d / "big.npy", "<f4", "(4,)", big, sizeof big);
  std::vector<float> f(1);
  EXPECT_EQ(dp::data::open_npy(d / "big.npy", d / "y.npy")->get(1, f.data()), 1);
  EXPECT_EQ(f[0], -std::numeric_limits<float>::max());
}
