#include "runtime/data/npy.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>

#include "base/half.h"
#include "runtime/data/raw_file.h"
#include "runtime/data/u8_dataset.h"
#include "runtime/log.h"

namespace dp::data {
namespace {

// The value of `key` in the header dict as written: a quoted string, True/False, or a parenthesised tuple.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  const std::regex re("['\"]" + key + "['\"]\\s*:\\s*('[^']*'|\"[^\"]*\"|True|False|\\([^)]*\\))");
  std::smatch m;
  if (!std::regex_search(header, m, re))
    DP_THROW_USER("{}: the .npy header has no '{}' (header: {})", path, key, header);
  return m[1].str();
}

// The header's `descr`: a quoted string (numpy writes no other form for the dtypes we read).
std::string descr_value(const std::string& header, const std::string& path) {
  const std::string v = dict_value(header, "descr", path);
  if (v.front() != '\'' && v.front() != '"')
    DP_THROW_USER("{}: the descr {} in the .npy header is not a quoted dtype string", path, v);
  return v.substr(1, v.size() - 2);
}

// The header's `shape`: a tuple of non-negative integers, "()" for a scalar.
std::vector<int64_t> parse_shape(const std::string& tuple, const std::string& path) {
  if (tuple.front() != '(')  // the regex ends a tuple at its ')': only a quoted string can get here
    DP_THROW_USER("{}: the shape {} in the .npy header is not a tuple", path, tuple);
  std::vector<int64_t> out;
  std::string num;
  for (char c : tuple.substr(1, tuple.size() - 2) + ",") {
    if (c >= '0' && c <= '9') {
      num += c;
      if (num.size() > 16)  // no array has a dimension of 10^16 (and std::stoll would throw past 2^63)
        DP_THROW_USER("{}: the shape {} in the .npy header has a dimension of 10^16 or more", path, tuple);
    } else if (c == ',' && !num.empty()) out.push_back(std::stoll(num)), num.clear();
    else if (c != ' ' && c != ',' && c != 'L')
      DP_THROW_USER("{}: cannot read the shape {} in the .npy header", path, tuple);
  }
  return out;
}

// Bytes per value of an integer descr, or 0 when it is not one we read.
int int_bytes(const std::string& d) {
  static const char* kInts[] = {"|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8"};
  for (const char* k : kInts)
    if (d == k) return d[2] == '1' ? 1 : d[2] - '0';
  return 0;
}

int64_t int_at(const NpyArray& a, int bytes, size_t i) {
  const uint8_t* p = a.data.data() + i * bytes;
  const bool is_signed = a.descr[1] == 'i';
  switch (bytes) {
    case 1: return is_signed ? static_cast<int8_t>(*p) : *p;
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return is_signed ? static_cast<int16_t>(v) : v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return is_signed ? static_cast<int32_t>(v) : v; }
    default: { uint64_t v; std::memcpy(&v, p, 8); return static_cast<int64_t>(v); }
  }
}

// An in-memory data set of f32 samples (f16 arrays are widened when opened).
class F32Dataset : public Dataset {
 public:
  F32Dataset(std::vector<float> x, std::vector<int32_t> y, Shape shape, int classes, std::string what)
      : x_(std::move(x)), y_(std::move(y)), shape_(std::move(shape)), numel_(shape_numel(shape_)),
        classes_(classes), what_(std::move(what)) {}
  int64_t size() const override { return static_cast<int64_t>(y_.size()); }
  Shape sample_shape() const override { return shape_; }
  int num_classes() const override { return classes_; }
  int32_t get(int64_t i, float* out) const override {
    DP_CHECK(i >= 0 && i < size(), "sample index {} out of range [0, {}) in {}", i, size(), what_);
    std::copy(x_.begin() + i * numel_, x_.begin() + (i + 1) * numel_, out);
    return y_[i];
  }
  std::string describe() const override {
    return fmt::format("{}: {} x {}, {} classes", what_, size(), shape_str(shape_), classes_);
  }

 private:
  std::vector<float> x_;
  std::vector<int32_t> y_;
  Shape shape_;
  int64_t numel_;
  int classes_;
  std::string what_;
};

