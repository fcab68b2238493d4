// defines: how the cuDNN convolution algorithms are chosen: ConvKey (everything a choice depends
// on), AlgoPerf (one measured candidate), choose_algo (pure: the fastest candidate that fits),
// ConvAlgoCache (chosen once per pass and key, process-wide, mutex-protected); the measuring of
// the candidates with cudnnFind*AlgorithmEx on a cache miss is conv_algos_cuda.h.
//
// As PyTorch's cudnn.benchmark: the first step of each shape measures every algorithm once
// (with a workspace of the context's whole limit), later steps look the choice up. All of this
// is library-free and compiled in every build, so the choice and the cache are tested on the host
// with made-up results.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"

namespace dp::cuda {

enum class ConvPass : uint8_t { Forward, BackwardData, BackwardFilter };
const char* conv_pass_name(ConvPass p);  // "forward", "backward-data", "backward-filter"

// One convolution as cuDNN sees it: a choice made for one key holds for every call with it.
struct ConvKey {
  DType dtype = DType::F32;            // data (x, w, y) dtype
  bool channels_last = false;          // NHWC activations and KRSC filter, else NCHW / KCRS
  int64_t n = 0, c = 0, h = 0, w = 0;  // input, logical [N, C, H, W]
  int64_t k = 0, r = 0, s = 0;         // filter: out channels, kernel rows, columns
  int64_t pad = 0, stride = 1, groups = 1;
  bool tensor_ops = false;  // math: tensor-op (16-bit data) or FMA only (f32, no TF32)
  bool tf32 = false;        // f32 data may run on TF32 tensor cores (train.tf32 = conv or all)
  // The byte alignment of the filter and filter-gradient pointers (a power of two, at most 256):
  // the parameter arena packs tensors without padding, and an algorithm measured on aligned
  // pointers may not run on less aligned ones, so layers differing only in it do not share one.
  int64_t align = 256;
  bool operator==(const ConvKey&) const = default;
  // "bf16 NHWC x[8, 64, 56, 56] w[64, 64, 3, 3] pad 1 stride 1 groups 1 tensor-op math" (f32:
  // "FMA math", or "TF32 math" with tf32)
  std::string str() const;
};

// The largest power of two (at most 256) dividing every address in `ptrs` (base/alignment.h).
int64_t pointer_alignment(std::initializer_list<const void*> ptrs);

struct ConvKeyHash {
  size_t operator()(const ConvKey& k) const noexcept;
};

// cuDNN's enum values that choose_algo weighs, library-free (conv_algos_cuda.cpp checks them
// against cudnn.h).
constexpr int kCudnnStatusSuccess = 0;  // CUDNN_STATUS_SUCCESS
constexpr int kCudnnDefaultMath = 0;    // CUDNN_DEFAULT_MATH: f32 data may use TF32 tensor cores (sm_80+)
constexpr int kCudnnTensorOpMath = 1;   // CUDNN_TENSOR_OP_MATH
constexpr int kCudnnTensorOpMathAllowConversion = 2;  // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
constexpr int kCudnnFmaMath = 3;        // CUDNN_FMA_MATH

// The math type a convolution of `key` is measured in (cudnnMathType_t), PyTorch's choice per
// dtype (aten/src/ATen/cudnn/Descriptors.h): f16 data tensor-op math; bf16 data the default math
// (tensor cores without converting the data); f32 data FMA math (exact f32, no TF32) or, with
// key.tf32, the default math, which lets cuDNN use TF32 tensor cores (PyTorch's
// torch.backends.cudnn.allow_tf32 chooses between the same two for f32). Never
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: it lets cuDNN convert the data to another type on every
// call (the H200 run logged that warning for every bf16 convolution).
int conv_math_type(const ConvKey& key);
// Whether only candidates that ran in FMA math qualify (f32 data without TF32: a TF32 or
// tensor-op result would not be full f32).
bool conv_needs_fma_math(const ConvKey& key);

// One candidate of a cudnnFind*AlgorithmEx: what the cudnnConvolution*AlgoPerf_t structs share.
struct AlgoPerf {
  int algo = -1;                     // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int status = kCudnnStatusSuccess;  // cudnnStatus_t of the trial run
  float time_ms = 0;
  size_t memory = 0;  // workspace bytes
  int math = 0;       // cudnnMathType_t the algorithm ran with
  bool operator==(const AlgoPerf&) const = default;
};

// The fastest candidate that ran (status success), did not convert the data (math other than
// CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION), needs at most workspace_limit bytes and,
// with fma_only (f32 data kept at full precision), ran in CUDNN_FMA_MATH; ties go to the
// earlier candidate (cuDNN lists them fastest first). nullopt when none qualifies.
std::optional<AlgoPerf> choose_algo(const std::vector<AlgoPerf>& results, size_t workspace_limit, bool fma_only);

// The candidates, one per clause, for an error message: "algo 1 (0.12 ms, 2.0 MiB, math 3)",
// "algo 4 (cuDNN status 9)".
std::string describe_candidates(const std::vector<AlgoPerf>& results);

// Chosen algorithms by (pass, key). global() is the process's: every layer of the same shape
// shares one measurement.
class ConvAlgoCache {
 public:
  using Find = std::function<std::vector<AlgoPerf>()>;
  // The choice for (pass, key): cached, or made by choose_algo over find()'s results (f32 keys
  // without tensor_ops need FMA math) and cached. A cached choice that needs more than
  // workspace_limit (a context with a smaller limit) is made again. When no candidate
  // qualifies, a DpError naming `who` (the layer), the pass, the key and the limit, with the
  // candidates, and suggesting a larger workspace limit; nothing is cached then. The lock is
  // held while find() runs, so each choice is measured once even with several callers.
  AlgoPerf get(ConvPass pass, const ConvKey& key, size_t workspace_limit, const std::string& who, const Find& find);
  size_t size() const;
  static ConvAlgoCache& global();

 private:
  struct PassKey {
    ConvPass pass;
    ConvKey key;
    bool operator==(const PassKey&) const = default;
  };
  struct PassKeyHash {
    size_t operator()(const PassKey& k) const noexcept;
  };
  mutable std::mutex mu_;
  std::unordered_map<PassKey, AlgoPerf, PassKeyHash> chosen_;
};

}  // namespace dp::cuda
