#include "collectives/bootstrap/tcp_store_wire.h"

namespace dp::store_wire {

void put_u8(std::string& s, uint8_t v) { s.push_back(static_cast<char>(v)); }
void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_i32(std::string& s, int32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
void put_str(std::string& s, const std::string& v) {
  put_u32(s, static_cast<uint32_t>(v.size()));
  s += v;
}
void put_bytes(std::string& s, const std::string& v) {
  put_u64(s, v.size());
  s += v;
}
std::string framed(const std::string& body) {
  std::string f;
  f.reserve(body.size() + 4);
  put_u32(f, static_cast<uint32_t>(body.size()));
  f += body;
  return f;
}

std::string encode_challenge(const Challenge& c) {
  std::string b;
  put_u32(b, kMagic);
  put_u32(b, kVersion);
  put_u8(b, c.token_required ? 1 : 0);
  put_str(b, c.nonce);
  put_str(b, c.job_id);
  put_str(b, c.owner);
  return b;
}

Challenge parse_challenge(const std::string& body) {
  Reader r(body);
  if (r.u32() != kMagic) throw ProtocolError("not a dptrain TCP store (no DPST greeting)");
  const uint32_t version = r.u32();
  if (version != kVersion)
    throw ProtocolError("the store speaks protocol version " + std::to_string(version) + ", this process " +
                        std::to_string(kVersion) + " (mixed dptrain builds?)");
  Challenge c;
  c.token_required = r.u8() != 0;
  c.nonce = r.str();
  c.job_id = r.str();
  c.owner = r.str();
  if (!r.done()) throw ProtocolError("bytes after the greeting");
  return c;
}

std::string encode_hello(int32_t rank, int32_t world_size, const std::string& nonce, const std::string& mac,
                         const std::string& job_id) {
  std::string b;
  put_u8(b, kHello);
  put_i32(b, rank);
  put_i32(b, world_size);
  put_str(b, nonce);
  put_str(b, mac);
  put_str(b, job_id);
  return b;
}

Request parse_request(const std::string& body) {
  Reader r(body);
  Request q;
  switch (r.u8()) {
    case kHello:
      q.op = kHello;
      q.rank = r.i32();
      q.world_size = r.i32();
      q.nonce = r.str();
      q.mac = r.str();
      q.job_id = r.str();
      break;
    case kTxn:
    case kTxnReport: {
      q.report_only = static_cast<uint8_t>(body[0]) == kTxnReport;
      q.op = kTxn;
      q.timeout_ms = r.u32();
      // Each entry takes at least 4 bytes: a count beyond what the frame can hold is rejected
      // before anything is reserved for it.
      const uint32_t ndel = r.u32();
      for (uint32_t i = 0; i < ndel; ++i) q.del.push_back(r.str());
      const uint32_t nset = r.u32();
      for (uint32_t i = 0; i < nset; ++i) {
        std::string k = r.str();
        q.set.emplace_back(std::move(k), r.bytes());
      }
      const uint32_t nwait = r.u32();
      for (uint32_t i = 0; i < nwait; ++i) q.wait.push_back(r.str());
      break;
    }
    case kBye:
      q.op = kBye;
      break;
    default:
      throw ProtocolError("unknown request");
  }
  if (!r.done()) throw ProtocolError("bytes after the request");
  return q;
}

Reply parse_reply(const std::string& body, bool hello, size_t nwait) {
  Reader r(body);
  Reply a;
  const uint8_t st = r.u8();
  switch (st) {
    case kOk:
      if (hello) a.proof = r.str();
      else
        for (size_t i = 0; i < nwait; ++i) a.values.push_back(r.bytes());
      break;
    case kTimeout:
    case kLost:
    case kClosing:
      if (hello) throw ProtocolError("a wait status in answer to the hello");
      for (size_t i = 0; i < nwait; ++i) a.present.push_back(r.u8() != 0);
      if (st == kLost) {
        const uint32_t n = r.u32();
        for (uint32_t i = 0; i < n; ++i) a.lost_ranks.push_back(r.i32());
      }
      break;
    case kError:
      a.message = r.str();
      break;
    default:
      throw ProtocolError("unknown answer " + std::to_string(st));
  }
  a.status = static_cast<Status>(st);
  if (!r.done()) throw ProtocolError("bytes after the answer");
  return a;
}

}  // namespace dp::store_wire
