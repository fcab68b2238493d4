#include "runtime/data/idx.h"

#include <filesystem>
#include <optional>
#include <vector>

#include "runtime/data/file_bytes.h"
#include "runtime/data/u8_dataset.h"
#include "runtime/log.h"

namespace dp::data {
namespace {

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// One parsed IDX file: its dimensions and a view of the bytes after the header.
struct IdxFile {
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> dims;
  size_t header = 0;
  uint64_t payload() const { return bytes.size() - header; }
};

// The size an IDX header declares: 4 + 4 x ndim header bytes, then the product of the dimensions.
std::optional<uint64_t> idx_declared_size(const uint8_t* p, size_t n) {
  if (n < 4) return std::nullopt;
  const size_t ndim = p[3];
  const size_t header = 4 + 4 * ndim;
  if (n < header) return std::nullopt;
  unsigned __int128 total = 1;
  for (size_t d = 0; d < ndim; ++d) {
    total *= be32(p + 4 + 4 * d);
    if (total > (uint64_t{1} << 50)) return uint64_t{1} << 50;  // nonsense: the payload check names it
  }
  return header + static_cast<uint64_t>(total);
}

IdxFile read_idx(const std::string& path, uint32_t magic, const char* what) {
  IdxFile f;
  f.bytes = read_file_bytes(path, idx_declared_size);
  if (f.bytes.size() < 4)
    DP_THROW_USER("{}: truncated: {} bytes, too short for an IDX header (expected {})", path, f.bytes.size(), what);
  uint32_t found = be32(f.bytes.data());
  if (found != magic)
    DP_THROW_USER("{}: wrong magic number 0x{:08x}, expected 0x{:08x} ({})", path, found, magic, what);
  int ndim = static_cast<int>(magic & 0xff);
  f.header = 4 + 4 * static_cast<size_t>(ndim);
  if (f.bytes.size() < f.header)
    DP_THROW_USER("{}: truncated: {} bytes, the IDX header of {} needs {}", path, f.bytes.size(), what, f.header);
  for (int d = 0; d < ndim; ++d) f.dims.push_back(be32(f.bytes.data() + 4 + 4 * d));
  return f;
}

std::string dims_str(const std::vector<uint64_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? " x " : "") + std::to_string(dims[i]);
  return s;
}

// The header's promise against what follows it: fewer bytes is a truncated file, more bytes
// means the header's dimensions do not describe this file.
void check_payload(const std::string& path, const IdxFile& f, const char* unit) {
  unsigned __int128 want = 1;
  for (auto d : f.dims) want *= d;
  // "3 x 28 x 28 = 2352 bytes of pixels", or for one dimension "3 bytes of labels".
  std::string says = f.dims.size() == 1 ? fmt::format("{} bytes of {}", static_cast<uint64_t>(want), unit)
                                        : fmt::format("{} = {} bytes of {}", dims_str(f.dims),
                                                      static_cast<uint64_t>(want), unit);
  if (f.payload() < want)
    DP_THROW_USER("{}: truncated: header says {}, found only {}", path, says, f.payload());
  if (f.payload() > want)
    DP_THROW_USER("{}: dimension mismatch: header says {}, but the file holds {} bytes after the header", path,
                  says, f.payload());
}

}  // namespace

std::unique_ptr<Dataset> open_idx(const std::string& images_path, const std::string& labels_path) {
  IdxFile im = read_idx(images_path, kIdxImagesMagic, "an IDX image file");
  if (im.dims[1] == 0 || im.dims[2] == 0)
    DP_THROW_USER("{}: dimension mismatch: images are {} x {}, expected both dimensions > 0", images_path,
                  im.dims[1], im.dims[2]);
  check_payload(images_path, im, "pixels");
  IdxFile lb = read_idx(labels_path, kIdxLabelsMagic, "an IDX label file");
  check_payload(labels_path, lb, "labels");
  if (im.dims[0] != lb.dims[0])
    DP_THROW_USER("{} holds {} images but {} holds {} labels, expected the same count (files from different "
                  "splits?)",
                  images_path, im.dims[0], labels_path, lb.dims[0]);

  std::vector<uint8_t> labels(lb.bytes.begin() + lb.header, lb.bytes.end());
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= kIdxNumClasses)
      DP_THROW_USER("{}: label {} at index {} is out of range, expected 0..{}", labels_path, labels[i], i,
                    kIdxNumClasses - 1);
  lb.bytes = {};
  // Drop the header in place rather than copying 47 MB of pixels.
  im.bytes.erase(im.bytes.begin(), im.bytes.begin() + im.header);
  im.bytes.shrink_to_fit();
  Shape shape{1, static_cast<int64_t>(im.dims[1]), static_cast<int64_t>(im.dims[2])};
  auto ds = std::make_unique<U8Dataset>(std::move(im.bytes), std::move(labels), shape, kIdxNumClasses,
                                        fmt::format("IDX {} + {}", images_path, labels_path));
  log::get("data")->debug("opened {}", ds->describe());
  return ds;
}

std::unique_ptr<Dataset> open_fashion_mnist(const std::string& dir, bool train) {
  namespace fs = std::filesystem;
  const std::string split = train ? "train" : "t10k";
  auto locate = [&](const std::string& stem) {
    fs::path gz = fs::path(dir) / (split + "-" + stem + "-ubyte.gz");
    fs::path plain = fs::path(dir) / (split + "-" + stem + "-ubyte");
    std::error_code ec;
    if (fs::exists(gz, ec)) return gz.string();
    if (fs::exists(plain, ec)) return plain.string();
    DP_THROW_USER("{}: no such file; Fashion-MNIST is expected in {} as {{train,t10k}}-{{images-idx3,labels-idx1}}"
                  "-ubyte.gz: apt-get install dataset-fashion-mnist (or run tools/setup.sh)",
                  gz.string(), dir);
  };
  std::string images = locate("images-idx3"), labels = locate("labels-idx1");
  auto ds = open_idx(images, labels);
  const Shape want{1, 28, 28};
  if (ds->sample_shape() != want)
    DP_THROW_USER("{}: images are {}, expected {} for Fashion-MNIST", images, shape_str(ds->sample_shape()),
                  shape_str(want));
  log::get("data")->info("Fashion-MNIST {}: {} samples from {}", split, ds->size(), dir);
  return ds;
}

}  // namespace dp::data
