// defines: the fp32 agreement run the GPU and CPU tests share: the Fashion-MNIST CNN cfg on 640
// synthetic samples, 10 AdamW steps of batch 64 with dropout (fp32_agreement_run), the distance
// between two runs' weights (weights_error: max |a - b| / max |b| over every f32 tensor), and the
// bound both tests hold it to (kFp32WeightsBound).
//
// Where the bound comes from: two correct f32 implementations differ only in rounding order, and
// training amplifies that: a last-bit difference that flips a max-pool choice or a ReLU, or moves a
// near-zero gradient AdamW divides by sqrt(v), changes an update by up to the learning rate.
// Measured on the CPU (2 cores, AVX-512; this config, 10 steps), oneDNN's direct convolutions
// against the reference im2col + BLAS kernels: 7.4e-4 at 1 thread, 4.7e-4 at 2 threads, and
// oneDNN at 1 thread against itself at 2 threads 4.7e-4 (run.seed 0, what the tests run; seeds 1
// to 4 gave 4.5e-5 to 3.2e-3: the amplification is chaotic). The GPU's f32 run (cuDNN in FMA
// math, no TF32) differed from the oneDNN CPU run by 3.4e-4 on the H200 (commit f13969e): less
// than the CPU's own two implementations differ, so rounding, not a bug (and the old 1e-4 bound
// was below what two correct CPU implementations reach).
// The bound is 2.7x the largest drift measured at seed 0 (7.4e-4), rounded to 2e-3: room for a
// third rounding order (cuDNN's algorithms, chosen by timing, differ between runs) and another
// thread count. What it still tells from rounding (measured the same way, reference against
// oneDNN): a learning rate 5% off gives 4e-2, dropout 0.2 instead of 0.25 gives 0.17, and AdamW's
// beta2 0.99 instead of 0.999 gives 1.9e-3 (just under: a change that subtle needs its own test).
// test_fp32_agreement.cpp holds the CPU's drift below the bound in CI.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "launch/train_session.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/config.h"

namespace dp::launch {

inline constexpr double kFp32WeightsBound = 2e-3;

// A fresh temporary directory for one run, tagged.
inline std::string fp32_agreement_root(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() /
           ("dptrain_fp32_agreement_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

// Trains the run under root on `device` ("cpu", "cuda") with `cpu_backend` ("onednn",
// "reference"), `threads` CPU threads (0: all), run.seed `seed` and `extra` overrides; returns
// its final weights file.
inline std::string fp32_agreement_run(const std::string& root, const std::string& device,
                                      const std::string& cpu_backend, int threads = 0, int seed = 0,
                                      const std::vector<std::string>& extra = {}) {
  std::vector<std::string> o = {"run.dir=\"" + root + "\"", "data.dataset=\"synthetic\"", "data.synthetic_shape=[1, 28, 28]",
                            "data.synthetic_train=640", "data.synthetic_eval=64", "train.steps=10",
                            "train.batch_size=64", "train.warmup_steps=0", "model.dropout=0.25",
                            "train.device=\"" + device + "\"", "train.cpu_backend=\"" + cpu_backend + "\"",
                            "train.threads=" + std::to_string(threads), "run.seed=" + std::to_string(seed),
                            "run.log_level=\"warn\""};
  o.insert(o.end(), extra.begin(), extra.end());
  Config cfg = load_config(std::string(DPTRAIN_SOURCE_DIR) + "/models/fmnist_cnn.cfg", o);
  train(cfg);
  return root + "/fmnist_cnn/final.safetensors";
}

// max |a - b| / max |b| over every f32 tensor of two weights files (same names).
inline double weights_error(const std::string& a_path, const std::string& b_path) {
  SafetensorsFile a = SafetensorsFile::open(a_path), b = SafetensorsFile::open(b_path);
  double num = 0, den = 0;
  for (const auto& name : b.names()) {
    Tensor x = a.get(name), y = b.get(name);
    if (y.dtype() != DType::F32) continue;
    for (int64_t i = 0; i < y.numel(); ++i) {
      num = std::max(num, std::abs(double{x.data<float>()[i]} - y.data<float>()[i]));
      den = std::max(den, std::abs(double{y.data<float>()[i]}));
    }
  }
  return num / den;
}

}  // namespace dp::launch
