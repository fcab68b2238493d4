#include "runtime/data/tar_index.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "base/error.h"

namespace dp::data {
namespace {

constexpr size_t kBlock = 512;
constexpr uint32_t kIndexVersion = 1;
constexpr char kIndexMagic[8] = {'D', 'P', 'T', 'A', 'R', 'I', 'D', 'X'};

// A NUL-terminated field of at most n bytes.
std::string field(const uint8_t* p, size_t n) {
  size_t len = 0;
  while (len < n && p[len] != 0) ++len;
  return std::string(reinterpret_cast<const char*>(p), len);
}

// An octal number field (spaces and NULs around it), or GNU's base-256 (first byte 0x80).
bool numeric(const uint8_t* p, size_t n, uint64_t& v) {
  v = 0;
  if (p[0] & 0x80) {
    for (size_t i = 1; i < n; ++i) v = (v << 8) | p[i];
    return true;
  }
  size_t i = 0;
  while (i < n && (p[i] == ' ' || p[i] == 0)) ++i;
  bool any = false;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i, any = true) v = v * 8 + (p[i] - '0');
  for (; i < n; ++i)
    if (p[i] != ' ' && p[i] != 0) return false;
  return any;
}

// The header's checksum: the byte sum with the checksum field read as spaces (unsigned, or signed
// as some old tars wrote it).
bool checksum_ok(const uint8_t* h) {
  uint64_t stored = 0;
  if (!numeric(h + 148, 8, stored)) return false;
  int64_t us = 0, ss = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const uint8_t b = (i >= 148 && i < 156) ? ' ' : h[i];
    us += b;
    ss += static_cast<int8_t>(b);
  }
  return static_cast<int64_t>(stored) == us || static_cast<int64_t>(stored) == ss;
}

// pax extended header records "<len> <key>=<value>\n": path and size override the next header's.
// A malformed record ends the parse (the members keep their own headers), never a read past it:
// the length is read from its own digits only, and must cover "<len> " and the '\n'.
void parse_pax(const std::vector<uint8_t>& d, std::string& path, uint64_t& size, bool& has_size) {
  size_t i = 0;
  while (i < d.size()) {
    size_t sp = i, len = 0;
    for (; sp < d.size() && d[sp] >= '0' && d[sp] <= '9' && sp - i < 12; ++sp) len = len * 10 + (d[sp] - '0');
    if (sp == i || sp >= d.size() || d[sp] != ' ' || len > d.size() - i || sp + 2 > i + len) return;
    const std::string rec(reinterpret_cast<const char*>(&d[sp + 1]), i + len - sp - 2);  // without the '\n'
    const size_t eq = rec.find('=');
    if (eq != std::string::npos) {
      const std::string k = rec.substr(0, eq), v = rec.substr(eq + 1);
      if (k == "path") path = v;
      if (k == "size") size = std::strtoull(v.c_str(), nullptr, 10), has_size = true;
    }
    i += len;
  }
}

struct Member {
  std::string name;
  uint64_t offset = 0, size = 0;
};

