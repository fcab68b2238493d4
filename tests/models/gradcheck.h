// defines: gradcheck, a finite-difference check of a layer's analytic input and parameter
// gradients (in the spirit of Caffe's test_gradient_check_util.hpp).
//
// The scalar checked is loss(y) = sum(y * r) for a fixed random r, so dloss/dy = r is the
// upstream gradient given to backward. Each input and parameter element is perturbed by +-h and
// the central difference (loss(+h) - loss(-h)) / 2h compared with the analytic gradient. Use
// f64 layers: with h = 1e-6 the rounding error of the difference is ~1e-16 |loss| / h ~ 1e-9.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>

#include "tests/models/layer_harness.h"

namespace dp::test {

struct GradCheckReport {
  // max over checked elements of |analytic - numeric| / max(|analytic|, |numeric|, 1)
  double max_error = 0;
  std::string worst;       // which element, and both values
  int64_t checked = 0;     // elements compared
};

inline GradCheckReport gradcheck(TestLayer& t, const StepContext& ctx, std::vector<Tensor> x, uint64_t seed,
                                 double h = 1e-6) {
  Rng rng(seed, 23);
  Tensor y = t.forward(ctx, x);
  const Tensor r = random_uniform(y.shape(), DType::F64, rng);
  std::vector<Tensor> dx = t.backward(ctx, x, y, r);
  std::vector<Tensor> dparams;
  for (const auto& g : t.grads) dparams.push_back(g.clone());

  auto loss = [&] {
    Tensor yy = t.forward(ctx, x);
    double s = 0;
    for (int64_t i = 0; i < yy.numel(); ++i) s += get(yy, i) * get(r, i);
    return s;
  };
  GradCheckReport rep;
  auto check = [&](const Tensor& v, const Tensor& analytic, const std::string& what) {
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double keep = get(v, i);
      set(v, i, keep + h);
      const double lp = loss();
      set(v, i, keep - h);
      const double lm = loss();
      set(v, i, keep);
      const double num = (lp - lm) / (2 * h), ana = get(analytic, i);
      const double err = std::abs(ana - num) / std::max({std::abs(ana), std::abs(num), 1.0});
      ++rep.checked;
      if (err >= rep.max_error) {
        rep.max_error = err;
        rep.worst = fmt::format("{}[{}]: analytic {:.12g}, numeric {:.12g}", what, i, ana, num);
      }
    }
  };
  for (size_t k = 0; k < x.size(); ++k)
    if (is_floating(x[k].dtype())) check(x[k], dx[k], fmt::format("input {}", k));  // ids: no gradient
  const auto decls = t.layer->declare_params();
  for (size_t j = 0, p = 0; j < decls.size(); ++j)
    if (decls[j].trainable) check(t.params[p], dparams[p], "parameter " + decls[j].name), ++p;
  return rep;
}

}  // namespace dp::test
