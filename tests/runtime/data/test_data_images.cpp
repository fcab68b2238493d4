// Tests for the image data sets (runtime/data/image_folder.h, tar_shards.h, image_dataset.h)
// on folders and shards made here: torchvision's class and sample order (sorted class folders,
// sorted walk, case-insensitive extensions, non-images ignored), samples equal in a folder and in
// tar shards holding the same files, labels from .cls and .json, random access through the cached
// shard index (reused, and rebuilt when the shard changes), and one clear error naming the file
// for each bad input: an empty class folder, an unsupported image format, a val folder with other
// classes, a corrupt image, a truncated tar, a sample without a label, a label that does not
// parse; with skip_bad each is left out or replaced and counted instead. Class indices against
// torchvision's own ImageFolder: tests/oracle/test_image_torchvision.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/data/brace.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/tar_index.h"
#include "runtime/data/tar_shards.h"
#include "tests/runtime/data/data_test_util.h"
#include "tests/runtime/data/tiny_images.h"

namespace fs = std::filesystem;
using dp::data::testing::TempDir;
using dp::data::testing::user_error;
using dp::data::testing::tar_of;
using dp::data::testing::text;
using dp::data::testing::write;
using dp::data::testing::kTinyJpeg;
using dp::data::testing::kTinyPng;
using ::testing::HasSubstr;

namespace {

dp::data::ImageOptions options(bool skip_bad = false) {
  dp::data::ImageOptions o;
  o.eval_crop.size = 6;
  o.eval_crop.resize = 7;
  o.skip_bad = skip_bad;
  return o;
}

std::vector<uint8_t> sample_bytes(const dp::data::Dataset& ds, int64_t i) {
  std::vector<uint8_t> out(static_cast<size_t>(ds.sample_numel()));
  ds.get_u8(i, dp::data::SampleKey{}, out.data());
  return out;
}

}  // namespace

TEST(ImageFolder, ListsLikeTorchvision) {
  TempDir d("dp-test-images");
  write(d / "b/x.PNG", kTinyPng);      // extensions match case-insensitively
  write(d / "b/sub/a.jpg", kTinyJpeg); // subfolders are walked: root "b/sub" sorts after "b"
  write(d / "b/notes.txt", text("not an image"));
  write(d / "a/2.jpeg", kTinyJpeg);
  write(d / "a/10.png", kTinyPng);     // file names sort as strings
  write(d / ".hidden/1.png", kTinyPng);  // torchvision counts hidden folders as classes too
  const dp::data::FolderListing l = dp::data::list_image_folder(d.path.string());
  EXPECT_EQ(l.classes, (std::vector<std::string>{".hidden", "a", "b"}));
  const std::string r = d.path.string();
  EXPECT_EQ(l.files, (std::vector<std::string>{r + "/.hidden/1.png", r + "/a/10.png", r + "/a/2.jpeg", r + "/b/x.PNG",
                                               r + "/b/sub/a.jpg"}));
  EXPECT_EQ(l.labels, (std::vector<int32_t>{0, 1, 1, 2, 2}));
  auto ds = dp::data::open_image_folder(d.path.string(), options());
  EXPECT_EQ(ds->size(), 5);
  EXPECT_EQ(ds->num_classes(), 3);
  EXPECT_EQ(ds->sample_shape(), (dp::Shape{3, 6, 6}));
  EXPECT_EQ(ds->sample_name(3), r + "/b/x.PNG");
  std::vector<float> f(3 * 6 * 6);
  EXPECT_EQ(ds->get(3, f.data()), 2);
  EXPECT_EQ(f[0], 200.0f / 255.0f);  // the PNG's red corner, resized 8 -> 7, cropped to 6
}

