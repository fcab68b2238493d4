// defines: OnednnPool, the oneDNN pooling that maxpool2d, avgpool2d and global_avgpool share on
// their oneDNN paths: max (padding never wins; the backward routes dy through the argmax
// workspace of the forward, which is recomputed when the backward is for another input) and
// average counting the padding (PyTorch's count_include_pad=True), NCHW or NHWC, floor mode.
// Primitives, workspaces and scratchpads are made once per geometry and kept.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

namespace dp::kernels::cpu::onednn {

struct PoolGeometry {
  int64_t N, C, H, W;      // input (N, C, H, W)
  int64_t KH, KW, stride, pad;
  int64_t OH, OW;          // output (N, C, OH, OW)
  bool nhwc = false;       // both stored channels last
  bool max = true;         // else average including padding
  auto operator<=>(const PoolGeometry&) const = default;
};

// Max pooling's forward workspace for g as oneDNN sizes it (its primitive descriptor: u8 or s32
// indices by the implementation it picks), 0 for average pooling. For the memory plan.
size_t pool_workspace_bytes(const PoolGeometry& g);

class OnednnPool {
 public:
  explicit OnednnPool(std::string where);  // "layer 'pool1' (maxpool2d)", for errors
  ~OnednnPool();
  OnednnPool(OnednnPool&&) noexcept;
  OnednnPool& operator=(OnednnPool&&) noexcept;
  // y = pool(x); `step` tags the workspace kept for the backward: max pooling's argmax, in `ws`
  // (at least workspace_bytes(g), the same bytes in the backward) or, with null, the pool's own.
  void forward(const PoolGeometry& g, const float* x, float* y, uint64_t step, void* ws);
  // dx = the gradient of the loss w.r.t. x (overwritten) from dy.
  void backward(const PoolGeometry& g, const float* x, const float* dy, float* dx, uint64_t step, void* ws);
  // The bytes of max pooling's workspace for g (0 for average pooling).
  size_t workspace_bytes(const PoolGeometry& g);

 private:
  struct Entry;
  Entry& entry(const PoolGeometry& g);
  std::string where_;
  std::map<PoolGeometry, std::unique_ptr<Entry>> entries_;
};

}  // namespace dp::kernels::cpu::onednn
