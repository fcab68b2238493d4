// Tests for runtime/optim (Sgd, AdamW): hand-computed values for the first steps of every
// variant, bitwise resume from saved state, state mismatches, and option checks. The comparison
// with torch.optim over many steps is tests/oracle/test_optim_torch.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "runtime/optim/adamw.h"
#include "runtime/optim/sgd.h"
#include "base/rng.h"
#include "runtime/checkpoint/safetensors.h"

namespace dp::optim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

Tensor vec(std::initializer_list<float> v) {
  Tensor t = Tensor::zeros({static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// Runs `opt` over `grads` from `p0` with lr; returns the parameters after each step.
std::vector<std::vector<float>> run(Optimizer& opt, std::initializer_list<float> p0,
                                    std::vector<std::initializer_list<float>> grads, double lr) {
  Tensor p = vec(p0);
  std::vector<std::vector<float>> out;
  for (auto g : grads) {
    opt.step(p, vec(g), lr);
    out.emplace_back(p.data<float>(), p.data<float>() + p.numel());
  }
  return out;
}

// float32 arithmetic against the exact values: a few ulps at magnitude ~1.
constexpr double kTol = 3e-7;

#define EXPECT_PARAMS(got, ...)                                                                \
  do {                                                                                         \
    const std::vector<std::vector<float>> got_ = (got); /* evaluated once: it runs the steps */ \
    std::vector<std::vector<double>> want = __VA_ARGS__;                                       \
    ASSERT_EQ(got_.size(), want.size());                                                       \
    for (size_t s = 0; s < want.size(); ++s)                                                   \
      for (size_t i = 0; i < want[s].size(); ++i)                                              \
        EXPECT_NEAR(got_[s][i], want[s][i], kTol) << "step " << s + 1 << " element " << i;     \
  } while (0)

TEST(Optim, SgdPlain) {
  auto opt = make_sgd(2, {});
  // p = p - lr * g: 1 - 0.1*0.5 = 0.95, -2 - 0.1*0.25 = -2.025; then 0.95 + 0.1 = 1.05, -2.025 - 0.2
  auto got = run(*opt, {1, -2}, {{0.5f, 0.25f}, {-1, 2}}, 0.1);
  EXPECT_PARAMS(got, {{0.95, -2.025}, {1.05, -2.225}});
  EXPECT_EQ(opt->steps(), 2);
  EXPECT_STREQ(opt->name(), "sgd");
  EXPECT_TRUE(opt->state().empty());  // no momentum, no state
}

TEST(Optim, SgdWeightDecay) {
  auto opt = make_sgd(1, {.weight_decay = 0.5});
  // d = g + 0.5 p = 1 + 1 = 2, p = 2 - 0.2 = 1.8; d = 1 + 0.9 = 1.9, p = 1.8 - 0.19 = 1.61
  EXPECT_PARAMS(run(*opt, {2}, {{1}, {1}}, 0.1), {{1.8}, {1.61}});
}

TEST(Optim, SgdMomentum) {
  auto opt = make_sgd(1, {.momentum = 0.9});
  // buf = g (first step) = 1, p = 0.9; buf = 0.9 + 1 = 1.9, p = 0.9 - 0.19 = 0.71;
  // buf = 1.71 + 0.5 = 2.21, p = 0.71 - 0.221 = 0.489
  EXPECT_PARAMS(run(*opt, {1}, {{1}, {1}, {0.5f}}, 0.1), {{0.9}, {0.71}, {0.489}});
  ASSERT_EQ(opt->state().size(), 1u);
  EXPECT_EQ(opt->state()[0].first, "momentum_buffer");
  EXPECT_NEAR(opt->state()[0].second.data<float>()[0], 2.21, kTol);
}

TEST(Optim, SgdDampening) {
  auto opt = make_sgd(1, {.momentum = 0.9, .dampening = 0.5});
  // First step: buf = g, undamped (torch's rule): buf = 1, p = 0.9;
  // buf = 0.9*1 + 0.5*1 = 1.4, p = 0.76; buf = 0.9*1.4 + 0.5*2 = 2.26, p = 0.76 - 0.226 = 0.534
  EXPECT_PARAMS(run(*opt, {1}, {{1}, {1}, {2}}, 0.1), {{0.9}, {0.76}, {0.534}});
}

TEST(Optim, SgdNesterovWeightDecay) {
  auto opt = make_sgd(1, {.momentum = 0.9, .weight_decay = 0.1, .nesterov = true});
  // d = 1 + 0.1*1 = 1.1, buf = 1.1, d = 1.1 + 0.9*1.1 = 2.09, p = 1 - 0.209 = 0.791
  // d = 0 + 0.0791, buf = 0.99 + 0.0791 = 1.0691, d = 0.0791 + 0.96219 = 1.04129, p = 0.686871
  // d = 1 + 0.0686871 = 1.0686871, buf = 0.96219 + 1.0686871 = 2.0308771,
  //   d = 1.0686871 + 1.82778939 = 2.89647649, p = 0.686871 - 0.289647649 = 0.397223351
  EXPECT_PARAMS(run(*opt, {1}, {{1}, {0}, {1}}, 0.1), {{0.791}, {0.686871}, {0.397223351}});
}

TEST(Optim, AdamWWithoutDecay) {
  auto opt = make_adamw(2, {.weight_decay = 0});
  // Element 0, lr 0.1, betas (0.9, 0.999):
  //  t=1 g=1:  m = 0.1, v = 0.001, m_hat = 1, v_hat = 1, p = 1 - 0.1 * 1/(1 + 1e-8) = 0.900000001
  //  t=2 g=-1: m = 0.09 - 0.1 = -0.01, v = 0.000999 + 0.001 = 0.001999; m_hat = -0.01/0.19,
  //            v_hat = 0.001999/0.001999 = 1, p = 0.9 + 0.1 * 0.0526315789 = 0.905263159
  //  t=3 g=2:  m = 0.191, v = 0.005997001, m_hat = 0.191/0.271 = 0.704797, v_hat = 2.001001,
  //            p = 0.905263 - 0.1 * 0.704797/1.414560 = 0.855438945
  auto got = run(*opt, {1, -0.5f}, {{1, 0.1f}, {-1, 0.2f}, {2, -0.3f}}, 0.1);
  EXPECT_PARAMS(got, {{0.900000001, -0.59999999}, {0.905263159, -0.696518186}, {0.855438945, -0.689858285}});
  EXPECT_STREQ(opt->name(), "adamw");
  auto st = opt->state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].first, "exp_avg");
  EXPECT_EQ(st[1].first, "exp_avg_sq");
  EXPECT_NEAR(st[0].second.data<float>()[0], 0.191, kTol);
  EXPECT_NEAR(st[1].second.data<float>()[0], 0.005997001, 1e-9);
}

TEST(Optim, AdamWDecoupledDecay) {
  auto opt = make_adamw(2, {.weight_decay = 0.1});
  // t=1: p = 1 * (1 - 0.1*0.1) = 0.99, then the Adam step of -0.1: 0.890000001
  // t=2: p = 0.89 * 0.99 = 0.8811, + 0.1 * 0.0526315789 = 0.886363159
  auto got = run(*opt, {1, -0.5f}, {{1, 0.1f}, {-1, 0.2f}, {2, -0.3f}}, 0.1);
  EXPECT_PARAMS(got, {{0.890000001, -0.594999990}, {0.886363159, -0.685568187}, {0.827675313, -0.672052603}});
}

TEST(Optim, AdamWOtherBetasAndEps) {
  auto opt = make_adamw(1, {.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-3, .weight_decay = 0.5});
  // t=1: p = 1 * (1 - 0.01*0.5) = 0.995; m_hat = 1, v_hat = 1: p = 0.995 - 0.01/(1 + 0.001) = 0.98500999
  EXPECT_PARAMS(run(*opt, {1}, {{1}, {-1}, {2}}, 0.01), {{0.98500999}, {0.981194941}, {0.970973804}});
}

TEST(Optim, ZeroLearningRateChangesNothingButState) {
  auto opt = make_adamw(1, {.weight_decay = 0.1});
  EXPECT_PARAMS(run(*opt, {1}, {{1}}, 0.0), {{1.0}});
  EXPECT_EQ(opt->steps(), 1);
  EXPECT_NEAR(opt->state()[0].second.data<float>()[0], 0.1, 1e-8);
}

// Deterministic pseudo-random flat tensors.
Tensor randn(int64_t n, uint64_t seed, uint64_t stream) {
  Rng rng(seed, stream);
  Tensor t = Tensor::zeros({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(rng.normal());
  return t;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

std::vector<std::unique_ptr<Optimizer>> every_variant(int64_t n) {
  std::vector<std::unique_ptr<Optimizer>> v;
  v.push_back(make_sgd(n, {}));
  v.push_back(make_sgd(n, {.momentum = 0.9}));
  v.push_back(make_sgd(n, {.momentum = 0.9, .dampening = 0.3, .weight_decay = 1e-4}));
  v.push_back(make_sgd(n, {.momentum = 0.8, .weight_decay = 0.01, .nesterov = true}));
  v.push_back(make_adamw(n, {}));
  v.push_back(make_adamw(n, {.beta1 = 0.5, .beta2 = 0.9, .eps = 1e-6, .weight_decay = 0}));
  return v;
}

// Train 5 steps, save state to a safetensors file, load it into fresh optimizers, train 5 more:
// bitwise equal to 10 uninterrupted steps.
TEST(Optim, ResumeFromSavedStateIsBitwiseEqual) {
  const int64_t n = 1001;
  const std::string path =
      (std::filesystem::temp_directory_path() / fmt::format("dp_optim_state_{}.safetensors", ::getpid())).string();
  auto straight = every_variant(n);
  auto first = every_variant(n);
  auto resumed = every_variant(n);
  for (size_t k = 0; k < straight.size(); ++k) {
    SCOPED_TRACE(fmt::format("variant {} ({})", k, straight[k]->name()));
    Tensor p_straight = randn(n, 7, 0), p_resumed = p_straight.clone();
    auto grad = [&](int s) { return randn(n, 7, 100 + s); };
    auto lr = [](int s) { return 0.05 / (1 + s); };
    for (int s = 0; s < 10; ++s) straight[k]->step(p_straight, grad(s), lr(s));
    for (int s = 0; s < 5; ++s) first[k]->step(p_resumed, grad(s), lr(s));

    std::vector<std::pair<std::string, Tensor>> saved;
    for (auto& [name, t] : first[k]->state()) saved.emplace_back("optim." + name, t);
    write_safetensors(path, saved, {{"steps", std::to_string(first[k]->steps())}});
    first[k].reset();  // the original is gone; only the file remains

    auto file = SafetensorsFile::open(path);
    std::vector<std::pair<std::string, Tensor>> loaded;
    for (const auto& name : file.names()) loaded.emplace_back(name.substr(6), file.get(name));
    resumed[k]->load_state(loaded, std::stoll(file.metadata().at("steps")));
    EXPECT_EQ(resumed[k]->steps(), 5);
    for (int s = 5; s < 10; ++s) resumed[k]->step(p_resumed, grad(s), lr(s));

    EXPECT_TRUE(bitwise_equal(p_straight, p_resumed));
    auto a = straight[k]->state(), b = resumed[k]->state();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i].second, b[i].second)) << a[i].first;
  }
  std::filesystem::remove(path);
}

// The OpenMP path (large n) computes exactly what the serial path computes, element by element.
TEST(Optim, ParallelPathEqualsSerialElementwise) {
  const int64_t n = 100'003;  // above the kernels' parallel threshold
  auto big = every_variant(n);
  for (size_t k = 0; k < big.size(); ++k) {
    SCOPED_TRACE(fmt::format("variant {}", k));
    Tensor p = randn(n, 3, 0), p0 = p.clone();
    Tensor g1 = randn(n, 3, 1), g2 = randn(n, 3, 2);
    big[k]->step(p, g1, 0.01);
    big[k]->step(p, g2, 0.02);
    for (int64_t i : {int64_t{0}, int64_t{1}, n / 2, n - 1}) {
      auto one = every_variant(1);
      Tensor q = p0.slice_flat(i, {1}).clone();
      one[k]->step(q, g1.slice_flat(i, {1}).clone(), 0.01);
      one[k]->step(q, g2.slice_flat(i, {1}).clone(), 0.02);
      EXPECT_EQ(q.data<float>()[0], p.data<float>()[i]) << "element " << i;
    }
  }
}

TEST(Optim, LoadStateReportsMismatches) {
  auto sgd = make_sgd(4, {.momentum = 0.9});
  try {
    sgd->load_state({}, 3);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("sgd optimizer state"), HasSubstr("4 parameters"),
                                HasSubstr("missing 'momentum_buffer'")));
  }
  auto adam = make_adamw(4, {});
  Tensor m = vec({1, 2, 3, 4});
  adam->load_state({{"exp_avg", m}, {"exp_avg_sq", Tensor::zeros({2, 2})}}, 2);  // any shape of 4
  EXPECT_EQ(adam->steps(), 2);
  EXPECT_EQ(adam->state()[0].second.data<float>()[3], 4.0f);
  try {
    adam->load_state({{"exp_avg", Tensor::zeros({3})}, {"momentum_buffer", Tensor::zeros({4})}}, -1);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("adamw optimizer state"), HasSubstr("slots: exp_avg, exp_avg_sq"),
                                HasSubstr("missing 'exp_avg_sq'"), HasSubstr("unexpected 'momentum_buffer'"),
                                HasSubstr("'exp_avg' is f32[3] on cpu, want f32 with 4 elements"),
                                HasSubstr("step count -1 is negative")));
  }
  try {
    adam->load_state({{"exp_avg", Tensor::zeros({4}, DType::F64)}, {"exp_avg_sq", Tensor::zeros({4})}}, 1);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'exp_avg' is f64[4] on cpu, want f32 with 4 elements"));
  }
  // A failed load leaves the optimizer as it was.
  EXPECT_EQ(adam->steps(), 2);
  EXPECT_EQ(adam->state()[0].second.data<float>()[3], 4.0f);
  // Plain SGD has no slots: any state is unexpected.
  EXPECT_THROW(make_sgd(4, {})->load_state({{"momentum_buffer", Tensor::zeros({4})}}, 1), UserError);
  make_sgd(4, {})->load_state({}, 1);
}

