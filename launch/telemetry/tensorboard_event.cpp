#include "launch/telemetry/tensorboard_event.h"

#include <cstring>

#include "base/error.h"

namespace dp::metrics {
namespace {

enum Wire : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, uint32_t field, Wire w) { put_varint(out, (field << 3) | w); }
template <typename T>
void put_fixed(std::string& out, T v) {  // float/double as their little-endian IEEE bytes
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(reinterpret_cast<const char*>(b), sizeof(T));  // hosts are little-endian (x86-64, aarch64)
}
void put_bytes(std::string& out, uint32_t field, std::string_view s) {
  put_key(out, field, kBytes);
  put_varint(out, s.size());
  out.append(s);
}

// A cursor over one message's bytes.
struct Reader {
  std::string_view b;
  size_t pos = 0;
  const std::string& what;

  [[noreturn]] void fail(const std::string& why) const {
    throw DpError(fmt::format("{}: malformed event at byte {} of the record: {}", what, pos, why));
  }
  bool done() const { return pos >= b.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= b.size()) fail("truncated varint");
      const auto c = static_cast<unsigned char>(b[pos++]);
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  template <typename T>
  T fixed() {
    if (b.size() - pos < sizeof(T)) fail("truncated fixed-size field");
    T v;
    std::memcpy(&v, b.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (b.size() - pos < n) fail("truncated length-delimited field");
    std::string_view s = b.substr(pos, n);
    pos += n;
    return s;
  }
  void skip(uint32_t wire) {
    switch (wire) {
      case kVarint: varint(); break;
      case kFixed64: fixed<uint64_t>(); break;
      case kBytes: bytes(); break;
      case kFixed32: fixed<uint32_t>(); break;
      default: fail(fmt::format("unsupported wire type {}", wire));
    }
  }
  void expect(uint32_t wire, uint32_t want, const char* field) {
    if (wire != want) fail(fmt::format("field {} has wire type {}, expected {}", field, wire, want));
  }
};

// False when the value is not a scalar (an image, histogram or tensor summary: other fields).
bool decode_value(std::string_view bytes, const std::string& what, ScalarValue& v) {
  Reader r{bytes, 0, what};
  bool scalar = false;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
    if (field == 1) {
      r.expect(wire, kBytes, "Summary.Value.tag");
      v.tag = std::string(r.bytes());
    } else if (field == 2) {
      r.expect(wire, kFixed32, "Summary.Value.simple_value");
      v.value = r.fixed<float>();
      scalar = true;
    } else {
      r.skip(wire);
    }
  }
  return scalar;
}

}  // namespace

std::string encode_event(const Event& e) {
  static_assert(sizeof(float) == 4 && sizeof(double) == 8);
  std::string summary;
  for (const auto& s : e.scalars) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_key(value, 2, kFixed32);
    put_fixed<float>(value, s.value);
    put_bytes(summary, 1, value);
  }
  std::string out;
  put_key(out, 1, kFixed64);
  put_fixed<double>(out, e.wall_time);
  if (e.step != 0) {
    put_key(out, 2, kVarint);
    put_varint(out, static_cast<uint64_t>(e.step));  // int64: two's complement, 10 bytes if negative
  }
  if (!e.file_version.empty()) put_bytes(out, 3, e.file_version);
  if (!e.scalars.empty()) put_bytes(out, 5, summary);
  return out;
}

Event decode_event(std::string_view bytes, const std::string& what) {
  Reader r{bytes, 0, what};
  Event e;
  while (!r.done()) {
    const uint64_t key = r.varint();
    const auto field = static_cast<uint32_t>(key >> 3), wire = static_cast<uint32_t>(key & 7);
    if (field == 1) {
      r.expect(wire, kFixed64, "Event.wall_time");
      e.wall_time = r.fixed<double>();
    } else if (field == 2) {
      r.expect(wire, kVarint, "Event.step");
      e.step = static_cast<int64_t>(r.varint());
    } else if (field == 3) {
      r.expect(wire, kBytes, "Event.file_version");
      e.file_version = std::string(r.bytes());
    } else if (field == 5) {
      r.expect(wire, kBytes, "Event.summary");
      Reader s{r.bytes(), 0, what};
      while (!s.done()) {
        const uint64_t skey = s.varint();
        const auto sfield = static_cast<uint32_t>(skey >> 3), swire = static_cast<uint32_t>(skey & 7);
        if (sfield == 1) {
          s.expect(swire, kBytes, "Summary.value");
          ScalarValue v;
          if (decode_value(s.bytes(), what, v)) e.scalars.push_back(std::move(v));
        } else {
          s.skip(swire);
        }
      }
    } else {
      r.skip(wire);
    }
  }
  return e;
}

}  // namespace dp::metrics
