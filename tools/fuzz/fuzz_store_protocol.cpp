// defines: the libFuzzer target of the TCP store's wire format (collectives/bootstrap/
// tcp_store_wire.h): every message a stranger or a peer can send is parsed by the same functions
// the server and the client use. The first byte picks the message kind; a parse may only
// succeed or throw ProtocolError. A request that parses is re-encoded and parsed again, and must
// come back the same (the encoders and parsers agree).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "collectives/bootstrap/tcp_store_wire.h"

using namespace dp::store_wire;

namespace {

std::string encode_request(const Request& q) {
  if (q.op == kHello) return encode_hello(q.rank, q.world_size, q.nonce, q.mac, q.job_id);
  std::string b;
  put_u8(b, q.op == kTxn && q.report_only ? kTxnReport : q.op);  // TXN_REPORT parses as kTxn + report_only
  if (q.op == kTxn) {
    put_u32(b, q.timeout_ms);
    put_u32(b, static_cast<uint32_t>(q.del.size()));
    for (const auto& k : q.del) put_str(b, k);
    put_u32(b, static_cast<uint32_t>(q.set.size()));
    for (const auto& [k, v] : q.set) {
      put_str(b, k);
      put_bytes(b, v);
    }
    put_u32(b, static_cast<uint32_t>(q.wait.size()));
    for (const auto& k : q.wait) put_str(b, k);
  }
  return b;
}

void request(const std::string& body) {
  Request q;
  try {
    q = parse_request(body);
  } catch (const ProtocolError&) {
    return;
  }
  if (encode_request(q) != body) std::abort();  // a parse that loses or invents bytes
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: request(body); break;
      case 1: parse_challenge(body); break;
      case 2: parse_reply(body, /*hello=*/true, 0); break;
      case 3: parse_reply(body.size() > 1 ? body.substr(1) : body, /*hello=*/false, body.empty() ? 0 : uint8_t(body[0])); break;
    }
  } catch (const ProtocolError&) {
  }
  return 0;
}
