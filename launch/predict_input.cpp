#include "launch/predict_input.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "runtime/data/cifar10.h"
#include "runtime/data/file_bytes.h"
#include "runtime/data/idx.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/tar_shards.h"
#include "runtime/data/u8_dataset.h"

namespace dp::launch {
namespace {

namespace fs = std::filesystem;

constexpr const char* kReads =
    "dptrain predict reads a folder of images, tar shards (shard-{000..009}.tar), an IDX image file (e.g. "
    "t10k-images-idx3-ubyte.gz) or a CIFAR-10 binary file (*.bin)";

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The samples of one file, unlabelled (label 0 of 1 class: predict never reads labels).
PredictInput one_file(const std::string& path, std::vector<uint8_t> pixels, int64_t n, Shape shape,
                      const std::string& kind) {
  PredictInput in;
  in.what = fmt::format("{} {}: {} x {}", kind, path, n, shape_str(shape));
  in.samples = std::make_shared<data::U8Dataset>(std::move(pixels), std::vector<uint8_t>(static_cast<size_t>(n), 0),
                                                 std::move(shape), 1, kind + " " + path);
  in.files = {{path, 0, n}};
  return in;
}

PredictInput idx_images(const std::string& path, std::vector<uint8_t> bytes) {
  if (bytes.size() < 16) DP_THROW_USER("{}: truncated: {} bytes, too short for an IDX image header", path, bytes.size());
  const uint64_t n = be32(&bytes[4]), rows = be32(&bytes[8]), cols = be32(&bytes[12]);
  if (n == 0 || rows == 0 || cols == 0) DP_THROW_USER("{}: the IDX header says {} x {} x {}: no pixels", path, n, rows, cols);
  if (bytes.size() - 16 != n * rows * cols)
    DP_THROW_USER("{}: the IDX header says {} x {} x {} = {} bytes of pixels, the file holds {}", path, n, rows, cols,
                  n * rows * cols, bytes.size() - 16);
  bytes.erase(bytes.begin(), bytes.begin() + 16);
  return one_file(path, std::move(bytes), static_cast<int64_t>(n),
                  {1, static_cast<int64_t>(rows), static_cast<int64_t>(cols)}, "IDX images");
}

PredictInput cifar_records(const std::string& path, const std::vector<uint8_t>& bytes) {
  const int64_t n = static_cast<int64_t>(bytes.size()) / data::kCifarRecordBytes;
  std::vector<uint8_t> pixels;
  pixels.reserve(static_cast<size_t>(n * (data::kCifarRecordBytes - 1)));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* rec = bytes.data() + i * data::kCifarRecordBytes;
    pixels.insert(pixels.end(), rec + 1, rec + data::kCifarRecordBytes);  // the label byte first
  }
  return one_file(path, std::move(pixels), n, {3, 32, 32}, "CIFAR-10 records");
}

// One File per image, named as the data set names its samples (the file, or shard and key).
PredictInput images(std::unique_ptr<data::ImageDataset> ds, const std::string& kind, const std::string& path) {
  if (ds->size() == 0) DP_THROW_USER("--input {}: no images found; {}", path, kReads);
  PredictInput in;
  in.what = fmt::format("{} {}: {} x {}", kind, path, ds->size(), shape_str(ds->sample_shape()));
  for (int64_t i = 0; i < ds->size(); ++i) in.files.push_back({ds->sample_name(i), i, 1});
  in.samples = std::move(ds);
  return in;
}

}  // namespace

PredictInput open_predict_input(const std::string& path, const data::ImageOptions& options,
                                const std::string& index_dir) {
  if (path.find('{') != std::string::npos || path.ends_with(".tar"))
    return images(data::open_tar_shards(path, options, index_dir, /*labeled=*/false), "tar shards", path);
  std::error_code ec;
  if (fs::is_directory(path, ec)) return images(data::open_unlabeled_images(path, options), "images", path);
  if (!fs::exists(path, ec)) DP_THROW_USER("--input {}: no such file; {}", path, kReads);
  std::vector<uint8_t> bytes = data::read_file_bytes(path);  // gzip or plain
  if (bytes.size() >= 4 && be32(bytes.data()) == data::kIdxImagesMagic) return idx_images(path, std::move(bytes));
  if (path.ends_with(".bin") && !bytes.empty() && bytes.size() % data::kCifarRecordBytes == 0)
    return cifar_records(path, bytes);
  DP_THROW_USER("--input {}: neither an IDX image file (magic 0x{:08x}) nor CIFAR-10 records ({} bytes each, in a "
                "*.bin file); {}",
                path, data::kIdxImagesMagic, data::kCifarRecordBytes, kReads);
}

SampleSource sample_source(const PredictInput& in, int64_t i) {
  // The last file whose first sample is at or before i.
  auto it = std::upper_bound(in.files.begin(), in.files.end(), i,
                             [](int64_t v, const PredictInput::File& f) { return v < f.first; });
  DP_CHECK(it != in.files.begin() && i >= 0 && i < std::prev(it)->first + std::prev(it)->samples,
           "sample {} is not in the input's files", i);
  const PredictInput::File& f = *std::prev(it);
  return {&f.path, f.samples == 1 ? -1 : i - f.first};
}

}  // namespace dp::launch
