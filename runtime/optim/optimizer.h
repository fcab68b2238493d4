// defines: Optimizer, the interface of an update rule over the flat parameter arena, the options
// of the built-in rules and their factories (make_sgd, make_adamw).
//
// An optimizer sees one flat F32 parameter tensor and one flat gradient tensor of the same length
// (the arenas of runtime/arena.h), so one fused pass updates every parameter. It owns its state
// as flat tensors of that length and serialises it by name (tiny-cuda-nn's habit: optimizers
// serialise their own state); checkpoints store them as `optim.<slot>` tensors.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/optim_math.h"
#include "runtime/tensor.h"

namespace dp::optim {

// torch.optim.SGD's options (lr is given per step).
struct SgdOptions {
  double momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false;
};

// torch.optim.AdamW's options (lr is given per step; amsgrad is not supported).
struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// ZeRO (train.zero = 1; collectives/reducer/zero_shard.h): one run of the flat arena a rank
// updates, and where its state lies in the optimizer's (the rank's shard's) state tensors.
struct ArenaPiece {
  int64_t arena_begin = 0;  // first element in the flat parameter / gradient arena
  int64_t len = 0;          // elements
  int64_t state_begin = 0;  // first element in this optimizer's state (numel() of them in all)
};

// A 16-bit copy of parameters that a GPU step writes beside them (mixed precision's compute copy,
// Optimizer::write_compute_copy): its elements for the parameters updated (null: none), bf16 or f16.
struct Copy16 {
  void* dst = nullptr;
  bool bf16 = true;
};

// The whole optimizer state a piece at a time, as ZeRO's save hands it on (ZeroShard::stream_state):
// slot `slot` of state() over the arena's elements [begin, begin + len), f32.
using StateSink = std::function<void(int slot, int64_t begin, const float* data, int64_t len)>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual const char* name() const = 0;
  // One update over the flat parameter arena (params, grads: 1-D F32 CPU tensors of numel()).
  virtual void step(const Tensor& params, const Tensor& grads, double lr) = 0;
  // ZeRO: one update of the pieces of the whole flat arenas params and grads (1-D F32 tensors on
  // this optimizer's device) whose state this optimizer holds (numel() = the pieces' total
  // length), with one step count: the same bits per element as step() over the whole arena.
  // skip_decay's spans are in state coordinates here. On a GPU one kernel per piece on place()'s
  // stream, no host wait (a new set of pieces with decay skips copies their bounds to the device
  // once), and with copy16 (a flat BF16 or F16 tensor of the arena's length there: the graph's
  // compute copy) the pieces' elements of it are written as write_compute_copy's are (that one
  // is for step(): step_pieces refuses it). DpError for pieces outside the arenas or the state,
  // arenas on another device, or a copy that does not fit.
  void step_pieces(const Tensor& params, const Tensor& grads, const std::vector<ArenaPiece>& pieces, double lr,
                   const Tensor& copy16 = Tensor());
  // Moves the state to `device` (before the first step) and makes step() run there: on a GPU
  // one fused kernel over the flat arena, enqueued on `cuda_stream` (a cudaStream_t) without a
  // host wait. params and grads given to step() must then live on that device.
  void place(Device device, void* cuda_stream);
  Device device() const { return device_; }
  // Number of step() calls so far (or as restored by load_state).
  int64_t steps() const { return steps_; }
  // Number of parameters this optimizer updates.
  int64_t numel() const { return numel_; }
  // Mixed precision on a GPU: from now on every step() also writes the updated parameters,
  // rounded to nearest even, into `copy` (flat BF16 or F16 of numel() on this optimizer's GPU:
  // Graph::compute_params()), in the same pass as the update, with the bits Graph's
  // refresh_compute_params would write after it. An undefined tensor stops it. DpError for a
  // tensor that does not fit, or an optimizer not placed on a GPU.
  void write_compute_copy(const Tensor& copy);
  bool writes_compute_copy() const { return copy_.defined(); }
  // Weight decay leaves these spans of the flat arena out (train.decay_params = "matrices",
  // runtime/optim/param_groups.h): sorted, disjoint, non-empty [begin, end) element ranges within
  // numel(). Call before place(). DpError for spans that are not so.
  void skip_decay(const std::vector<std::pair<int64_t, int64_t>>& spans);
  const std::vector<std::pair<int64_t, int64_t>>& decay_skipped() const { return skip_spans_; }
  // State as named flat F32 tensors ("momentum_buffer"; "exp_avg", "exp_avg_sq"); with steps()
  // that is everything needed to resume bitwise. The tensors are views of the live state: write
  // or clone them before the next step().
  virtual std::vector<std::pair<std::string, Tensor>> state() const = 0;
  // Restores state() output (any shape with numel() F32 elements per slot, any device) and the
  // step count; checks names and sizes first and says what mismatched (UserError).
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps) = 0;
  // The step count alone, for state written in place through state()'s views (ZeRO assembles a
  // checkpoint's state that way). UserError for a negative count.
  void restore_steps(int64_t steps);

 protected:
  explicit Optimizer(int64_t numel);
  // Checks step() arguments; the message names this optimizer.
  void check_step_args(const Tensor& params, const Tensor& grads, double lr) const;
  // load_state for slots: `state` must hold exactly the names of `slots`, each with numel()
  // F32 elements; then copies them in and sets the step count.
  void load_slots(const std::vector<std::pair<std::string, Tensor>>& state, int64_t steps,
                  const std::vector<std::pair<std::string, Tensor>>& slots);

  // step_pieces' update of n elements at p / g with the state elements from state_begin on, as
  // step() updates them at the current steps() (which step_pieces advances once afterwards); on
  // a GPU (p, g, copy's and skips' bounds device pointers) enqueued on stream_.
  virtual void update_span(float* p, const float* g, int64_t state_begin, int64_t n, double lr,
                           const kernels::DecaySkips& skips, Copy16 copy) = 0;
  // Reallocates the state tensors on `device`, keeping their values.
  virtual void move_state(Device device) = 0;
  // write_compute_copy's copy as the fused kernels take it (*_cuda.cpp); dst null without one.
  Copy16 compute_copy() const {
    return {copy_.defined() ? copy_.raw() : nullptr, copy_.defined() && copy_.dtype() == DType::BF16};
  }
  // The spans of skip_decay for the kernels: host bounds on the CPU, a device copy on a GPU.
  kernels::DecaySkips decay_skips() const;

  int64_t numel_ = 0;
  int64_t steps_ = 0;
  Device device_;
  void* stream_ = nullptr;  // cudaStream_t of step() on a GPU
  Tensor copy_;             // write_compute_copy's 16-bit copy, or undefined

 private:
  std::vector<std::pair<int64_t, int64_t>> skip_spans_;
  std::vector<int64_t> skip_bounds_;  // (2 * spans): begin, end, begin, end, ...
  Tensor skip_bounds_device_;         // i64 (2 * spans) on the device place() gave, when a GPU
  // step_pieces' decay skips per piece, relative to it: the bounds of every piece one after the
  // other (host), their device copy on a GPU (made again only when they change), and per piece
  // where its bounds begin in them and how many spans it has.
  std::vector<int64_t> piece_bounds_;
  Tensor piece_bounds_device_;
  std::vector<kernels::DecaySkips> piece_skips(const std::vector<ArenaPiece>& pieces);
  void check_pieces(const Tensor& params, const Tensor& grads, const std::vector<ArenaPiece>& pieces, double lr,
                    const Tensor& copy16) const;
};

// Both throw UserError for out-of-range options (the same ranges torch accepts).
std::unique_ptr<Optimizer> make_sgd(int64_t numel, SgdOptions options);
std::unique_ptr<Optimizer> make_adamw(int64_t numel, AdamWOptions options);

}  // namespace dp::optim