TEST(ImageFolder, BadFoldersAreErrorsNamingThem) {
  TempDir d("dp-test-images");
  EXPECT_EQ(user_error([&] { dp::data::open_image_folder(d / "nope", options()); }),
            d / "nope" + ": no such folder; an image folder holds one subfolder per class with its images in it "
                         "(torchvision's ImageFolder layout: <dir>/<class>/<image>.jpg)");
  write(d / "cat/1.png", kTinyPng);
  fs::create_directories(d / "dog");
  EXPECT_EQ(user_error([&] { dp::data::open_image_folder(d.path.string(), options()); }),
            d.path.string() + ": class folder(s) without a .jpg, .jpeg or .png image: " + d / "dog" +
                "; add images or remove the folder (or set data.skip_bad = true to keep the class without samples)");
  auto kept = dp::data::open_image_folder(d.path.string(), options(true));
  EXPECT_EQ(kept->num_classes(), 2);  // the class keeps its index
  EXPECT_EQ(kept->size(), 1);
  write(d / "dog/1.bmp", text("BM"));
  EXPECT_EQ(user_error([&] { dp::data::open_image_folder(d.path.string(), options()); }),
            d.path.string() + ": 1 image(s) in a format dptrain does not decode (it reads .jpg, .jpeg and .png): " +
                d / "dog/1.bmp" + "; convert them, or set data.skip_bad = true to leave them out");
}

TEST(ImageFolder, ValWithOtherClassesIsAnError) {
  TempDir d("dp-test-images");
  for (const char* c : {"train/a/1.png", "train/b/1.png", "val/a/1.png", "val/c/1.png"}) write(d / c, kTinyPng);
  auto tr = dp::data::open_image_folder(d / "train", options());
  auto va = dp::data::open_image_folder(d / "val", options());
  EXPECT_EQ(user_error([&] { dp::data::check_same_classes(*tr, d / "train", *va, d / "val"); }),
            d / "val" + " and " + d / "train" + " have different classes, so their class indices would differ: only in " +
                d / "val" + ": c; missing from " + d / "val" + ": b; both need the same class folders");
}

TEST(ImageFolder, CorruptImageIsAnErrorOrSkippedAndCounted) {
  TempDir d("dp-test-images");
  write(d / "a/1.png", kTinyPng);
  write(d / "a/2.jpg", std::vector<uint8_t>(kTinyJpeg.begin(), kTinyJpeg.begin() + 200));  // cut short
  write(d / "b/3.png", kTinyPng);
  auto strict = dp::data::open_image_folder(d.path.string(), options());
  EXPECT_EQ(user_error([&] { sample_bytes(*strict, 1); }),
            d / "a/2.jpg" + ": cannot decode this JPEG: Premature end of JPEG file");
  auto lenient = dp::data::open_image_folder(d.path.string(), options(true));
  std::vector<uint8_t> out(3 * 6 * 6);
  EXPECT_EQ(lenient->get_u8(1, dp::data::SampleKey{}, out.data()), 1);  // replaced by the next sample, b/3.png
  EXPECT_EQ(out, sample_bytes(*lenient, 2));
  EXPECT_EQ(lenient->bad_samples(), 1);
  lenient->get_u8(1, dp::data::SampleKey{}, out.data());
  EXPECT_EQ(lenient->bad_samples(), 1);  // counted once
}

TEST(ImageFolder, UnlabeledImagesForPrediction) {
  TempDir d("dp-test-images");
  write(d / "x/2.png", kTinyPng);
  write(d / "1.jpg", kTinyJpeg);
  write(d / "readme.txt", text("-"));
  auto ds = dp::data::open_unlabeled_images(d.path.string(), options());
  ASSERT_EQ(ds->size(), 2);
  EXPECT_FALSE(ds->labeled());
  EXPECT_EQ(ds->sample_name(0), d / "1.jpg");
  EXPECT_EQ(ds->sample_name(1), d / "x/2.png");
  std::vector<float> f(3 * 6 * 6);
  EXPECT_EQ(ds->get(1, f.data()), -1);
  EXPECT_EQ(dp::data::open_unlabeled_images(d / "1.jpg", options())->size(), 1);
}

