// defines: Trainer, the single-process training loop (data -> forward -> loss -> backward ->
// optimizer step), periodic evaluation, progress lines and metrics.
//
// It lives in launch/ rather than runtime/ because it wires together models/ (layers, loss),
// runtime/ (data, optimizers, graph) and collectives/; runtime/ stays below models/.
#pragma once
#include <memory>
#include <string>

#include "runtime/config.h"
#include "runtime/graph.h"

namespace dp::launch {

struct EvalResult {
  double loss = 0, top1 = 0, top5 = 0;
  int64_t samples = 0;
};

struct TrainResult {
  int64_t steps = 0;
  double seconds = 0;
  EvalResult final_eval;
  std::string run_dir;
};

// Resolves train.device ("auto" -> cuda if a GPU is usable, else cpu with one log line).
Device choose_device(const std::string& wanted);

// Runs the whole configured training; writes the run directory.
TrainResult train(const Config& cfg);

}  // namespace dp::launch
