// Tests for open_cifar10 (runtime/data/cifar10.cpp): small synthetic CIFAR-10 binary files read
// back byte for byte in (C, H, W) order, and each malformed case's message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/data/cifar10.h"

namespace fs = std::filesystem;
using dp::data::open_cifar10;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dp-test-cifar-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The pixel byte of global record `g` at (c, y, x): distinct enough to catch any mix-up.
uint8_t pixel(int g, int c, int y, int x) { return static_cast<uint8_t>(g * 31 + c * 101 + y * 7 + x * 3); }
uint8_t label_of(int g) { return static_cast<uint8_t>((g * 3 + 1) % 10); }

void write_records(const std::string& path, int first, int count) {
  std::vector<uint8_t> b;
  for (int g = first; g < first + count; ++g) {
    b.push_back(label_of(g));
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x) b.push_back(pixel(g, c, y, x));
  }
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
}

// data_batch_k.bin holds k records (15 in all), test_batch.bin 4.
void write_dataset(const fs::path& dir) {
  fs::create_directories(dir);
  int g = 0;
  for (int k = 1; k <= 5; ++k) {
    write_records((dir / ("data_batch_" + std::to_string(k) + ".bin")).string(), g, k);
    g += k;
  }
  write_records((dir / "test_batch.bin").string(), 100, 4);
}

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

void expect_records(const dp::data::Dataset& ds, int first) {
  std::vector<float> out(3 * 32 * 32);
  for (int64_t i = 0; i < ds.size(); ++i) {
    const int g = first + static_cast<int>(i);
    ASSERT_EQ(ds.get(i, out.data()), label_of(g)) << "record " << i;
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 32; ++y)
        for (int x = 0; x < 32; ++x)
          ASSERT_EQ(out[(c * 32 + y) * 32 + x], static_cast<float>(pixel(g, c, y, x)) / 255.0f)
              << "record " << i << " at " << c << "," << y << "," << x;
  }
}

}  // namespace

TEST(DataCifar10, ReadsTrainAndTestExactly) {
  TempDir d;
  write_dataset(d.path);
  auto train = open_cifar10(d.path.string(), true);
  auto test = open_cifar10(d.path.string(), false);
  ASSERT_EQ(train->size(), 15);
  ASSERT_EQ(test->size(), 4);
  EXPECT_EQ(train->sample_shape(), (dp::Shape{3, 32, 32}));
  EXPECT_EQ(train->num_classes(), 10);
  expect_records(*train, 0);  // the five files in order 1..5
  expect_records(*test, 100);
}

TEST(DataCifar10, FindsTheTarballFolder) {
  TempDir d;
  write_dataset(d.path / "cifar-10-batches-bin");
  auto test = open_cifar10(d.path.string(), false);
  ASSERT_EQ(test->size(), 4);
  expect_records(*test, 100);
}

TEST(DataCifar10, MissingFile) {
  TempDir d;
  write_dataset(d.path);
  fs::remove(d / "data_batch_3.bin");
  EXPECT_EQ(user_error([&] { open_cifar10(d.path.string(), true); }),
            d / "data_batch_3.bin" + ": no such file; CIFAR-10 (binary version) is expected in " + d.path.string() +
                " as data_batch_1..5.bin and test_batch.bin: download "
                "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and extract it there");
}

TEST(DataCifar10, SizeNotAMultipleOfARecord) {
  TempDir d;
  write_dataset(d.path);
  fs::resize_file(d / "test_batch.bin", 3 * 3073 + 100);
  EXPECT_EQ(user_error([&] { open_cifar10(d.path.string(), false); }),
            d / "test_batch.bin" + ": size 9319 bytes is not a positive multiple of 3073 (1 label byte + 3072 pixel "
                                   "bytes per record); is this the binary version of CIFAR-10, complete?");
  fs::resize_file(d / "test_batch.bin", 0);
  EXPECT_EQ(user_error([&] { open_cifar10(d.path.string(), false); }),
            d / "test_batch.bin" + ": size 0 bytes is not a positive multiple of 3073 (1 label byte + 3072 pixel "
                                   "bytes per record); is this the binary version of CIFAR-10, complete?");
}

TEST(DataCifar10, LabelOutOfRange) {
  TempDir d;
  write_dataset(d.path);
  {
    std::fstream f(d / "data_batch_2.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(3073);  // the label byte of record 1
    f.put(static_cast<char>(10));
  }
  EXPECT_EQ(user_error([&] { open_cifar10(d.path.string(), true); }),
            d / "data_batch_2.bin" + ": label 10 in record 1 is out of range, expected 0..9");
}
