// What a build without CUDA has instead of launch's CUDA halves (the *_cuda.cpp files, which only
// a CUDA build compiles; the top CMakeLists.txt compiles this file only without CUDA). The device
// choice never picks a GPU in such a build, so none of this is reached.
#include "base/error.h"
#include "launch/batch_feed.h"
#include "launch/gpu_run.h"
#include "launch/synthetic_input.h"
#include "launch/telemetry/mark_source.h"

namespace dp::launch {

// batch_feed.h
void DeviceInputDeleter::operator()(DeviceInput*) const {}

DeviceInputPtr make_device_input(GpuRun&, const data::Transform&, const data::Dataset&, int64_t, uint64_t) {
  throw DpError("the GPU input pipeline needs a CUDA build");
}

bool BatchFeed::next_device(Item&) { return false; }
bool BatchFeed::pull() { return false; }

// synthetic_input.h: never constructed (the run is on the CPU)
struct SyntheticInput::Impl {};
SyntheticInput::SyntheticInput(cuda::ExecContext&, const SyntheticSpec&, const data::Transform&, int64_t, DType, bool) {
  throw DpError("synthetic batches on the GPU need a CUDA build");
}
SyntheticInput::~SyntheticInput() = default;
void SyntheticInput::set_order(const std::vector<int64_t>&) {}
SyntheticInput::Batch SyntheticInput::make(int64_t, int64_t) { return {}; }

// gpu_run.h: never constructed (the device choice picks the CPU)
struct GpuRun::Impl {};
GpuRun::GpuRun(const TrainConfig&, int) {
  DP_THROW_USER("this dptrain was built without CUDA; set train.device = \"cpu\"");
}
GpuRun::~GpuRun() = default;
cuda::ExecContext* GpuRun::exec() const { return nullptr; }
void* GpuRun::compute_stream() const { return nullptr; }
StepContext GpuRun::context(bool training, uint64_t seed, uint64_t step, Communicator* comm) const {
  return StepContext{training, seed, step, comm};
}
float GpuRun::loss_scale() const { return 1.0f; }
void GpuRun::enqueue_micro_batch(const models::SoftmaxCrossEntropy&, const Tensor&, const Tensor&, Tensor&, double,
                                 int64_t, int) {}
std::vector<double> GpuRun::read_step(int64_t&, int64_t&) { return {}; }
double GpuRun::mean_loss(const models::SoftmaxCrossEntropy&, const Tensor&, const Tensor&, int64_t) const {
  return 0;
}
void GpuRun::count_hits(const Tensor&, const Tensor&, int64_t&, int64_t&, int64_t) {}
bool GpuRun::unscale_and_update(Graph&) { return true; }
void GpuRun::synchronize() const {}
uint64_t GpuRun::peak_bytes() const { return 0; }
uint64_t GpuRun::reserved_peak_bytes() const { return 0; }
uint64_t GpuRun::live_bytes() const { return 0; }
void GpuRun::profile_window(const std::string&) {}
void GpuRun::before_step(int64_t) {}
void GpuRun::after_step(int64_t) {}

}  // namespace dp::launch

namespace dp::metrics {
// telemetry/mark_source.h: GPU marks are CUDA events.
std::unique_ptr<MarkSource> cuda_event_marks(void*) {
  throw DpError("a GPU layer profile (CUDA events) requested in a build without CUDA");
}
}  // namespace dp::metrics
