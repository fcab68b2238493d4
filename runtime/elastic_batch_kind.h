// defines: ElasticBatch (train.elastic_batch), what a run resumed at another world size keeps:
// the global batch (the per-rank batch and gradient accumulation are planned anew:
// launch/elastic_batch.h) or the per-rank batch the cfg sets; its name table.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

enum class ElasticBatch { Global, PerRank };

inline constexpr EnumName<ElasticBatch> kElasticBatchNames[] = {{ElasticBatch::Global, "global"},
                                                               {ElasticBatch::PerRank, "per_rank"}};
constexpr std::span<const EnumName<ElasticBatch>> enum_names(ElasticBatch) { return kElasticBatchNames; }

}  // namespace dp