// x's values as f32 samples of `sample_numel` values each (f16 widened), every one finite: a NaN or
// an infinity in the inputs cannot be trained on, and it would not always stop the run (a ReLU
// oneDNN fuses into the layer before it maps NaN to 0, where PyTorch's keeps it, so the loss stays
// finite while the NaN gradients it leaves poison that layer's weights); UserError naming the first
// such sample and counting the others.
std::vector<float> finite_samples(const NpyArray& x, const std::string& path, int64_t sample_numel) {
  const bool f32 = x.descr == "<f4";
  std::vector<float> v(x.data.size() / (f32 ? 4 : 2));
  if (f32) std::memcpy(v.data(), x.data.data(), x.data.size());
  else
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, x.data.data() + 2 * i, 2);
      v[i] = kernels::cpu::f16_to_f32(h);
    }
  const auto n = static_cast<size_t>(sample_numel);
  int64_t bad = 0, first = -1, at = 0;
  for (size_t s = 0; n > 0 && s < v.size() / n; ++s) {
    const auto it = std::find_if(v.begin() + s * n, v.begin() + (s + 1) * n, [](float f) { return !std::isfinite(f); });
    if (it == v.begin() + (s + 1) * n) continue;
    if (bad++ == 0) first = static_cast<int64_t>(s), at = it - (v.begin() + s * n);
  }
  if (bad > 0) {
    const float f = v[static_cast<size_t>(first) * n + static_cast<size_t>(at)];
    DP_THROW_USER("{}: sample {} holds {} (value {} of its {}){}; a network cannot train on NaN or infinite inputs: "
                  "replace or drop such samples (numpy: np.argwhere(~np.isfinite(x)) lists them)",
                  path, first, std::isnan(f) ? "NaN" : f > 0 ? "inf" : "-inf", at, n,
                  bad > 1 ? fmt::format(", and {} more samples hold NaN or infinite values", bad - 1) : "");
  }
  return v;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::vector<uint8_t> b = read_whole_file(path);
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    DP_THROW_USER("{}: not a .npy file (it does not start with \\x93NUMPY); save arrays with numpy.save", path);
  const int major = b[6];
  if (major < 1 || major > 3) DP_THROW_USER("{}: .npy format version {}.{}, expected 1.x to 3.x", path, major, b[7]);
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes)  // versions 2 and 3: a 4-byte header length
    DP_THROW_USER("{}: truncated: {} bytes, too short for a version {} .npy header", path, b.size(), major);
  uint32_t hlen = 0;
  std::memcpy(&hlen, b.data() + 8, len_bytes);
  // numpy.load's own limit (max_header_size): a longer header is damaged, and std::regex below
  // recurses per character.
  if (hlen > 10000)
    DP_THROW_USER("{}: the .npy header is {} bytes, more than the 10000 numpy itself reads: the file is damaged", path,
                  hlen);
  const size_t data_at = 8 + len_bytes + hlen;
  if (b.size() < data_at) DP_THROW_USER("{}: truncated: the .npy header needs {} bytes, the file has {}", path, data_at, b.size());
  const std::string header(b.begin() + 8 + len_bytes, b.begin() + data_at);
  NpyArray a;
  a.descr = descr_value(header, path);
  const std::string fortran = dict_value(header, "fortran_order", path);
  if (fortran != "True" && fortran != "False")
    DP_THROW_USER("{}: the fortran_order {} in the .npy header is not True or False", path, fortran);
  if (fortran == "True")
    DP_THROW_USER("{}: the array is in Fortran order; save it in C order (numpy.ascontiguousarray)", path);
  a.shape = parse_shape(dict_value(header, "shape", path), path);
  const int item = a.descr == "<f4" ? 4 : a.descr == "<f2" ? 2 : a.descr == "|u1" ? 1 : int_bytes(a.descr);
  if (item == 0)
    DP_THROW_USER("{}: dtype '{}' is not supported; x must be uint8, float32 or float16, y an integer type "
                  "(little-endian)",
                  path, a.descr);
  // In 128 bits, stopping at 2^62: a product that wraps 2^64 must not match a short file.
  unsigned __int128 bytes = static_cast<unsigned>(item);
  for (int64_t d : a.shape)
    if ((bytes *= static_cast<uint64_t>(d)) > (uint64_t{1} << 62))
      DP_THROW_USER("{}: the shape {} in the .npy header needs more than 2^62 bytes of data: the header is damaged",
                    path, dict_value(header, "shape", path));
  const uint64_t want = static_cast<uint64_t>(bytes), have = b.size() - data_at;
  if (have != want)
    DP_THROW_USER("{}: {}: the header's shape needs {} bytes of data, the file holds {}", path,
                  have < want ? "truncated" : "size mismatch", want, have);
  b.erase(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(data_at));
  a.data = std::move(b);
  return a;
}

std::unique_ptr<Dataset> open_npy(const std::string& x_path, const std::string& y_path, int num_classes) {
  NpyArray x = read_npy(x_path), y = read_npy(y_path);
  const int yb = int_bytes(y.descr);
  if (yb == 0 || y.shape.size() != 1)
    DP_THROW_USER("{}: labels must be a 1-dim integer array, found '{}' of shape ({})", y_path, y.descr,
                  fmt::join(y.shape, ", "));
  if (x.shape.empty() || x.shape[0] != y.shape[0])
    DP_THROW_USER("{} holds {} samples but {} holds {} labels; expected the same count", x_path,
                  x.shape.empty() ? 0 : x.shape[0], y_path, y.shape[0]);
  std::vector<int32_t> labels(static_cast<size_t>(y.shape[0]));
  int64_t most = -1;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t v = int_at(y, yb, i);
    if (v < 0 || v > 1'000'000'000) DP_THROW_USER("{}: label {} at index {} is out of range (0 to 1e9)", y_path, v, i);
    labels[i] = static_cast<int32_t>(v);
    most = std::max(most, v);
  }
  if (num_classes == 0) num_classes = static_cast<int>(most + 1);
  Shape shape(x.shape.begin() + 1, x.shape.end());
  if (shape.empty()) shape = {1};
  check_sample_values(x_path, shape);
  const std::string what = fmt::format("arrays {} + {}", x_path, y_path);
  std::unique_ptr<Dataset> ds;
  if (x.descr == "|u1") {
    ds = std::make_unique<U8Dataset>(std::move(x.data), std::move(labels), shape, num_classes, what);
  } else if (x.descr == "<f4" || x.descr == "<f2") {
    std::vector<float> v = finite_samples(x, x_path, shape_numel(shape));
    ds = std::make_unique<F32Dataset>(std::move(v), std::move(labels), shape, num_classes, what);
  } else {
    DP_THROW_USER("{}: samples must be uint8, float32 or float16, found '{}'", x_path, x.descr);
  }
  log::get("data")->info("{}", ds->describe());
  return ds;
}

}  // namespace dp::data
