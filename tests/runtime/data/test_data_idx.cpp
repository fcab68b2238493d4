// Tests for runtime/data/idx.h: IDX files written here (plain and gzip) read back exactly,
// every malformed case's message, and the real Fashion-MNIST when installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/data/idx.h"
#include "runtime/data/u8_dataset.h"
#include "tests/fashion_mnist.h"

namespace fs = std::filesystem;
using dp::data::open_fashion_mnist;
using dp::data::open_idx;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dp-test-idx-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
}

std::vector<uint8_t> images_file(uint32_t n, uint32_t rows, uint32_t cols, const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> b;
  put_be32(b, 0x00000803);
  put_be32(b, n);
  put_be32(b, rows);
  put_be32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

std::vector<uint8_t> labels_file(uint32_t n, const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  put_be32(b, 0x00000801);
  put_be32(b, n);
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

// 3 images of 2 x 4 whose bytes cover 0 and 255.
std::vector<uint8_t> sample_pixels() {
  std::vector<uint8_t> p(3 * 2 * 4);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  p[0] = 0;
  p[5] = 255;
  return p;
}
const std::vector<uint8_t> kLabels = {0, 9, 5};

// The message of the UserError `f` throws; fails the test for any other outcome.
template <typename F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const dp::UserError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected a UserError, got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a UserError, nothing was thrown";
  return "";
}

void expect_reads_back(const std::string& im, const std::string& lb) {
  auto ds = open_idx(im, lb);
  ASSERT_EQ(ds->size(), 3);
  EXPECT_EQ(ds->sample_shape(), (dp::Shape{1, 2, 4}));
  EXPECT_EQ(ds->num_classes(), 10);
  const auto px = sample_pixels();
  std::vector<float> out(8);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(ds->get(i, out.data()), kLabels[i]);
    for (int j = 0; j < 8; ++j) EXPECT_EQ(out[j], static_cast<float>(px[i * 8 + j]) / 255.0f) << i << "," << j;
  }
  ds->get(0, out.data());
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_EQ(out[5], 1.0f);
}

}  // namespace

TEST(DataIdx, ReadsPlainFilesExactly) {
  TempDir d;
  write_bytes(d / "im", images_file(3, 2, 4, sample_pixels()), false);
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  expect_reads_back(d / "im", d / "lb");
}

TEST(DataIdx, ReadsGzipFilesExactly) {
  TempDir d;
  write_bytes(d / "im.gz", images_file(3, 2, 4, sample_pixels()), true);
  write_bytes(d / "lb.gz", labels_file(3, kLabels), true);
  // Really compressed: the gzip magic, not the IDX magic, starts the file.
  std::ifstream f(d / "im.gz", std::ios::binary);
  unsigned char head[2] = {0, 0};
  f.read(reinterpret_cast<char*>(head), 2);
  EXPECT_EQ(head[0], 0x1f);
  EXPECT_EQ(head[1], 0x8b);
  expect_reads_back(d / "im.gz", d / "lb.gz");
  expect_reads_back(d / "im.gz", d / "lb.gz");
}

TEST(DataIdx, GetOutOfRangeIsAnError) {
  TempDir d;
  write_bytes(d / "im", images_file(3, 2, 4, sample_pixels()), false);
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  auto ds = open_idx(d / "im", d / "lb");
  std::vector<float> out(8);
  EXPECT_THROW(ds->get(3, out.data()), dp::DpError);
  EXPECT_THROW(ds->get(-1, out.data()), dp::DpError);
}

TEST(DataIdx, MissingFile) {
  TempDir d;
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  EXPECT_EQ(user_error([&] { open_idx(d / "nope", d / "lb"); }),
            d / "nope" + ": cannot open (No such file or directory)");
  fs::create_directory(d / "dir");
  EXPECT_EQ(user_error([&] { open_idx(d / "lb", d / "dir"); }), d / "lb" + ": wrong magic number 0x00000801, "
                                                                           "expected 0x00000803 (an IDX image file)");
  EXPECT_EQ(user_error([&] { open_idx(d / "dir", d / "lb"); }), d / "dir" + ": read failed (Is a directory)");
}

