// defines: NvtxRange, a scoped NVTX range (push on construction, pop on destruction) that Nsight
// Systems / Nsight Compute show on the timeline: the trainer marks data, forward, backward,
// optimizer and each step. NVTX3 is header-only (the CUDA toolkit's nvtx3/); without CUDA the
// range is a no-op, and with no tool attached the push/pop cost a few nanoseconds.
#pragma once
#ifdef DPTRAIN_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace dp::cuda {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name, bool enabled = true) : on_(enabled) {
#ifdef DPTRAIN_HAVE_CUDA
    if (on_) nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#ifdef DPTRAIN_HAVE_CUDA
    if (on_) nvtxRangePop();
#else
    (void)on_;  // kept in both builds: one layout, and clang's -Wunused-private-field is quiet
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  bool on_;
};

}  // namespace dp::cuda
