// defines: the TCP store's wire format (collectives/bootstrap/tcp_store.h): encoding helpers,
// a bounds-checked Reader, and pure parsers for every message, so that the server, the client
// and the fuzz target (tools/fuzz/fuzz_store_protocol.cpp) share one definition of what is valid.
//
// Little-endian; every frame is u32 body length + body; str = u32 length + bytes, bytes = u64
// length + bytes.
//   server, first, on accept:
//            CHALLENGE "DPST", u32 version, u8 token required, str nonce_s (16 B), str job id,
//                      str owner ("pid 1234 on host h1": names the job in a refusal)
//   request  HELLO  u8 1, i32 rank, i32 world_size, str nonce_c, str mac, str job id
//                   (mac = HMAC(token, "store-client" | nonce_s | nonce_c), "" without a token)
//            TXN    u8 2, u32 timeout_ms, u32 ndel, ndel x str, u32 nset, nset x (str key, bytes
//                   value), u32 nwait, nwait x str
//            BYE    u8 3
//            TXN_REPORT  as TXN, u8 4: the same transaction, but its deadline passing only answers
//                   TIMEOUT (the rank reports who is missing and asks again), not a failure
//   reply    OK      u8 0 [HELLO: str server proof HMAC(token, "store-server" | nonce_c | nonce_s)]
//                         [TXN, TXN_REPORT: nwait x bytes, the values in request order]
//            TIMEOUT u8 1, nwait x u8 present
//            LOST    u8 2, nwait x u8 present, u32 n, n x i32 lost rank
//            ERROR   u8 3, str message
//            CLOSING u8 4, nwait x u8 present (the server stops: rank 0 left or failed)
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace dp::store_wire {

inline constexpr uint32_t kMagic = 0x54535044;  // "DPST"
inline constexpr uint32_t kVersion = 2;
// A frame before the token is proved (the challenge, a hello) is small: anything larger is not
// a dptrain client, and is dropped before it can make rank 0 buffer it.
inline constexpr uint32_t kMaxHandshakeFrame = 1024;

enum Op : uint8_t { kHello = 1, kTxn = 2, kBye = 3, kTxnReport = 4 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kLost = 2, kError = 3, kClosing = 4 };

struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void put_u8(std::string& s, uint8_t v);
void put_u32(std::string& s, uint32_t v);
void put_i32(std::string& s, int32_t v);
void put_u64(std::string& s, uint64_t v);
void put_str(std::string& s, const std::string& v);
void put_bytes(std::string& s, const std::string& v);
std::string framed(const std::string& body);

// Reads fields in order from one frame's body; ProtocolError past its end.
class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint32_t u32() { return scalar<uint32_t>(); }
  int32_t i32() { return scalar<int32_t>(); }
  uint64_t u64() { return scalar<uint64_t>(); }
  std::string str() {
    uint32_t n = u32();
    return std::string(take(n), n);
  }
  std::string bytes() {
    uint64_t n = u64();
    if (n > s_.size() - off_) throw ProtocolError("length beyond the frame");
    return std::string(take(static_cast<size_t>(n)), static_cast<size_t>(n));
  }
  bool done() const { return off_ == s_.size(); }

 private:
  template <class T>
  T scalar() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const char* take(size_t n) {
    if (n > s_.size() - off_) throw ProtocolError("truncated frame");
    const char* p = s_.data() + off_;
    off_ += n;
    return p;
  }
  const std::string& s_;
  size_t off_ = 0;
};

struct Challenge {
  bool token_required = false;
  std::string nonce, job_id, owner;
};
std::string encode_challenge(const Challenge& c);
Challenge parse_challenge(const std::string& body);

struct Request {
  Op op = kBye;
  // HELLO
  int32_t rank = -1, world_size = 0;
  std::string nonce, mac, job_id;
  // TXN, TXN_REPORT (parsed as op kTxn with report_only set)
  bool report_only = false;  // its deadline passing is a progress report, not a failure
  uint32_t timeout_ms = 0;
  std::vector<std::string> del;
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> wait;
};
// ProtocolError for an unknown op, a truncated body or bytes left over.
Request parse_request(const std::string& body);
std::string encode_hello(int32_t rank, int32_t world_size, const std::string& nonce, const std::string& mac,
                         const std::string& job_id);

struct Reply {
  Status status = kOk;
  std::string proof;                 // OK to a HELLO
  std::vector<std::string> values;   // OK to a TXN
  std::vector<bool> present;         // TIMEOUT, LOST, CLOSING
  std::vector<int32_t> lost_ranks;   // LOST
  std::string message;               // ERROR
};
// `hello`: the answer to a HELLO (OK carries a proof), else to a TXN waiting for nwait keys.
Reply parse_reply(const std::string& body, bool hello, size_t nwait);

// The body length a frame's 4-byte prefix declares.
inline uint32_t frame_length(const char* p) {
  uint32_t len;
  std::memcpy(&len, p, 4);
  return len;
}

}  // namespace dp::store_wire
