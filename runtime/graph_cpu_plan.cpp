// Graph's CPU plan (graph.h, set_cpu_backend): under the oneDNN backend, the layout of the
// activations (channels last when every layer takes it) and the ReLUs runtime/fusion_plan.h folds
// into their producers on FusionPath::CpuOnednn (the GPU plan's rules, adopted the same way:
// graph_fusion.cpp); the step context that carries the plan to the layers; the layout changes at
// the graph's edges.

#include "kernels/cpu/bf16_isa.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/layout.h"
#include "runtime/cpu_gemm_choice.h"
#include "runtime/graph.h"
#include "runtime/step_memory.h"

namespace dp {

void Graph::set_cpu_backend(CpuBackend b) {
  cpu_backend_ = b;
  cpu_planned_ = false;  // planned again at the next forward
}

void Graph::plan_cpu(DType dtype) {
  DP_CHECK(built_, "CPU plan before build");
  // A GPU graph has its own plan (plan_gpu): folding for the CPU's backends would fold relus into
  // layers whose CUDA paths do not apply them.
  DP_CHECK(device_.is_cpu(), "CPU plan of a graph on {}", device_.str());
  const bool onednn = cpu_backend_ == CpuBackend::OneDnn && dtype == DType::F32;
  adopt_plan(onednn ? plan_fusion(fusion_wiring(FusionPath::CpuOnednn)) : unfused_plan(nodes_.size()));
  cpu_channels_last_ = cpu_channels_last(*this, onednn ? MemoryPath::CpuOnednn : MemoryPath::CpuReference, dtype);
  cpu_plan_dtype_ = dtype;
  cpu_planned_ = true;
}

std::string Graph::cpu_plan_summary() {
  if (!device_.is_cpu()) return "CPU kernels: none (a graph on " + device_.str() + ")";
  if (!cpu_planned_) plan_cpu(DType::F32);
  if (cpu_backend_ == CpuBackend::Reference) return "CPU kernels: reference (im2col + BLAS, NCHW, unfused)";
  std::string onednn, own, fused;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Layer& l = *nodes_[i].layer;
    if (plan_[i].folded_into >= 0) {
      fused += fmt::format("{}{}+{}", fused.empty() ? "" : " ", nodes_[plan_[i].folded_into].layer->name(), l.name());
      continue;
    }
    std::string& list = l.has_onednn_path() ? onednn : own;
    list += (list.empty() ? "" : " ") + l.name();
  }
  const bool avx512 = kernels::cpu::onednn_has_avx512_core();
  const std::string conv = cpu_conv_algorithm_ == CpuConvAlgorithm::Direct ? "direct"
                           : avx512 ? "Winograd where it fits, else direct (auto)"
                                    : "direct (auto: oneDNN's Winograd needs AVX-512)";
  const CpuGemm gemm = cpu_gemm_library(cpu_gemm_);
  const std::string why = cpu_gemm_ != CpuGemm::Auto ? ""
                          : gemm == CpuGemm::Mkl ? " (auto: MKL is present, on an Intel CPU)"
                          : avx512 ? " (auto)"
                                   : " (auto: oneDNN's f32 matmul without AVX-512 allocates per call)";
  const std::string isa = kernels::cpu::onednn_isa_name();
  const std::string gemm_words =
      cpu_matmul_bf16_ ? fmt::format("bf16 x bf16 -> f32 on oneDNN's matmul ({}), the rest f32",
                                     kernels::cpu::cpu_bf16_path_name(kernels::cpu::cpu_bf16_path(isa)))
                       : cpu_gemm_words(gemm) + why;
  return fmt::format("CPU kernels: oneDNN for [{}], own for [{}]; ReLUs fused: [{}]; activations {}; convolutions: {}; "
                     "linear GEMMs: {}; ISA: oneDNN {}, own loops {}",
                     onednn, own, fused, cpu_channels_last_ ? "channels last (NHWC)" : "NCHW", conv, gemm_words, isa,
                     kernels::cpu::clone_isa_name(kernels::cpu::clone_isa()));
}

StepContext Graph::cpu_context(const StepContext& ctx) {
  StepContext c = ctx;
  c.cpu_backend = cpu_backend_;
  c.cpu_conv_algorithm = cpu_conv_algorithm_;
  // Resolved here, once per graph call (MKL loaded, "mkl" without it refused): the layers' linear_gemm
  // then never resolves Auto itself.
  c.cpu_gemm = cpu_backend_ == CpuBackend::OneDnn ? cpu_gemm_library(cpu_gemm_) : cpu_gemm_;
  c.channels_last = cpu_channels_last_ && cpu_plan_dtype_ == DType::F32;
  c.cpu_matmul_bf16 = cpu_matmul_bf16_ && cpu_backend_ == CpuBackend::OneDnn;
  return c;
}

const Tensor& Graph::model_input(const Tensor& x) {
  if (!input_copied_channels_last(input_shape_, cpu_channels_last_)) return x;
  if (Tensor place = input_copy_place(x.shape(), x.dtype()); place.defined()) input_nhwc_ = place;  // the plan's
  change_layout(input_nhwc_, x, true);
  return input_nhwc_;
}

void Graph::change_layout(Tensor& dst, const Tensor& src, bool to_nhwc) const {
  DP_CHECK(src.ndim() == 4 && src.device().is_cpu(), "layout change of {}", src.describe());
  ensure_tensor(dst, src.shape(), src.dtype(), Device::cpu());
  const int64_t N = src.dim(0), C = src.dim(1), HW = src.dim(2) * src.dim(3);
  if (src.dtype() == DType::F64) {
    if (to_nhwc) kernels::cpu::nchw_to_nhwc(dst.data<double>(), src.data<double>(), N, C, HW);
    else kernels::cpu::nhwc_to_nchw(dst.data<double>(), src.data<double>(), N, C, HW);
  } else {
    if (to_nhwc) kernels::cpu::nchw_to_nhwc(dst.data<float>(), src.data<float>(), N, C, HW);
    else kernels::cpu::nhwc_to_nchw(dst.data<float>(), src.data<float>(), N, C, HW);
  }
}

}  // namespace dp
