// defines: label_ranks, where each row's true class ranks among its scores: the top-1 / top-5 hit
// counts of training and evaluation (and token accuracy, a row per position). CPU twin of
// kernels/cuda/label_rank.h, equal bit for bit (integer counts of exact comparisons).
#pragma once
#include <cstdint>

namespace dp::kernels::cpu {

// z (rows, K) scores, y (rows) labels: out[r] = min(cap, the number of classes k with
// z[r, k] > z[r, y[r]]) — ties count for the label, so top-1 is out[r] < 1 and top-5 out[r] < 5.
// A label outside [0, K) gets cap (never a hit). ld: the row stride of z (0: K); a row's columns
// [K, ld) are padding (a padded LM head's, models/layers/linear/linear.h pad_out_to), never read.
void label_ranks(const float* z, const int32_t* y, int64_t rows, int64_t K, int32_t cap, int32_t* out,
                 int64_t ld = 0);

}  // namespace dp::kernels::cpu
