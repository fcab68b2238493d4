// defines: take_pieces, the ZeRO tests' oracle of a rank's shard state: the rank's pieces
// (ZeroShard::layout) cut from a whole optimizer's state, with its step count, loaded into the
// shard optimizer. The product never holds a whole optimizer; a resume streams the file's pieces
// (load_checkpoint with pieces), which the tests compare with this.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "collectives/reducer/zero_shard.h"
#include "runtime/optim/optimizer.h"

namespace dp::testutil {

inline void take_pieces(const ZeroShard& zero, const optim::Optimizer& full, optim::Optimizer& shard) {
  std::vector<std::pair<std::string, Tensor>> mine;
  for (const auto& [name, t] : full.state()) {
    Tensor s = Tensor::zeros({zero.layout().numel}, DType::F32);
    for (const ShardPiece& pc : zero.layout().pieces)
      if (pc.len > 0) s.slice_flat(pc.shard_begin, {pc.len}).copy_from(t.slice_flat(pc.arena_begin, {pc.len}));
    mine.emplace_back(name, s);
  }
  shard.load_state(mine, full.steps());
}

}  // namespace dp::testutil