// Calls on_member for every regular file of the tar, in order.
void walk_tar(const RawFile& f, const std::function<void(const Member&)>& on_member) {
  std::string long_name;  // GNU 'L' or pax path for the next member
  uint64_t pax_size = 0;
  bool has_pax_size = false;
  uint8_t h[kBlock];
  for (uint64_t at = 0;;) {
    const size_t got = f.read_some(at, kBlock, h);
    if (got == 0) return;  // no end-of-archive blocks: tolerated, as Python's tarfile does
    if (got < kBlock) DP_THROW_USER("{}: truncated tar: a header at byte {} is cut short", f.path(), at);
    if (std::all_of(h, h + kBlock, [](uint8_t b) { return b == 0; })) return;  // end of archive
    if (!checksum_ok(h))
      DP_THROW_USER("{}: not a tar file, or corrupt: the header at byte {} has a wrong checksum", f.path(), at);
    uint64_t size = 0;
    if (!numeric(h + 124, 12, size)) DP_THROW_USER("{}: corrupt tar: bad size field at byte {}", f.path(), at);
    const char type = static_cast<char>(h[156]);
    std::string name = field(h, 100);
    if (std::memcmp(h + 257, "ustar\0", 6) == 0 && h[345] != 0) name = field(h + 345, 155) + "/" + name;
    const bool meta = type == 'x' || type == 'g' || type == 'L' || type == 'K';  // headers for the next member
    if (!meta && has_pax_size) size = pax_size;
    const uint64_t data = at + kBlock;
    if (size > f.size() - data)  // not data + size: a size near 2^64 would wrap (and walk backwards forever)
      DP_THROW_USER("{}: truncated tar: member '{}' needs {} bytes at byte {} but the file ends after {}", f.path(),
                    long_name.empty() ? name : long_name, size, data, f.size());
    if (type == 'L' || type == 'x') {
      const std::vector<uint8_t> d = f.read(data, static_cast<size_t>(size));
      if (type == 'L') long_name = field(d.data(), d.size());
      else parse_pax(d, long_name, pax_size, has_pax_size);
    } else {
      if (type == '0' || type == '\0' || type == '7') on_member(Member{long_name.empty() ? name : long_name, data, size});
      long_name.clear();
      has_pax_size = false;
    }
    at = data + (size + kBlock - 1) / kBlock * kBlock;
  }
}

// WebDataset's key and extension of a member path: "(dir/)base.ext.more" -> ("(dir/)base",
// "ext.more" lower-cased); false when the file name has no dot after its first character.
bool split_key(const std::string& path, std::string& key, std::string& ext) {
  const size_t slash = path.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = path.find('.', base);
  if (dot == std::string::npos || dot == base) return false;
  key = path.substr(0, dot);
  ext = path.substr(dot + 1);
  for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return true;
}

// A label member's value: .cls is a decimal integer, .json an object with an integer "label".
bool parse_label(const std::string& ext, const std::vector<uint8_t>& d, int32_t& label, std::string& why) {
  const std::string text(d.begin(), d.end());
  try {
    long long v = 0;
    if (ext == "cls") {
      size_t used = 0;
      v = std::stoll(text, &used, 10);
      if (text.find_first_not_of(" \t\r\n", used) != std::string::npos) throw std::invalid_argument("trailing text");
    } else {
      const nlohmann::json j = nlohmann::json::parse(text);
      if (!j.is_object() || !j.contains("label") || !j["label"].is_number_integer()) {
        why = "its .json has no integer \"label\"";
        return false;
      }
      v = j["label"].get<long long>();
    }
    if (v < 0 || v > 1'000'000'000) {
      why = fmt::format("its label {} is out of range (0 to 1e9)", v);
      return false;
    }
    label = static_cast<int32_t>(v);
    return true;
  } catch (const std::exception&) {
    why = fmt::format("its .{} is not {} (\"{}\")", ext, ext == "cls" ? "a decimal integer" : "valid JSON",
                      text.substr(0, 40));
    return false;
  }
}

}  // namespace

TarShardIndex index_tar_shard(const RawFile& shard) {
  TarShardIndex idx;
  struct Group {
    std::string key;
    bool image = false, label_member = false;
    TarSample s;
    std::string problem;
  } g;
  auto finish = [&] {
    if (g.key.empty()) return;
    if (!g.image && g.problem.empty()) g.problem = "no image (a .jpg, .jpeg or .png member)";
    if (!g.problem.empty()) idx.problems.push_back(fmt::format("{}: sample '{}': {}", shard.path(), g.key, g.problem));
    else idx.samples.push_back(g.s);
    g = Group{};
  };
  walk_tar(shard, [&](const Member& m) {
    std::string key, ext;
    if (!split_key(m.name, key, ext)) return;  // WebDataset skips names without an extension
    if (key != g.key) {
      finish();
      g.key = key;
      g.s.key = key;
    }
    if ((ext == "jpg" || ext == "jpeg" || ext == "png") && !g.image) {
      g.image = true;
      g.s.offset = m.offset, g.s.size = m.size;
    } else if ((ext == "cls" || (ext == "json" && !g.label_member)) && m.size <= (1 << 20)) {
      std::string why;
      if (!parse_label(ext, shard.read(m.offset, static_cast<size_t>(m.size)), g.s.label, why)) g.problem = why;
      g.label_member = true;
    }
  });
  finish();
  return idx;
}

