#include "runtime/data/idx.h"

#include <algorithm>
#include <filesystem>
#include <limits>
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
  uint32_t magic = 0;
  uint64_t payload() const { return bytes.size() - header; }
};

// Bytes per element of an IDX type code (the magic's third byte): 0x08/0x09 bytes, 0x0b short,
// 0x0c int, 0x0d float, 0x0e double. An unknown code counts 1: the magic check names it.
uint64_t idx_element_bytes(uint8_t type) {
  switch (type) {
    case 0x0b: return 2;
    case 0x0c: case 0x0d: return 4;
    case 0x0e: return 8;
    default: return 1;
  }
}

// The size an IDX header declares: 4 + 4 x ndim header bytes, then the product of the dimensions
// times the element size.
std::optional<uint64_t> idx_declared_size(const uint8_t* p, size_t n) {
  if (n < 4) return std::nullopt;
  const size_t ndim = p[3];
  const size_t header = 4 + 4 * ndim;
  if (n < header) return std::nullopt;
  unsigned __int128 total = idx_element_bytes(p[2]);
  for (size_t d = 0; d < ndim; ++d) {
    total *= be32(p + 4 + 4 * d);
    if (total > (uint64_t{1} << 50)) return uint64_t{1} << 50;  // nonsense: the payload check names it
  }
  return header + static_cast<uint64_t>(total);
}

// magic: the usual header; also: a second one accepted (colour images, int32 labels). The
// message names the usual one.
IdxFile read_idx(const std::string& path, uint32_t magic, uint32_t also, const char* what) {
  IdxFile f;
  f.bytes = read_file_bytes(path, idx_declared_size);
  if (f.bytes.size() < 4)
    DP_THROW_USER("{}: truncated: {} bytes, too short for an IDX header (expected {})", path, f.bytes.size(), what);
  uint32_t found = be32(f.bytes.data());
  if (found != magic && found != also)
    DP_THROW_USER("{}: wrong magic number 0x{:08x}, expected 0x{:08x} ({})", path, found, magic, what);
  f.magic = found;
  int ndim = static_cast<int>(found & 0xff);
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
void check_payload(const std::string& path, const IdxFile& f, const char* unit, unsigned elem_bytes = 1) {
  unsigned __int128 want = elem_bytes;
  for (auto d : f.dims) want *= d;
  // "3 x 28 x 28 = 2352 bytes of pixels", or for one dimension "3 bytes of labels".
  std::string says = elem_bytes != 1 ? fmt::format("{} {} of {} bytes = {} bytes", dims_str(f.dims), unit, elem_bytes,
                                                   static_cast<uint64_t>(want))
                     : f.dims.size() == 1 ? fmt::format("{} bytes of {}", static_cast<uint64_t>(want), unit)
                                        : fmt::format("{} = {} bytes of {}", dims_str(f.dims),
                                                      static_cast<uint64_t>(want), unit);
  if (f.payload() < want)
    DP_THROW_USER("{}: truncated: header says {}, found only {}", path, says, f.payload());
  if (f.payload() > want)
    DP_THROW_USER("{}: dimension mismatch: header says {}, but the file holds {} bytes after the header", path,
                  says, f.payload());
}

// The sample shape (C, H, W) of an image file's dimensions (n, ...), and whether its pixels are
// stored channels last (then transposed to channels first).
Shape idx_sample_shape(const std::string& path, const IdxFile& im, bool& channels_last) {
  channels_last = false;
  const auto& d = im.dims;
  for (size_t i = 1; i < d.size(); ++i)
    if (d[i] == 0)
      DP_THROW_USER("{}: dimension mismatch: images are {}, expected {} dimensions > 0", path,
                    dims_str(std::vector<uint64_t>(d.begin() + 1, d.end())), d.size() == 3 ? "both" : "all");
  if (d.size() == 3) return {1, static_cast<int64_t>(d[1]), static_cast<int64_t>(d[2])};
  if (d[3] <= 4) {
    channels_last = true;
    return {static_cast<int64_t>(d[3]), static_cast<int64_t>(d[1]), static_cast<int64_t>(d[2])};
  }
  if (d[1] <= 4) return {static_cast<int64_t>(d[1]), static_cast<int64_t>(d[2]), static_cast<int64_t>(d[3])};
  DP_THROW_USER("{}: colour images of {} : expected the channels (1 to 4) first or last", path,
                dims_str(std::vector<uint64_t>(d.begin() + 1, d.end())));
}

// (n, H, W, C) -> (n, C, H, W), in place of the pixels after the header.
std::vector<uint8_t> to_channels_first(const std::vector<uint8_t>& bytes, size_t header, uint64_t n, const Shape& s) {
  const int64_t C = s[0], HW = s[1] * s[2];
  std::vector<uint8_t> out(bytes.size() - header);
  const uint8_t* in = bytes.data() + header;
  for (uint64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < HW; ++p)
      for (int64_t c = 0; c < C; ++c) out[(i * C + c) * HW + p] = in[(i * HW + p) * C + c];
  return out;
}

std::vector<int32_t> idx_labels(const std::string& path, const IdxFile& lb, int num_classes) {
  const bool wide = lb.magic == kIdxIntLabelsMagic;
  std::vector<int32_t> labels(lb.dims[0]);
  for (size_t i = 0; i < labels.size(); ++i) {
    const uint8_t* p = lb.bytes.data() + lb.header + (wide ? 4 * i : i);
    labels[i] = wide ? static_cast<int32_t>(be32(p)) : *p;
    if (labels[i] < 0 || (num_classes > 0 && labels[i] >= num_classes))
      DP_THROW_USER("{}: label {} at index {} is out of range, expected 0..{}", path, labels[i], i,
                    num_classes > 0 ? num_classes - 1 : std::numeric_limits<int32_t>::max());
  }
  return labels;
}

}  // namespace