TEST(Optim, StepChecksItsArguments) {
  auto opt = make_sgd(4, {});
  Tensor p = Tensor::zeros({4});
  EXPECT_THROW(opt->step(p, Tensor::zeros({5}), 0.1), DpError);
  EXPECT_THROW(opt->step(p, Tensor::zeros({4}, DType::F64), 0.1), DpError);
  EXPECT_THROW(opt->step(Tensor::zeros({2, 2}), Tensor::zeros({4}), 0.1), DpError);
  EXPECT_THROW(opt->step(p, Tensor(), 0.1), DpError);
  EXPECT_THROW(opt->step(p, Tensor::zeros({4}), -0.1), UserError);
  EXPECT_THROW(opt->step(p, Tensor::zeros({4}), std::nan("")), UserError);
  EXPECT_EQ(opt->steps(), 0);
}

TEST(Optim, OptionsAreValidated) {
  auto message = [](auto make) -> std::string {
    try {
      make();
    } catch (const UserError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(message([] { make_sgd(1, {.momentum = -0.1}); }), HasSubstr("sgd: invalid momentum -0.1"));
  EXPECT_THAT(message([] { make_sgd(1, {.weight_decay = -1}); }), HasSubstr("invalid weight_decay -1"));
  EXPECT_THAT(message([] { make_sgd(1, {.nesterov = true}); }), HasSubstr("nesterov needs momentum > 0"));
  EXPECT_THAT(message([] { make_sgd(1, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}); }),
              HasSubstr("dampening = 0"));
  EXPECT_THAT(message([] { make_adamw(1, {.beta1 = 1.0}); }), HasSubstr("adamw: invalid beta1 1"));
  EXPECT_THAT(message([] { make_adamw(1, {.beta2 = -0.5}); }), HasSubstr("invalid beta2 -0.5"));
  EXPECT_THAT(message([] { make_adamw(1, {.eps = -1e-8}); }), HasSubstr("invalid eps"));
  EXPECT_THAT(message([] { make_adamw(1, {.weight_decay = -0.01}); }), HasSubstr("invalid weight_decay"));
}

}  // namespace
}  // namespace dp::optim