std::string tar_index_path(const std::string& dir, const std::string& shard_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string abs = fs::absolute(shard_path, ec).lexically_normal().string();
  const uint64_t h = std::hash<std::string>{}(abs);  // names the file only; the content is checked
  return fmt::format("{}/{}-{:016x}.idx", dir, fs::path(shard_path).filename().string(), h);
}

namespace {

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

struct Reader {
  const std::string& s;
  size_t at = 0;
  bool ok = true;
  template <typename T>
  T get() {
    T v{};
    if (at + sizeof v > s.size()) return ok = false, v;
    std::memcpy(&v, s.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  std::string text(uint32_t n) {
    if (at + n > s.size()) return ok = false, std::string();
    at += n;
    return s.substr(at - n, n);
  }
};

}  // namespace

bool load_tar_index(const std::string& file, const RawFile& shard, TarShardIndex& out) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  const std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() < 8 + 4 + 4 || std::memcmp(s.data(), kIndexMagic, 8) != 0) return false;
  uint32_t crc = 0;
  std::memcpy(&crc, s.data() + s.size() - 4, 4);
  if (crc32c(s.data(), s.size() - 4) != crc) return false;
  Reader r{s, 8};
  if (r.get<uint32_t>() != kIndexVersion || r.get<uint64_t>() != shard.size() || r.get<int64_t>() != shard.mtime_ns())
    return false;
  const uint32_t n = r.get<uint32_t>(), np = r.get<uint32_t>();
  TarShardIndex idx;
  for (uint32_t i = 0; i < n && r.ok; ++i) {
    TarSample t;
    t.offset = r.get<uint64_t>();
    t.size = r.get<uint64_t>();
    t.label = r.get<int32_t>();
    t.key = r.text(r.get<uint32_t>());
    idx.samples.push_back(std::move(t));
  }
  for (uint32_t i = 0; i < np && r.ok; ++i) idx.problems.push_back(r.text(r.get<uint32_t>()));
  if (!r.ok || r.at != s.size() - 4) return false;
  out = std::move(idx);
  return true;
}

void save_tar_index(const std::string& file, const RawFile& shard, const TarShardIndex& idx) {
  std::string s(kIndexMagic, 8);
  put(s, kIndexVersion);
  put(s, shard.size());
  put(s, shard.mtime_ns());
  put(s, static_cast<uint32_t>(idx.samples.size()));
  put(s, static_cast<uint32_t>(idx.problems.size()));
  for (const auto& t : idx.samples) {
    put(s, t.offset);
    put(s, t.size);
    put(s, t.label);
    put(s, static_cast<uint32_t>(t.key.size()));
    s += t.key;
  }
  for (const auto& p : idx.problems) {
    put(s, static_cast<uint32_t>(p.size()));
    s += p;
  }
  put(s, crc32c(s.data(), s.size()));
  const std::string tmp = fmt::format("{}.tmp.{}", file, ::getpid());
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    o.write(s.data(), static_cast<std::streamsize>(s.size()));
    if (!o) DP_THROW_USER("{}: cannot write the tar index (is the run directory writable?)", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) DP_THROW_USER("{}: cannot write the tar index ({})", file, ec.message());
}

}  // namespace dp::data
