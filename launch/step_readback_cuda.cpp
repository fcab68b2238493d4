// StepReadback (launch/step_readback.h): the pinned slots of a step's micro-batches and the one
// wait that reads them.
#include "launch/step_readback.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/label_rank.h"
#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check_runtime.h"

namespace dp::launch {

struct StepReadback::Impl {
  cudaStream_t stream;
  cuda::DeviceBuffer ranks;  // one micro-batch's label ranks, copied out before the next one's are written
  // Per slot of the step: its rows and classes (host), its mean loss (pinned); the rows' ranks and
  // labels one slot after another (pinned).
  std::vector<int64_t> rows, classes;
  int64_t used_rows = 0;
  cuda::PinnedBuffer losses, rank_slots, label_slots;

  // `buf` with room for `need` bytes, its first `used` bytes kept. Growing waits for the stream
  // (copies into the old buffer may be in flight): only while the step's sizes are new.
  void reserve(cuda::PinnedBuffer& buf, size_t used, size_t need) const {
    if (buf.bytes() >= need) return;
    CHECK_CUDA(cudaStreamSynchronize(stream));
    cuda::PinnedBuffer bigger(std::max(need, 2 * buf.bytes()));
    if (used > 0) std::memcpy(bigger.data(), buf.data(), used);
    buf = std::move(bigger);
  }
};

StepReadback::StepReadback(void* stream) { impl_.emplace().stream = static_cast<cudaStream_t>(stream); }

void StepReadback::enqueue(const models::SoftmaxCrossEntropy& loss, const Tensor& logits, const Tensor& labels,
                           const Tensor& dlogits, float grad_scale, int64_t classes, int slot) {
  Impl& m = *impl_;
  DP_CHECK(slot == 0 || slot == static_cast<int>(m.rows.size()), "step readback: micro-batch slot {} after {} slots",
           slot, m.rows.size());
  if (slot == 0) m.rows.clear(), m.classes.clear(), m.used_rows = 0;
  const int64_t rows = logits.dim(0), width = logits.dim(1);
  const size_t used = static_cast<size_t>(m.used_rows) * sizeof(int32_t);
  const size_t bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  m.reserve(m.losses, static_cast<size_t>(slot) * sizeof(float), static_cast<size_t>(slot + 1) * sizeof(float));
  m.reserve(m.rank_slots, used, used + bytes);
  m.reserve(m.label_slots, used, used + bytes);
  // The loss first: it checks the tensors (shapes, dtypes, devices, classes) before any launch.
  loss.enqueue(logits, labels, &dlogits, m.stream, m.losses.as<float>() + slot, classes);
  if (grad_scale != 1.0f) {
    auto* g = static_cast<float*>(dlogits.raw());
    CHECK_CUDA(kernels::cuda::scale(g, g, grad_scale, dlogits.numel(), m.stream));
  }
  const int64_t k = classes > 0 ? classes : width;
  if (m.ranks.bytes() < bytes) m.ranks = cuda::DeviceBuffer(bytes, m.stream);  // the old one freed in stream order
  CHECK_CUDA(kernels::cuda::label_ranks(static_cast<const float*>(logits.raw()),
                                        static_cast<const int32_t*>(labels.raw()), rows, k, 5, m.ranks.as<int32_t>(),
                                        m.stream, width));
  CHECK_CUDA(cudaMemcpyAsync(m.rank_slots.as<int32_t>() + m.used_rows, m.ranks.data(), bytes, cudaMemcpyDeviceToHost,
                             m.stream));
  CHECK_CUDA(cudaMemcpyAsync(m.label_slots.as<int32_t>() + m.used_rows, labels.raw(), bytes, cudaMemcpyDeviceToHost,
                             m.stream));
  m.rows.push_back(rows);
  m.classes.push_back(k);
  m.used_rows += rows;
}

std::vector<double> StepReadback::read(int64_t& top1, int64_t& top5) {
  const Impl& m = *impl_;
  CHECK_CUDA(cudaStreamSynchronize(m.stream));  // the step's one wait
  std::vector<double> out;
  int64_t row = 0;
  for (size_t k = 0; k < m.rows.size(); ++k) {
    const double l = m.losses.as<float>()[k];
    // NaN logits, or a label out of range (the kernel's NaN): name the label as the CPU path does.
    if (std::isnan(l))
      models::SoftmaxCrossEntropy::check_labels(m.label_slots.as<int32_t>() + row, m.rows[k], m.classes[k]);
    out.push_back(l);
    row += m.rows[k];
  }
  const int32_t* r = m.rank_slots.as<int32_t>();
  for (int64_t i = 0; i < m.used_rows; ++i) top1 += r[i] < 1, top5 += r[i] < 5;
  return out;
}

}  // namespace dp::launch
