#include "runtime/data/cifar10.h"

#include <filesystem>
#include <vector>

#include "runtime/data/file_bytes.h"
#include "runtime/data/u8_dataset.h"
#include "runtime/log.h"

namespace dp::data {

std::unique_ptr<Dataset> open_cifar10(const std::string& dir, bool train) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  if (train)
    for (int i = 1; i <= 5; ++i) names.push_back(fmt::format("data_batch_{}.bin", i));
  else
    names.push_back("test_batch.bin");

  fs::path base(dir);
  std::error_code ec;
  if (!fs::exists(base / names[0], ec) && fs::exists(base / "cifar-10-batches-bin" / names[0], ec))
    base /= "cifar-10-batches-bin";

  constexpr int64_t kPixels = kCifarRecordBytes - 1;
  std::vector<uint8_t> pixels, labels;
  for (const auto& name : names) {
    const std::string path = (base / name).string();
    if (!fs::exists(path, ec))
      DP_THROW_USER("{}: no such file; CIFAR-10 (binary version) is expected in {} as data_batch_1..5.bin and "
                    "test_batch.bin: download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and "
                    "extract it there",
                    path, dir);
    // A batch file holds 10000 records; ten times that is refused before it is all inflated.
    std::vector<uint8_t> bytes = read_file_bytes(path, nullptr, uint64_t{100000} * kCifarRecordBytes);
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % kCifarRecordBytes != 0)
      DP_THROW_USER("{}: size {} bytes is not a positive multiple of {} (1 label byte + 3072 pixel bytes per "
                    "record); is this the binary version of CIFAR-10, complete?",
                    path, size, kCifarRecordBytes);
    const int64_t n = size / kCifarRecordBytes;
    pixels.reserve(pixels.size() + n * kPixels);
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* rec = bytes.data() + r * kCifarRecordBytes;
      if (rec[0] >= kCifarNumClasses)
        DP_THROW_USER("{}: label {} in record {} is out of range, expected 0..{}", path, rec[0], r,
                      kCifarNumClasses - 1);
      labels.push_back(rec[0]);
      pixels.insert(pixels.end(), rec + 1, rec + kCifarRecordBytes);
    }
  }
  auto ds = std::make_unique<U8Dataset>(std::move(pixels), std::move(labels), Shape{3, 32, 32}, kCifarNumClasses,
                                        fmt::format("CIFAR-10 {} ({})", train ? "train" : "test", base.string()));
  log::get("data")->info("opened {}", ds->describe());
  return ds;
}

}  // namespace dp::data
