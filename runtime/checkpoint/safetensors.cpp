#include "runtime/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "runtime/suggest.h"

namespace dp {

// The data area is raw memory; both this host and the format are little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64, DType::U8};

// The reference implementation refuses headers above 100 MB; so do we (a corrupt length field
// would otherwise make us allocate gigabytes before noticing).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string sys_error(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

// Reads exactly n bytes at `offset` or throws (a short read means the file shrank under us).
void pread_all(int fd, void* p, size_t n, size_t offset, const std::string& path) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::pread(fd, c, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      DP_THROW_USER("reading safetensors file '{}' failed at byte {}: {}", path, offset, sys_error(errno));
    }
    if (r == 0) DP_THROW_USER("safetensors file '{}' ended at byte {} while reading (truncated?)", path, offset);
    c += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<size_t>(r);
  }
}

std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string supported_dtypes() {
  std::vector<std::string> names;
  for (DType t : kAllDTypes) names.push_back(safetensors_dtype_name(t));
  return join(names);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

// Writes all of [p, p+n) at `offset` or throws.
void pwrite_all(int fd, const void* p, size_t n, size_t offset, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      DP_THROW_USER("writing safetensors file '{}' failed: {}", path, sys_error(errno));
    }
    c += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<size_t>(w);
  }
}

// The header text for `specs` laid out in order and `metadata`: "__metadata__" first (only when
// there is some, as the reference writer does), then each tensor right after the previous one;
// padded with spaces to a multiple of 8. ends: each tensor's end offset in the data area.
std::string header_text(const std::string& path, const std::vector<SafetensorsSpec>& specs,
                        const std::map<std::string, std::string>& metadata, std::vector<size_t>* ends) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json meta = ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = std::move(meta);
  }
  std::set<std::string> seen;
  size_t offset = 0;
  for (const SafetensorsSpec& s : specs) {
    if (s.name.empty() || s.name == "__metadata__")
      DP_THROW_USER("cannot write '{}': invalid tensor name '{}'", path, s.name);
    if (!seen.insert(s.name).second) DP_THROW_USER("cannot write '{}': tensor name '{}' given twice", path, s.name);
    const size_t nbytes = bytes_of(s.shape, s.dtype);
    ordered_json entry = ordered_json::object();
    entry["dtype"] = safetensors_dtype_name(s.dtype);
    entry["shape"] = s.shape;
    entry["data_offsets"] = {offset, offset + nbytes};
    header[s.name] = std::move(entry);
    offset += nbytes;
    if (ends) ends->push_back(offset);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<SafetensorsSpec> specs,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), specs_(std::move(specs)) {
  header_bytes_ = header_text(path_, specs_, metadata, &ends_).size();
  data_start_ = sizeof(uint64_t) + header_bytes_;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) DP_THROW_USER("cannot create '{}' (writing '{}'): {}", tmp_, path_, sys_error(errno));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void SafetensorsWriter::write(size_t i, size_t offset, const void* data, size_t n) {
  DP_CHECK(i < specs_.size() && fd_ >= 0, "safetensors '{}': tensor {} of {}, or written after commit", path_, i,
           specs_.size());
  const size_t begin = i == 0 ? 0 : ends_[i - 1];
  DP_CHECK(offset + n <= ends_[i] - begin, "safetensors '{}': bytes [{}, {}) past tensor '{}''s {}", path_, offset,
           offset + n, specs_[i].name, ends_[i] - begin);
  pwrite_all(fd_, data, n, data_start_ + begin + offset, tmp_);
}