TEST(DataIdx, WrongMagic) {
  TempDir d;
  write_bytes(d / "im", images_file(3, 2, 4, sample_pixels()), false);
  write_bytes(d / "lb", labels_file(3, kLabels), true);
  // Swapped arguments: each file has the other's magic.
  EXPECT_EQ(user_error([&] { open_idx(d / "lb", d / "im"); }),
            d / "lb" + ": wrong magic number 0x00000801, expected 0x00000803 (an IDX image file)");
  EXPECT_EQ(user_error([&] { open_idx(d / "im", d / "im"); }),
            d / "im" + ": wrong magic number 0x00000803, expected 0x00000801 (an IDX label file)");
}

TEST(DataIdx, TruncatedHeader) {
  TempDir d;
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  write_bytes(d / "tiny", {0, 0}, false);
  EXPECT_EQ(user_error([&] { open_idx(d / "tiny", d / "lb"); }),
            d / "tiny" + ": truncated: 2 bytes, too short for an IDX header (expected an IDX image file)");
  auto head = images_file(3, 2, 4, {});
  head.resize(12);  // magic, n, rows; no cols
  write_bytes(d / "half", head, true);
  EXPECT_EQ(user_error([&] { open_idx(d / "half", d / "lb"); }),
            d / "half" + ": truncated: 12 bytes, the IDX header of an IDX image file needs 16");
}

TEST(DataIdx, TruncatedData) {
  TempDir d;
  auto px = sample_pixels();
  px.resize(20);
  write_bytes(d / "im.gz", images_file(3, 2, 4, px), true);
  write_bytes(d / "lb", labels_file(3, {1, 2}), false);
  EXPECT_EQ(user_error([&] { open_idx(d / "im.gz", d / "lb"); }),
            d / "im.gz" + ": truncated: header says 3 x 2 x 4 = 24 bytes of pixels, found only 20");
  write_bytes(d / "im.gz", images_file(3, 2, 4, sample_pixels()), true);
  EXPECT_EQ(user_error([&] { open_idx(d / "im.gz", d / "lb"); }),
            d / "lb" + ": truncated: header says 3 bytes of labels, found only 2");
}

TEST(DataIdx, TruncatedGzipStream) {
  TempDir d;
  write_bytes(d / "im.gz", images_file(3, 2, 4, sample_pixels()), true);
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  fs::resize_file(d / "im.gz", fs::file_size(d / "im.gz") - 10);  // cut into the deflate data + trailer
  EXPECT_EQ(user_error([&] { open_idx(d / "im.gz", d / "lb"); }),
            d / "im.gz" + ": corrupt or truncated gzip data (unexpected end of file)");
}

TEST(DataIdx, DimensionMismatch) {
  TempDir d;
  auto px = sample_pixels();
  px.resize(30, 7);  // 6 bytes more than 3 x 2 x 4
  write_bytes(d / "im", images_file(3, 2, 4, px), false);
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  EXPECT_EQ(user_error([&] { open_idx(d / "im", d / "lb"); }),
            d / "im" + ": dimension mismatch: header says 3 x 2 x 4 = 24 bytes of pixels, but the file holds 30 "
                       "bytes after the header");
  write_bytes(d / "im", images_file(3, 0, 4, {}), false);
  EXPECT_EQ(user_error([&] { open_idx(d / "im", d / "lb"); }),
            d / "im" + ": dimension mismatch: images are 0 x 4, expected both dimensions > 0");
}

