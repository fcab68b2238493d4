// Tests for launch/datasets.h: what a run derives from its data — the model's class count
// (0 = the data's; fewer is an error saying what to set; more is kept), the class names written to
// classes.json, the loader's thread count, the training and evaluation transforms of image data
// sets (RandomResizedCrop + flip vs Resize + CenterCrop), and open_datasets on image folders.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "launch/datasets.h"
#include "tests/runtime/data/tiny_images.h"

namespace fs = std::filesystem;
using dp::launch::resolve_num_classes;

TEST(Datasets, NumClassesFollowsTheData) {
  EXPECT_EQ(resolve_num_classes(0, 3), 3);
  EXPECT_EQ(resolve_num_classes(3, 3), 3);
  EXPECT_EQ(resolve_num_classes(5, 3), 5);  // kept, with a warning
  try {
    resolve_num_classes(10, 12);
    ADD_FAILURE() << "no error";
  } catch (const dp::UserError& e) {
    EXPECT_STREQ(e.what(), "model.num_classes = 10 but the data has 12 classes; set model.num_classes = 12 (or leave "
                           "it out: it defaults to the data's class count)");
  }
}

TEST(Datasets, WorkersAndTransforms) {
  dp::DataConfig d;
  EXPECT_EQ(dp::launch::loader_workers(d, 2), 1);  // Fashion-MNIST: in memory, one thread
  d.dataset = dp::data::DatasetKind::ImageFolder;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(dp::launch::loader_workers(d, 1), cores);
  EXPECT_EQ(dp::launch::loader_workers(d, 4 * cores), 1);
  d.workers = 3;
  EXPECT_EQ(dp::launch::loader_workers(d, 1), 3);
  d.image_size = 224, d.resize = 256, d.hflip = true;
  const dp::data::Transform tr = dp::launch::transform_of(d, true), ev = dp::launch::transform_of(d, false);
  ASSERT_TRUE(tr.crop && ev.crop);
  EXPECT_EQ(tr.crop->kind, dp::data::image::ImageCrop::Kind::RandomResizedCrop);
  EXPECT_EQ(tr.crop->size, 224);
  EXPECT_EQ(tr.crop->scale_lo, 0.08);
  EXPECT_TRUE(tr.hflip);
  EXPECT_EQ(ev.crop->kind, dp::data::image::ImageCrop::Kind::ResizeCenterCrop);
  EXPECT_EQ(ev.crop->resize, 256);
  EXPECT_FALSE(ev.hflip);
  d.dataset = dp::data::DatasetKind::FashionMnist;
  EXPECT_FALSE(dp::launch::transform_of(d, true).crop.has_value());
}

TEST(Datasets, ImageFolderSplitsAndClassNames) {
  std::string tmpl = (fs::temp_directory_path() / "dp-test-datasets-XXXXXX").string();
  const fs::path root = mkdtemp(tmpl.data());
  auto put = [&](const std::string& rel) {
    fs::create_directories((root / rel).parent_path());
    const auto& png = dp::data::testing::kTinyPng;
    std::ofstream(root / rel, std::ios::binary).write(reinterpret_cast<const char*>(png.data()), png.size());
  };
  for (const char* f : {"train/zebra/1.png", "train/ant/1.png", "train/ant/2.png", "val/ant/1.png", "val/zebra/9.png"})
    put(f);
  dp::DataConfig d;
  d.dataset = dp::data::DatasetKind::ImageFolder;
  d.path = root.string();
  d.image_size = 6, d.resize = 7;
  d.mean = {0.5, 0.5, 0.5}, d.std = {0.5, 0.5, 0.5};
  const dp::launch::Datasets ds = dp::launch::open_datasets(d);
  EXPECT_EQ(ds.train.indices.size(), 3u);
  EXPECT_EQ(ds.eval.indices.size(), 2u);
  EXPECT_EQ(dp::launch::data_classes(ds), (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(dp::launch::classes_json(dp::launch::data_classes(ds)), "[\"ant\",\"zebra\"]");
  d.path = (root / "nope").string();
  try {
    dp::launch::open_datasets(d);
    ADD_FAILURE() << "no error";
  } catch (const dp::UserError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith(d.path + "/train: no such folder; data.dataset = \"image_folder\""));
  }
  fs::remove_all(root);
}
