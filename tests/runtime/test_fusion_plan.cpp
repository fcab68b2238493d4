// The fusion plan's folding decisions (runtime/fusion_plan.h) over graph descriptions: which relu,
// add and gelu nodes fold into the layer before them, with which epilogue and residual, where the
// host runs; every case where folding would not be exact (another reader of a value the fusion no
// longer stores) left unfused; and the CPU's path, where hosts apply a ReLU only.
#include <gtest/gtest.h>

#include <utility>

#include "runtime/fusion_plan.h"

namespace dp {
namespace {

// A node's kind as the plan sees it: what it can apply, and what it is as a follower.
struct Kind {
  EpilogueSet absorbs;
  Follower follower = Follower::Other;
};
// O: other; B: a batch norm on the GPU (ReLU or add + ReLU); R: relu; A: add.
const Kind O{}, B{{Epilogue::Relu, Epilogue::AddRelu}}, R{{}, Follower::Relu}, A{{}, Follower::Add};

// The plan of a graph written as (kind, inputs) per node.
std::vector<NodePlan> plan(const std::vector<std::pair<Kind, std::vector<int>>>& g) {
  std::vector<FusionNode> nodes;
  for (const auto& [k, in] : g) nodes.push_back({k.absorbs, k.follower, in});
  return plan_fusion(nodes);
}

std::vector<int> folded(const std::vector<NodePlan>& p) {
  std::vector<int> out;
  for (const auto& n : p) out.push_back(n.folded_into);
  return out;
}
std::vector<int> runs_at(const std::vector<NodePlan>& p) {
  std::vector<int> out;
  for (const auto& n : p) out.push_back(n.runs_at);
  return out;
}
std::vector<Epilogue> epilogues(const std::vector<NodePlan>& p) {
  std::vector<Epilogue> out;
  for (const auto& n : p) out.push_back(n.epilogue);
  return out;
}

constexpr Epilogue N_ = Epilogue::None, RL = Epilogue::Relu, AR = Epilogue::AddRelu;

TEST(FusionPlan, BnReluFoldsTheReluIntoTheBn) {
  // conv -> bn -> relu -> conv
  const auto p = plan({{O, {-1}}, {B, {0}}, {R, {1}}, {O, {2}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, 1, -1}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{N_, RL, N_, N_}));
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, 1, -1, 3}));
}

TEST(FusionPlan, AConvolutionOnTheGraphApiTakesAReluButNoResidualAdd) {
  // conv(graph API) -> relu; conv(graph API) -> add(.., input) -> relu: the first relu folds, the
  // add + relu does not (the convolution applies a ReLU only).
  const Kind C{{Epilogue::Relu}};
  const auto p = plan({{C, {-1}}, {R, {0}}, {C, {1}}, {A, {2, -1}}, {R, {3}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, 0, -1, -1, -1}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{RL, N_, N_, N_, N_}));
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, -1, 2, 3, 4}));
}

TEST(FusionPlan, ResNetBlocksFoldBothShapes) {
  // A bottleneck with a downsampling shortcut, then one with the identity shortcut (torchvision's
  // order: the main branch first, then the shortcut's conv and bn, then add and relu).
  const std::vector<std::pair<Kind, std::vector<int>>> g = {
      {O, {-1}},     // 0 stem conv
      {B, {0}},      // 1 bn1
      {R, {1}},      // 2 relu
      {O, {2}},      // 3 block0.conv1
      {B, {3}},      // 4 block0.bn1
      {R, {4}},      // 5 block0.relu1
      {O, {5}},      // 6 block0.conv2
      {B, {6}},      // 7 block0.bn2 (main branch's last bn)
      {O, {2}},      // 8 block0.downsample.0
      {B, {8}},      // 9 block0.downsample.1
      {A, {7, 9}},   // 10 block0.add
      {R, {10}},     // 11 block0.relu2
      {O, {11}},     // 12 block1.conv1
      {B, {12}},     // 13 block1.bn1
      {A, {13, 11}}, // 14 block1.add (identity shortcut: block0's output)
      {R, {14}},     // 15 block1.relu
  };
  const auto p = plan(g);
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, 1, -1, -1, 4, -1, -1, -1, -1, 7, 7, -1, -1, 13, 13}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{N_, RL, N_, N_, RL, N_, N_, AR, N_, N_, N_, N_, N_, AR, N_, N_}));
  // The main branch's bn runs where the add was, after the shortcut's bn has produced the residual.
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, 1, -1, 3, 4, -1, 6, 10, 8, 9, -1, -1, 12, 14, -1, -1}));
  EXPECT_EQ(p[7].residual, 9);
  EXPECT_EQ(p[13].residual, 11);
}

TEST(FusionPlan, AnAddOfTwoBnsTakesTheFirstAsHost) {
  const auto p = plan({{O, {-1}}, {B, {0}}, {B, {0}}, {A, {2, 1}}, {R, {3}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, -1, 2, 2}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{N_, N_, AR, N_, N_}));
  EXPECT_EQ(p[2].residual, 1);
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, 1, 3, -1, -1}));
}