// A file of no images bounds nothing by its size (fuzz_idx): colour images of 4 x (2^32 - 1)^2 made
// an int64 product wrap (UBSan) where the pixels are transposed, and a grey 65535 x 65535 image,
// 4 G values, was taken as the model's input. One sample is at most 2^32 values.
TEST(DataIdx, NoImagesOfImpossibleSizeAreRefused) {
  TempDir d;
  write_bytes(d / "lb", labels_file(0, {}), false);
  std::vector<uint8_t> col;
  put_be32(col, 0x00000804);
  for (uint32_t v : {0u, 0xffffffffu, 0xffffffffu, 4u}) put_be32(col, v);
  write_bytes(d / "col", col, false);
  EXPECT_EQ(user_error([&] { open_idx(d / "col", d / "lb"); }),
            d / "col" + ": one sample of shape [4, 4294967295, 4294967295] holds more than 2^32 values (the most "
                        "dptrain reads): the header is damaged");
  write_bytes(d / "im", images_file(0, 65536, 65537, {}), false);
  EXPECT_EQ(user_error([&] { open_idx(d / "im", d / "lb"); }),
            d / "im" + ": one sample of shape [1, 65536, 65537] holds more than 2^32 values (the most dptrain "
                       "reads): the header is damaged");
  write_bytes(d / "im", images_file(0, 65536, 65536, {}), false);  // 2^32 values: the most, still read
  EXPECT_EQ(open_idx(d / "im", d / "lb")->sample_shape(), (dp::Shape{1, 65536, 65536}));
}