TEST(Braces, ExpandLikeWebDataset) {
  using dp::data::expand_braces;
  EXPECT_EQ(expand_braces("a.tar"), (std::vector<std::string>{"a.tar"}));
  EXPECT_EQ(expand_braces("train-{000008..000011}.tar"),
            (std::vector<std::string>{"train-000008.tar", "train-000009.tar", "train-000010.tar", "train-000011.tar"}));
  EXPECT_EQ(expand_braces("{a,b}-{1..2}"), (std::vector<std::string>{"a-1", "a-2", "b-1", "b-2"}));
  EXPECT_EQ(expand_braces("x{9..10}"), (std::vector<std::string>{"x9", "x10"}));
  EXPECT_EQ(user_error([] { expand_braces("t-{1..3.tar"); }), "shard pattern 't-{1..3.tar': '{' without '}'");
  EXPECT_EQ(user_error([] { expand_braces("t-{5..3}.tar"); }),
            "shard pattern 't-{5..3}.tar': range {5..3} is empty (it counts down)");
}

TEST(TarShards, SameSamplesAsTheFolderAndCachedIndex) {
  TempDir d("dp-test-images");
  write(d / "f/a/k1.png", kTinyPng);
  write(d / "f/a/k2.jpg", kTinyJpeg);
  write(d / "f/b/k3.png", kTinyPng);
  write(d / "s/s-0.tar", tar_of({{"k1.png", kTinyPng}, {"k1.cls", text("0\n")}, {"k2.jpg", kTinyJpeg}, {"k2.json", text("{\"label\": 0}")}}));
  write(d / "s/s-1.tar", tar_of({{"dir/k3.PNG", kTinyPng}, {"dir/k3.cls", text("1")}, {"dir/k3.txt", text("x")}}));
  auto folder = dp::data::open_image_folder(d / "f", options());
  auto shards = dp::data::open_tar_shards(d / "s/s-{0..1}.tar", options(), d / "index");
  ASSERT_EQ(shards->size(), 3);
  EXPECT_EQ(shards->num_classes(), 2);
  EXPECT_EQ(shards->sample_name(2), d / "s/s-1.tar" + ":dir/k3");
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<uint8_t> a(3 * 6 * 6), b(3 * 6 * 6);
    EXPECT_EQ(folder->get_u8(i, {}, a.data()), shards->get_u8(i, {}, b.data())) << i;
    EXPECT_EQ(a, b) << i;
  }
  // The index is cached and used again; a changed shard is indexed again.
  const std::string cache = dp::data::tar_index_path(d / "index", d / "s/s-1.tar");
  ASSERT_TRUE(fs::exists(cache));
  dp::data::TarShardIndex idx;
  EXPECT_TRUE(dp::data::load_tar_index(cache, dp::data::RawFile(d / "s/s-1.tar"), idx));
  EXPECT_EQ(idx.samples.at(0).key, "dir/k3");
  write(d / "s/s-1.tar", tar_of({{"k4.png", kTinyPng}, {"k4.cls", text("3")}}));
  fs::last_write_time(d / "s/s-1.tar", fs::last_write_time(d / "s/s-1.tar") + std::chrono::seconds(5));
  EXPECT_FALSE(dp::data::load_tar_index(cache, dp::data::RawFile(d / "s/s-1.tar"), idx));
  auto again = dp::data::open_tar_shards(d / "s/s-{0..1}.tar", options(), d / "index");
  EXPECT_EQ(again->num_classes(), 4);
  EXPECT_EQ(again->sample_name(2), d / "s/s-1.tar" + ":k4");
}