TEST(FusionPlan, TheModelInputCanBeTheResidual) {
  const auto p = plan({{B, {-1}}, {A, {0, -1}}, {R, {1}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, 0, 0}));
  EXPECT_EQ(p[0].epilogue, AR);
  EXPECT_EQ(p[0].residual, -1);
  EXPECT_EQ(p[0].runs_at, 1);
}

TEST(FusionPlan, NothingFoldsWhereAnotherNodeReadsTheValues) {
  struct Case {
    const char* what;
    std::vector<std::pair<Kind, std::vector<int>>> g;
  };
  const Case cases[] = {
      {"bn read by its relu and another layer", {{B, {-1}}, {R, {0}}, {O, {0}}, {A, {1, 2}}}},
      {"bn feeding two adds", {{B, {-1}}, {O, {-1}}, {A, {0, 1}}, {R, {2}}, {A, {0, 3}}, {R, {4}}}},
      {"add read by its relu and another layer", {{B, {-1}}, {O, {-1}}, {A, {0, 1}}, {R, {2}}, {O, {2}}}},
      {"add read by two relus", {{B, {-1}}, {O, {-1}}, {A, {0, 1}}, {R, {2}}, {R, {2}}}},
      {"add not followed by a relu", {{B, {-1}}, {O, {-1}}, {A, {0, 1}}, {O, {2}}}},
      {"add of a bn with itself", {{B, {-1}}, {A, {0, 0}}, {R, {1}}}},
      {"relu of a layer that cannot fuse", {{O, {-1}}, {R, {0}}}},
      {"relu of the model input", {{R, {-1}}}},
      {"add + relu without a bn", {{O, {-1}}, {O, {-1}}, {A, {0, 1}}, {R, {2}}}},
      {"relu of a relu", {{O, {-1}}, {R, {0}}, {R, {1}}}},
  };
  for (const Case& c : cases) {
    const auto p = plan(c.g);
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_EQ(p[i].folded_into, -1) << c.what << ", node " << i;
      EXPECT_EQ(p[i].epilogue, N_) << c.what << ", node " << i;
      EXPECT_EQ(p[i].runs_at, static_cast<int>(i)) << c.what << ", node " << i;
    }
  }
}

TEST(FusionPlan, ABnReadOnlyByAnAddWhoseReluIsSharedStillFoldsItsOwnRelu) {
  // bn -> add, add read by two nodes: the add stays; a second bn's own relu still folds.
  const auto p = plan({{B, {-1}}, {O, {-1}}, {A, {0, 1}}, {R, {2}}, {O, {2}}, {B, {4}}, {R, {5}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, -1, -1, -1, -1, 5}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{N_, N_, N_, N_, N_, RL, N_}));
}

TEST(FusionPlan, AGeluFoldsIntoTheLinearBeforeItWhenItIsItsOnlyReader) {
  // GPT's MLP: ln -> c_fc (L: applies a GELU) -> gelu -> c_proj -> add(.., residual): the gelu folds.
  const Kind L{{Epilogue::Gelu}}, G{{}, Follower::TanhGelu};
  const auto p = plan({{O, {-1}}, {L, {0}}, {G, {1}}, {L, {2}}, {A, {3, -1}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, 1, -1, -1}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{N_, Epilogue::Gelu, N_, N_, N_}));
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, 1, -1, 3, 4}));
  // Not folded: a linear read by another node too; a gelu after a layer that cannot apply it (a
  // batch norm takes relus only); a relu after a linear (on the GPU it applies a GELU only); a gelu
  // of the model input.
  const auto q = plan({{L, {-1}}, {G, {0}}, {O, {0}}, {B, {2}}, {G, {3}}, {L, {4}}, {R, {5}}, {G, {-1}}});
  EXPECT_EQ(folded(q), (std::vector<int>(8, -1)));
  EXPECT_EQ(epilogues(q), (std::vector<Epilogue>(8, N_)));
}

TEST(FusionPlan, OnTheCpuPathEachReluFoldsIntoItsProducerAndNothingElseFolds) {
  // The CPU's oneDNN kernels apply a ReLU only, an add among them: conv -> bn -> relu,
  // bn -> add(.., relu) -> relu, linear -> tanh gelu. Rule 1 finds no host for add + relu, so the
  // relu after the add folds into the add (rule 2); the gelu stays.
  const Kind H{{Epilogue::Relu}}, AH{{Epilogue::Relu}, Follower::Add}, G{{}, Follower::TanhGelu};
  const auto p = plan({{H, {-1}}, {H, {0}}, {R, {1}}, {H, {2}}, {H, {3}}, {AH, {4, 2}}, {R, {5}}, {H, {6}}, {G, {7}}});
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, 1, -1, -1, -1, 5, -1, -1}));
  EXPECT_EQ(epilogues(p), (std::vector<Epilogue>{N_, RL, N_, N_, N_, RL, N_, N_, N_}));
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, 1, -1, 3, 4, 5, -1, 7, 8}));
}

TEST(FusionPlan, UnfusedPlanRunsEveryNodeInPlace) {
  const auto p = unfused_plan(3);
  EXPECT_EQ(folded(p), (std::vector<int>{-1, -1, -1}));
  EXPECT_EQ(runs_at(p), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(unfused_plan(0).empty());
}

}  // namespace
}  // namespace dp