TEST(DataIdx, GzipThatInflatesFarBeyondItsHeaderIsRefusedEarly) {
  // A ~300 KB gzip inflating to 300 MB behind a header that declares 24 bytes of pixels: refused
  // after 16 MiB past the declared size, not after inflating (and holding) all of it.
  TempDir d;
  {
    gzFile f = gzopen((d / "bomb.gz").c_str(), "wb9");
    ASSERT_NE(f, nullptr);
    const std::vector<uint8_t> head = images_file(3, 2, 4, {});
    gzwrite(f, head.data(), static_cast<unsigned>(head.size()));
    const std::vector<uint8_t> zeros(1 << 20, 0);
    for (int i = 0; i < 300; ++i) gzwrite(f, zeros.data(), static_cast<unsigned>(zeros.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  ASSERT_LT(fs::file_size(d / "bomb.gz"), 2u << 20);
  write_bytes(d / "lb", labels_file(3, kLabels), false);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(user_error([&] { open_idx(d / "bomb.gz", d / "lb"); }),
            d / "bomb.gz" + ": holds more than 16777256 bytes, far beyond the 40 its header declares (a damaged file, "
                            "or a compressed file that inflates far beyond its data); reading stopped there");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(DataIdx, CountMismatch) {
  TempDir d;
  write_bytes(d / "im", images_file(3, 2, 4, sample_pixels()), false);
  write_bytes(d / "lb", labels_file(2, {1, 2}), false);
  EXPECT_EQ(user_error([&] { open_idx(d / "im", d / "lb"); }),
            d / "im" + " holds 3 images but " + d / "lb" +
                " holds 2 labels, expected the same count (files from different splits?)");
}

TEST(DataIdx, LabelOutOfRange) {
  TempDir d;
  write_bytes(d / "im", images_file(3, 2, 4, sample_pixels()), false);
  write_bytes(d / "lb", labels_file(3, {9, 10, 0}), true);
  EXPECT_EQ(user_error([&] { open_idx(d / "im", d / "lb"); }),
            d / "lb" + ": label 10 at index 1 is out of range, expected 0..9");
}

TEST(DataIdx, FashionMnistMissingSaysHowToInstall) {
  TempDir d;
  EXPECT_EQ(user_error([&] { open_fashion_mnist(d.path.string(), true); }),
            d / "train-images-idx3-ubyte.gz" + ": no such file; Fashion-MNIST is expected in " + d.path.string() +
                " as {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz: apt-get install dataset-fashion-mnist (or "
                "run tools/setup.sh)");
}

TEST(DataIdx, FashionMnistAcceptsUncompressedNames) {
  TempDir d;
  std::vector<uint8_t> px(2 * 28 * 28, 128);
  write_bytes(d / "t10k-images-idx3-ubyte", images_file(2, 28, 28, px), false);
  write_bytes(d / "t10k-labels-idx1-ubyte.gz", labels_file(2, {3, 4}), true);
  auto ds = open_fashion_mnist(d.path.string(), false);
  ASSERT_EQ(ds->size(), 2);
  std::vector<float> out(784);
  EXPECT_EQ(ds->get(1, out.data()), 4);
  EXPECT_EQ(out[783], 128.0f / 255.0f);
  // A 2 x 4 image is an IDX file, but not Fashion-MNIST.
  write_bytes(d / "t10k-images-idx3-ubyte", images_file(2, 2, 4, std::vector<uint8_t>(16, 1)), false);
  EXPECT_EQ(user_error([&] { open_fashion_mnist(d.path.string(), false); }),
            d / "t10k-images-idx3-ubyte" + ": images are [1, 2, 4], expected [1, 28, 28] for Fashion-MNIST");
}

// tests/fashion_mnist.h: $DPTRAIN_FASHION_MNIST_DIR first when it holds the training images, then
// Debian's path; what a test checks for is what it passes on as data.path.
TEST(DataIdx, TestsFindFashionMnistInTheEnvironmentsDirectoryFirst) {
  const TempDir d;
  const char* before = std::getenv(dp::test::kFashionMnistEnv);
  const std::string saved = before ? before : "";
  const std::string debian = fs::exists(fs::path(dp::data::kFashionMnistDir) / "train-images-idx3-ubyte.gz")
                                 ? dp::data::kFashionMnistDir
                                 : "";
  ::setenv(dp::test::kFashionMnistEnv, d.path.c_str(), 1);
  EXPECT_EQ(dp::test::fashion_mnist_dir(), debian) << "a directory without the files does not count";
  std::ofstream(d / "train-images-idx3-ubyte.gz").put('x');
  EXPECT_EQ(dp::test::fashion_mnist_dir(), d.path.string());
  EXPECT_EQ(dp::test::fashion_mnist_override(), "data.path=\"" + d.path.string() + "\"");
  EXPECT_EQ(dp::test::fashion_mnist_set(), " --set 'data.path=\"" + d.path.string() + "\"'");
  EXPECT_EQ(dp::test::fashion_mnist_file("t10k-images-idx3-ubyte.gz"), d / "t10k-images-idx3-ubyte.gz");
  ::unsetenv(dp::test::kFashionMnistEnv);
  EXPECT_EQ(dp::test::fashion_mnist_dir(), debian);
  EXPECT_EQ(dp::test::fashion_mnist_missing(),
            "Fashion-MNIST not found in $DPTRAIN_FASHION_MNIST_DIR (unset) nor /usr/share/datasets/fashion-mnist: "
            "apt-get install dataset-fashion-mnist, or point DPTRAIN_FASHION_MNIST_DIR at a directory holding "
            "{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz");
  if (before) ::setenv(dp::test::kFashionMnistEnv, saved.c_str(), 1);
}

TEST(DataIdx, RealFashionMnist) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = dp::test::fashion_mnist_dir();
  auto train = open_fashion_mnist(dir, true);
  auto test = open_fashion_mnist(dir, false);
  ASSERT_EQ(train->size(), 60000);
  ASSERT_EQ(test->size(), 10000);
  EXPECT_EQ(train->sample_shape(), (dp::Shape{1, 28, 28}));
  EXPECT_EQ(train->num_classes(), 10);
  std::vector<float> x(784);
  EXPECT_EQ(train->get(0, x.data()), 9);  // an ankle boot
  EXPECT_EQ(train->get(1, x.data()), 0);  // a T-shirt/top
  EXPECT_EQ(test->get(0, x.data()), 9);
  // The classes are balanced: 6000 per class in train, 1000 in test.
  std::vector<int> counts(10, 0), test_counts(10, 0);
  float lo = 1.0f, hi = 0.0f;
  for (int64_t i = 0; i < train->size(); ++i) {
    counts[train->get(i, x.data())]++;
    for (float v : x) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      // Every value is byte / 255.
      float k = v * 255.0f;
      ASSERT_EQ(static_cast<float>(static_cast<int>(k + 0.5f)) / 255.0f, v) << "sample " << i;
    }
  }
  for (int64_t i = 0; i < test->size(); ++i) test_counts[test->get(i, x.data())]++;
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(counts[c], 6000) << "class " << c;
    EXPECT_EQ(test_counts[c], 1000) << "class " << c;
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

// data.dataset = "idx" reads any class count (num_classes 0: the largest label + 1), int32 labels
// (magic 0x0c01) beyond 255, and colour files (4 dims), channels last or first.
TEST(DataIdx, AnyClassCountIntLabelsAndColour) {
  TempDir d;
  write_bytes(d / "im", images_file(3, 2, 4, sample_pixels()), false);
  write_bytes(d / "lb", labels_file(3, {11, 2, 0}), false);
  EXPECT_EQ(open_idx(d / "im", d / "lb", 0)->num_classes(), 12);
  std::vector<uint8_t> wide;
  put_be32(wide, 0x00000c01);
  put_be32(wide, 3);
  for (uint32_t v : {300u, 0u, 7u}) put_be32(wide, v);
  write_bytes(d / "lb32", wide, false);
  auto ds = open_idx(d / "im", d / "lb32", 0);
  EXPECT_EQ(ds->num_classes(), 301);
  std::vector<float> out(8);
  EXPECT_EQ(ds->get(0, out.data()), 300);
  // 2 colour images of 1 x 2 pixels, 3 channels last: (n, H, W, C) = (2, 1, 2, 3).
  std::vector<uint8_t> col;
  put_be32(col, 0x00000804);
  for (uint32_t v : {2u, 1u, 2u, 3u}) put_be32(col, v);
  for (int i = 0; i < 12; ++i) col.push_back(static_cast<uint8_t>(i));
  write_bytes(d / "col", col, false);
  write_bytes(d / "lb2", labels_file(2, {0, 1}), false);
  auto c = open_idx(d / "col", d / "lb2", 0);
  EXPECT_EQ(c->sample_shape(), (dp::Shape{3, 1, 2}));
  std::vector<float> px(6);
  c->get(1, px.data());
  // Image 1 is bytes 6..11 as (x0: r g b, x1: r g b); channels first: r0 r1 g0 g1 b0 b1.
  const std::vector<float> want = {6, 9, 7, 10, 8, 11};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(px[i], want[i] / 255.0f) << i;
}

// The bound on how much of a file is read counts the header's element size: 6 M int32 labels
// (24 MB, 18 MB more than one byte each) are read whole, not refused as "far beyond" a 6 MB
// declaration.
TEST(DataIdx, IntLabelsBeyondTheSlackReadWhole) {
  TempDir d;
  constexpr uint32_t n = 6'000'000;
  std::vector<uint8_t> im;
  put_be32(im, 0x00000803);
  for (uint32_t v : {n, 1u, 1u}) put_be32(im, v);
  im.resize(im.size() + n, 7);
  write_bytes(d / "im", im, false);
  std::vector<uint8_t> wide;
  put_be32(wide, 0x00000c01);
  put_be32(wide, n);
  wide.reserve(8 + 4 * size_t{n});
  for (uint32_t i = 0; i < n; ++i) put_be32(wide, i % 3);
  write_bytes(d / "lb32", wide, false);
  auto ds = open_idx(d / "im", d / "lb32", 0);
  EXPECT_EQ(ds->size(), n);
  EXPECT_EQ(ds->num_classes(), 3);
  float px = 0;
  EXPECT_EQ(ds->get(n - 1, &px), static_cast<int>((n - 1) % 3));
}