void SafetensorsWriter::commit(const std::map<std::string, std::string>& metadata) {
  DP_CHECK(fd_ >= 0, "safetensors '{}': committed twice", path_);
  const std::string text = header_text(path_, specs_, metadata, nullptr);
  DP_CHECK(text.size() == header_bytes_, "safetensors '{}': the final header has {} bytes, {} were reserved", path_,
           text.size(), header_bytes_);
  const uint64_t header_len = text.size();
  pwrite_all(fd_, &header_len, sizeof header_len, 0, tmp_);
  pwrite_all(fd_, text.data(), text.size(), sizeof header_len, tmp_);
  if (::fsync(fd_) != 0) DP_THROW_USER("fsync of '{}' failed: {}", tmp_, sys_error(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) DP_THROW_USER("closing '{}' failed: {}", tmp_, sys_error(errno));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    DP_THROW_USER("cannot rename '{}' to '{}': {}", tmp_, path_, sys_error(errno));
  committed_ = true;
  // Make the rename itself durable: fsync the directory that holds the entry.
  const std::string dir = dir_of(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    DP_THROW_USER("wrote '{}' but cannot open its directory '{}' to fsync: {}", path_, dir, sys_error(errno));
  const int drc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (drc != 0) DP_THROW_USER("wrote '{}' but fsync of its directory '{}' failed: {}", path_, dir, sys_error(err));
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       const std::function<void(size_t, size_t)>& after_tensor) {
  std::vector<SafetensorsSpec> specs;
  for (const auto& [name, t] : tensors) {
    DP_CHECK(t.defined(), "writing '{}': tensor '{}' is undefined", path, name);
    specs.push_back({name, t.dtype(), t.shape()});
  }
  SafetensorsWriter out(path, std::move(specs), metadata);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    if (t.nbytes() > 0) {
      const Tensor host = t.on_host();
      out.write(i, 0, host.raw(), host.nbytes());
    }
    if (after_tensor) after_tensor(i, tensors.size());
  }
  out.commit(metadata);
}

// ---------------------------------------------------------------------------------------------
// Reader

struct SafetensorsFile::Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

namespace {

using Info = SafetensorsFile::Info;

// The JSON header of the open file `fd` (its length field checked against the file and the
// limit); data_start: where the data area begins.
ordered_json read_header(int fd, const std::string& path, uint64_t& data_start, uint64_t& data_size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) DP_THROW_USER("cannot stat safetensors file '{}': {}", path, sys_error(errno));
  if (!S_ISREG(st.st_mode)) DP_THROW_USER("'{}' is not a regular file, so not a safetensors file", path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8)
    DP_THROW_USER("safetensors file '{}' is {} bytes, shorter than the 8-byte header length: truncated or not a "
                  "safetensors file",
                  path, file_size);
  uint64_t header_len = 0;
  pread_all(fd, &header_len, 8, 0, path);
  if (header_len > file_size - 8)
    DP_THROW_USER("safetensors file '{}': header length {} is beyond the file ({} bytes after the length field): "
                  "truncated or not a safetensors file",
                  path, header_len, file_size - 8);
  if (header_len > kMaxHeaderBytes)
    DP_THROW_USER("safetensors file '{}': header length {} exceeds the {}-byte limit: not a safetensors file?", path,
                  header_len, kMaxHeaderBytes);
  std::string text(header_len, '\0');
  pread_all(fd, text.data(), header_len, 8, path);
  data_start = 8 + header_len;
  data_size = file_size - data_start;
  ordered_json header;
  try {
    header = ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for a number too large
    DP_THROW_USER("safetensors file '{}': header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object())
    DP_THROW_USER("safetensors file '{}': header is a JSON {}, not an object", path, header.type_name());
  return header;
}

std::map<std::string, std::string> parse_metadata(const ordered_json& entry, const std::string& path) {
  if (!entry.is_object())
    DP_THROW_USER("safetensors file '{}': __metadata__ is a JSON {}, not an object of strings", path, entry.type_name());
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : entry.items()) {
    if (!v.is_string())
      DP_THROW_USER("safetensors file '{}': __metadata__ value '{}' is a JSON {}, not a string", path, k, v.type_name());
    out[k] = v.get<std::string>();
  }
  return out;
}

// One tensor's header entry, checked: dtype known, shape of non-negative integers, offsets inside
// the data area and holding exactly the bytes dtype x shape needs (overflow-guarded: a shape
// from a corrupt header can be anything).
Info parse_entry(const std::string& name, const ordered_json& entry, uint64_t data_size, const std::string& path) {
  auto bad = [&](const std::string& what) { DP_THROW_USER("safetensors file '{}': tensor '{}': {}", path, name, what); };
  if (!entry.is_object()) bad(fmt::format("entry is a JSON {}, not an object", entry.type_name()));
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) bad(fmt::format("missing \"{}\"", key));
  Info info{};
  const auto& jd = entry["dtype"];
  if (!jd.is_string()) bad("\"dtype\" is not a string");
  const std::string ds = jd.get<std::string>();
  bool found = false;
  for (DType t : kAllDTypes)
    if (ds == safetensors_dtype_name(t)) info.dtype = t, found = true;
  if (!found) bad(fmt::format("unknown dtype '{}' (supported: {})", ds, supported_dtypes()));
  const auto& js = entry["shape"];
  if (!js.is_array()) bad("\"shape\" is not an array");
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : js) {
    if (!d.is_number_unsigned()) bad(fmt::format("shape {} has a dimension that is not a non-negative integer", js.dump()));
    uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
    else info.shape.push_back(static_cast<int64_t>(v));
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) overflow = true;
    else numel *= v;
  }
  const auto& jo = entry["data_offsets"];
  if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() || !jo[1].is_number_unsigned())
    bad(fmt::format("\"data_offsets\" {} is not a pair of non-negative integers", jo.dump()));
  info.begin = jo[0].get<uint64_t>();
  info.end = jo[1].get<uint64_t>();
  if (info.begin > info.end || info.end > data_size)
    bad(fmt::format("data_offsets [{}, {}] are outside the data area of {} bytes (truncated file?)", info.begin,
                    info.end, data_size));
  const uint64_t size = dtype_size(info.dtype);
  if (overflow || numel > std::numeric_limits<uint64_t>::max() / size || numel * size != info.end - info.begin)
    bad(fmt::format("data_offsets [{}, {}] hold {} bytes but {} {} needs {}", info.begin, info.end,
                    info.end - info.begin, ds, js.dump(),
                    overflow ? std::string("more than 2^64") : std::to_string(numel * size)));
  return info;
}