std::unique_ptr<Dataset> open_idx(const std::string& images_path, const std::string& labels_path, int num_classes) {
  IdxFile im = read_idx(images_path, kIdxImagesMagic, kIdxColourImagesMagic, "an IDX image file");
  bool channels_last = false;
  const Shape shape = idx_sample_shape(images_path, im, channels_last);
  check_sample_values(images_path, shape);
  check_payload(images_path, im, "pixels");
  IdxFile lb = read_idx(labels_path, kIdxLabelsMagic, kIdxIntLabelsMagic, "an IDX label file");
  check_payload(labels_path, lb, "labels", lb.magic == kIdxIntLabelsMagic ? 4 : 1);
  if (im.dims[0] != lb.dims[0])
    DP_THROW_USER("{} holds {} images but {} holds {} labels, expected the same count (files from different "
                  "splits?)",
                  images_path, im.dims[0], labels_path, lb.dims[0]);

  std::vector<int32_t> labels = idx_labels(labels_path, lb, num_classes);
  lb.bytes = {};
  if (num_classes == 0) num_classes = labels.empty() ? 1 : *std::max_element(labels.begin(), labels.end()) + 1;
  if (channels_last) {
    im.bytes = to_channels_first(im.bytes, im.header, im.dims[0], shape);
  } else {
    // Drop the header in place rather than copying 47 MB of pixels.
    im.bytes.erase(im.bytes.begin(), im.bytes.begin() + im.header);
    im.bytes.shrink_to_fit();
  }
  auto ds = std::make_unique<U8Dataset>(std::move(im.bytes), std::move(labels), shape, num_classes,
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
  auto ds = open_idx(images, labels, kIdxNumClasses);
  const Shape want{1, 28, 28};
  if (ds->sample_shape() != want)
    DP_THROW_USER("{}: images are {}, expected {} for Fashion-MNIST", images, shape_str(ds->sample_shape()),
                  shape_str(want));
  log::get("data")->info("Fashion-MNIST {}: {} samples from {}", split, ds->size(), dir);
  return ds;
}

}  // namespace dp::data
