// defines: the libFuzzer target of what a ring peer's bytes turn into (collectives/ring/): a
// data stream header's fields (kind, dtype, op, algorithm, root, count, seq) and a STATUS
// message's signature are any bytes a peer (or a stranger on the wire) sends; they are described
// in error messages (describe_signature, mismatch_reason, CollectiveInfo::description), which
// must hold for every value, not only the ones this build sends.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "collectives/ring/control.h"
#include "collectives/ring/transport.h"

using namespace dp::ring;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kSig = sizeof(Signature);
  if (size < 8 + kSig) return 0;
  uint64_t seq;
  std::memcpy(&seq, data, 8);
  std::vector<std::pair<int, Signature>> issued;
  for (size_t off = 8, r = 0; off + kSig <= size && r < 64; off += kSig, ++r) {
    Signature s;
    std::memcpy(&s, data + off, kSig);
    issued.emplace_back(static_cast<int>((r * 7919) % 61), s);
    (void)describe_signature(s, /*with_algo=*/r % 2 == 0);
  }
  (void)mismatch_reason(seq, issued);
  const Signature& s = issued[0].second;
  CollectiveInfo info;
  info.seq = seq;
  info.kind = static_cast<Kind>(s.kind);
  info.dtype = static_cast<dp::DType>(s.dtype);
  info.op = s.op;
  info.algo = static_cast<Algo>(s.algo);
  info.count = s.count;
  info.root = s.root;
  (void)info.description();
  (void)signature_of(info);
  return 0;
}
