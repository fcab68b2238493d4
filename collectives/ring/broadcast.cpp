// Broadcast: binomial tree for small messages, pipelined chain from the root for large ones.
#include "collectives/ring/algorithms.h"

#include <algorithm>
#include <vector>

namespace dp::ring {

void binomial_broadcast(Transport& tx, const Group& g, char* buf, size_t bytes, int root, uint32_t step) {
  const int n = g.size(), r = g.me;
  if (n == 1) return;
  const int vr = mod(r - root, n);  // rank relative to the root
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      tx.sendrecv(-1, nullptr, 0, g.at(vr - mask + root), buf, bytes, step);
      break;
    }
    mask <<= 1;
  }
  // children: vr + m for every m below the bit we received on (all of them for the root)
  std::vector<SendStream> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask >= n) continue;
    SendStream s;
    s.peer = g.at(vr + mask + root);
    s.regions = {{buf, bytes}};
    s.ready = 1;
    sends.push_back(std::move(s));
  }
  std::vector<RecvStream> none;
  if (!sends.empty()) tx.run(sends, none, step);
}

void binomial_broadcast(Transport& tx, char* buf, size_t bytes, int root) {
  binomial_broadcast(tx, world_group(tx.rank(), tx.size()), buf, bytes, root, 0);
}

void chain_broadcast(Transport& tx, const Group& g, char* buf, size_t bytes, int root, size_t piece_bytes,
                     uint32_t step) {
  const int n = g.size(), r = g.me;
  if (n == 1) return;
  const int vr = mod(r - root, n);
  const size_t piece = std::max<size_t>(1, piece_bytes);
  std::vector<Region> regions;
  for (size_t b = 0; b < bytes; b += piece) regions.push_back({buf + b, std::min(piece, bytes - b)});
  std::vector<SendStream> sends;
  std::vector<RecvStream> recvs;
  if (vr < n - 1) {
    sends.emplace_back();
    sends[0].peer = g.at(r + 1);
    sends[0].regions = regions;
    sends[0].ready = vr == 0 ? regions.size() : 0;
  }
  if (vr > 0) {
    recvs.emplace_back();
    recvs[0].peer = g.at(r - 1);
    recvs[0].regions = regions;
    if (!sends.empty()) recvs[0].on_region = [&sends](size_t i) { sends[0].ready = i + 1; };
  }
  tx.run(sends, recvs, step);
}

void chain_broadcast(Transport& tx, char* buf, size_t bytes, int root, size_t piece_bytes) {
  chain_broadcast(tx, world_group(tx.rank(), tx.size()), buf, bytes, root, piece_bytes, 0);
}

}  // namespace dp::ring