TEST(TarShards, BadShardsAreErrorsNamingShardAndSample) {
  TempDir d("dp-test-images");
  std::vector<uint8_t> t = tar_of({{"k1.png", kTinyPng}, {"k1.cls", text("0")}});
  write(d / "cut.tar", std::vector<uint8_t>(t.begin(), t.begin() + 600));
  EXPECT_EQ(user_error([&] { dp::data::open_tar_shards(d / "cut.tar", options(), d / "i"); }),
            d / "cut.tar" + ": truncated tar: member 'k1.png' needs " + std::to_string(kTinyPng.size()) +
                " bytes at byte 512 but the file ends after 600");
  write(d / "nolabel.tar", tar_of({{"k1.png", kTinyPng}, {"k1.cls", text("0")}, {"k2.png", kTinyPng}}));
  EXPECT_EQ(user_error([&] { dp::data::open_tar_shards(d / "nolabel.tar", options(), d / "i"); }),
            d / "nolabel.tar" + ": sample 'k2': no label; expected a member k2.cls (a decimal integer) or "
                                "k2.json with an integer \"label\"; fix the shards, or set data.skip_bad = true to leave "
                                "such samples out");
  EXPECT_EQ(dp::data::open_tar_shards(d / "nolabel.tar", options(true), d / "i")->size(), 1);
  EXPECT_EQ(dp::data::open_tar_shards(d / "nolabel.tar", options(), d / "i", /*labeled=*/false)->size(), 2);
  write(d / "badcls.tar", tar_of({{"k1.png", kTinyPng}, {"k1.cls", text("cat")}}));
  EXPECT_THAT(user_error([&] { dp::data::open_tar_shards(d / "badcls.tar", options(), d / "i"); }),
              HasSubstr(d / "badcls.tar" + ": sample 'k1': its .cls is not a decimal integer (\"cat\")"));
  write(d / "notar.tar", text(std::string(1024, 'x')));
  EXPECT_EQ(user_error([&] { dp::data::open_tar_shards(d / "notar.tar", options(), d / "i"); }),
            d / "notar.tar" + ": not a tar file, or corrupt: the header at byte 0 has a wrong checksum");
  EXPECT_EQ(user_error([&] { dp::data::open_tar_shards(d / "s-{1..2}.tar", options(), d / "i"); }),
            d / "s-1.tar" + ": no such shard (from the pattern '" + d / "s-{1..2}.tar" + "', 2 shard(s))");
}

namespace {
// tar_of's archive whose first member becomes a pax extended header (type 'x') for the second.
std::vector<uint8_t> tar_with_pax(const std::string& pax, const std::vector<uint8_t>& png) {
  std::vector<uint8_t> t = tar_of({{"pax", text(pax)}, {"k1.png", png}, {"k1.cls", text("0")}});
  t[156] = 'x';
  std::memset(t.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < 512; ++i) sum += t[i];
  std::snprintf(reinterpret_cast<char*>(t.data() + 148), 8, "%06o", sum);
  return t;
}
}  // namespace

// Pax headers no tar writes (issue 14's probing, with tools/fuzz/fuzz_tar_index): a size near
// 2^64 wrapped the bounds check and walked the archive backwards forever (indexing hung, its
// memory growing); a record "2 " built a string of length -1 (std::length_error, reported as
// "needs more memory"); a record of digits only made strtoull read past the header's bytes.
TEST(TarShards, PaxHeadersNoTarWritesAreErrorsOrIgnored) {
  TempDir d("dp-test-images");
  const std::string rec = "size=18446744073709550080\n";  // 2^64 - 1536: back to the pax header
  const std::string pax = std::to_string(rec.size() + 3) + " " + rec;
  write(d / "loop.tar", tar_with_pax(pax, kTinyPng));
  EXPECT_EQ(user_error([&] { dp::data::index_tar_shard(dp::data::RawFile(d / "loop.tar")); }),
            d / "loop.tar" + ": truncated tar: member 'k1.png' needs 18446744073709550080 bytes at byte 1536 but "
                             "the file ends after " + std::to_string(fs::file_size(d / "loop.tar")));
  for (const std::string& bad : {std::string("2 "), std::string(512, '9'), std::string("99 size=1\n")}) {
    write(d / "bad.tar", tar_with_pax(bad, kTinyPng));
    const dp::data::TarShardIndex idx = dp::data::index_tar_shard(dp::data::RawFile(d / "bad.tar"));
    ASSERT_EQ(idx.samples.size(), 1u) << bad;
    EXPECT_EQ(idx.samples[0].key, "k1");
    EXPECT_EQ(idx.samples[0].size, kTinyPng.size());
    EXPECT_EQ(idx.samples[0].label, 0);
  }
}