// Sorts `order` by data offset (zero-byte tensors keep their header order among equal offsets)
// and refuses overlaps: each non-empty tensor must start at or after the furthest end seen so far
// among non-empty tensors.
void sort_and_check_overlaps(std::vector<std::string>& order, const std::map<std::string, Info>& infos,
                             const std::string& path) {
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const Info& x = infos.at(a);
    const Info& y = infos.at(b);
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  const std::string* prev = nullptr;
  for (const auto& name : order) {
    const Info& cur = infos.at(name);
    if (cur.begin == cur.end) continue;
    if (prev != nullptr) {
      const Info& p = infos.at(*prev);
      if (cur.begin < p.end)
        DP_THROW_USER("safetensors file '{}': tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path, *prev, p.begin,
                      p.end, name, cur.begin, cur.end);
    }
    if (prev == nullptr || cur.end > infos.at(*prev).end) prev = &name;
  }
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) DP_THROW_USER("cannot open safetensors file '{}': {}", path, sys_error(errno));
  f.fd_ = std::make_shared<Fd>(fd);
  uint64_t data_start = 0, data_size = 0;
  const ordered_json header = read_header(fd, path, data_start, data_size);
  f.data_start_ = data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      f.metadata_ = parse_metadata(entry, path);
      continue;
    }
    f.infos_.emplace(name, parse_entry(name, entry, data_size, path));
    f.order_.push_back(name);
  }
  sort_and_check_overlaps(f.order_, f.infos_, path);
  return f;
}

std::vector<std::string> SafetensorsFile::names() const { return order_; }

bool SafetensorsFile::has(const std::string& name) const { return infos_.count(name) != 0; }

const SafetensorsFile::Info& SafetensorsFile::info(const std::string& name) const {
  auto it = infos_.find(name);
  if (it != infos_.end()) return it->second;
  // Say what the file does hold: the nearest name, then the first few.
  std::string hint;
  std::string near = closest_match(name, order_);
  if (!near.empty()) hint = fmt::format(" (did you mean '{}'?)", near);
  constexpr size_t kShow = 8;
  std::vector<std::string> some(order_.begin(), order_.begin() + std::min(kShow, order_.size()));
  std::string listing = order_.empty() ? "no tensors" : fmt::format("{} tensors: {}", order_.size(), join(some));
  if (order_.size() > kShow) listing += fmt::format(", ... ({} more)", order_.size() - kShow);
  DP_THROW_USER("safetensors file '{}' has no tensor '{}'{}; it has {}", path_, name, hint, listing);
}

Tensor SafetensorsFile::get(const std::string& name) const {
  const Info& i = info(name);
  Tensor t = Tensor::zeros(i.shape, i.dtype, Device::cpu());
  if (i.end > i.begin) pread_all(fd_->fd, t.raw(), i.end - i.begin, data_start_ + i.begin, path_);
  return t;
}

}  // namespace dp
