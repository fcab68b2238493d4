// defines: build_model, ModelConfig (+ the input shape) -> a built Graph (parameters initialised).
#pragma once
#include <memory>

#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::models {

// The preset's layer list or the cfg's [[layer]] list, validated through the registry (errors
// name the cfg file and line), shapes inferred from `input_shape` (per sample).
// Checks the layer list (types, keys, values, input names) without building: the errors of a bad
// cfg surface before any run directory or data set is touched.
void validate_model(const ModelConfig& cfg);

// model.sync_bn = true turns every batchnorm2d into SyncBN (BatchNorm2d::set_sync). On a GPU:
// `compute` and `gpu` as Graph::build takes them; grad_memory too (Paged: ZeRO stage 2 on the CPU).
std::unique_ptr<Graph> build_model(const ModelConfig& cfg, const Shape& input_shape, uint64_t seed,
                                   Device device = Device::cpu(), DType compute = DType::F32,
                                   cuda::ExecContext* gpu = nullptr, ArenaMemory grad_memory = ArenaMemory::Allocated);

// The same graph built on the CPU with the layer choices a GPU run makes when `gpu` (the GPT
// preset's LM head padded: Linear::resolve_auto_padding): what `dptrain memory` plans a GPU run on.
std::unique_ptr<Graph> build_model_for_planning(const ModelConfig& cfg, const Shape& input_shape, uint64_t seed,
                                                bool gpu);

// The classes in each row of the model's output: output_shape().back(), or fewer when the last
// layer pads its rows (a linear's pad_out_to: GPT's LM head on a GPU, V of the Vp columns). The
// loss and the hit counts take this many classes in rows of output_shape().back().
int64_t output_width(const Graph& g);

// The GPU-side choices of train.* on a built graph: train.bn_impl on every batchnorm2d
// (BatchNorm2d::set_gpu_impl), train.gpu_fusion (Graph::set_gpu_fusion) and, on a GPU,
// train.gpu_step_arena (Graph::use_gpu_step_arena). A CPU graph ignores
// them. Returns the log line that says what runs ("batch norm: ...; GPU fusion: ...; step arena: ...").
std::string apply_gpu_choices(Graph& g, const TrainConfig& train);

}  // namespace dp::models
