// data_bench: decoded + augmented images per second of dptrain's loader on an image folder or tar
// shards, the measurement behind tools/bench/data_bench.py (which runs torchvision's DataLoader
// beside it). One epoch of the training split in the sampler's shuffled order, batches of
// normalised f32 samples as the CPU path trains on them (decode, crop, resize, flip, normalise).
//   data_bench --dataset image_folder|tar_shards --path P [--val-path P] [--workers W] [--batch B]
//              [--image-size S] [--eval] [--no-decode-scaled] [--index-dir D]
// Prints one JSON line: {"images", "seconds", "images_per_s", "workers"}.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "launch/datasets.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"

int main(int argc, char** argv) {
  CLI::App app{"data_bench: images/s of dptrain's loader"};
  std::string dataset = "image_folder", path, val_path, index_dir = "/tmp/dp-data-bench-index";
  int workers = 1, batch = 64, size = 224;
  bool eval = false, no_scaled = false;
  app.add_option("--dataset", dataset, "image_folder or tar_shards")->required();
  app.add_option("--path", path, "data.path")->required();
  app.add_option("--val-path", val_path, "data.val_path");
  app.add_option("--workers", workers, "loader threads");
  app.add_option("--batch", batch, "batch size");
  app.add_option("--image-size", size, "data.image_size");
  app.add_option("--index-dir", index_dir, "tar index folder");
  app.add_flag("--eval", eval, "the evaluation transform (Resize + CenterCrop) instead of the training one");
  app.add_flag("--no-decode-scaled", no_scaled, "data.decode_scaled = false");
  CLI11_PARSE(app, argc, argv);
  try {
    dp::DataConfig d;
    d.dataset = dataset == "tar_shards" ? dp::data::DatasetKind::TarShards : dp::data::DatasetKind::ImageFolder;
    d.path = path;
    d.val_path = val_path.empty() ? path : val_path;
    d.image_size = size;
    d.resize = (size * 8 + 3) / 7;
    d.mean = {0.485, 0.456, 0.406};
    d.std = {0.229, 0.224, 0.225};
    d.hflip = true;
    d.decode_scaled = !no_scaled;
    const dp::launch::Datasets ds = dp::launch::open_datasets(d, index_dir);
    const dp::launch::DataSplit& split = eval ? ds.eval : ds.train;
    std::vector<int64_t> order = dp::data::sampler_indices(static_cast<int64_t>(split.indices.size()), 1, 0, true, 0, 0, false);
    const auto t0 = std::chrono::steady_clock::now();
    dp::data::Loader loader(*split.dataset, order, batch, false, dp::launch::transform_of(d, !eval), 0, 0, 3,
                            dp::data::BatchFormat::Transformed, workers);
    dp::data::Batch b;
    int64_t n = 0;
    while (loader.next(b)) n += b.x.dim(0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"images\": %lld, \"seconds\": %.4f, \"images_per_s\": %.2f, \"workers\": %d}\n",
                static_cast<long long>(n), s, n / s, workers);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "data_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
