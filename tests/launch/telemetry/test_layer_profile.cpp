// The per-layer profile (launch/telemetry/layer_profile.h) through its host logic: with an injected
// clock, the window, the means, the accounting identity (layers + other = step), the table's order
// and exact format, layers.json's fixed names, the trace's device lane; with a fake event source,
// the GPU's bookkeeping (events made before the window, one per mark, read once after it, spans
// paired from consecutive marks). And the real CUDA events (LayerMarksGpu, skips without a GPU).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/gpu_test.h"
#include "base/error.h"
#include "runtime/device_memory.h"
#include "launch/telemetry/layer_profile.h"

#ifdef DPTRAIN_HAVE_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/buffers.h"
#include "runtime/cuda/check_runtime.h"
#include "runtime/cuda/stream.h"
#endif

namespace dp::metrics {
namespace {

// conv1 -> relu1 (folded into conv1, as the CPU plan does) -> flat -> fc -> bn: fc and bn take
// equal time, so the tie is broken by name.
std::vector<NodeInfo> nodes() {
  return {{"conv1", "conv2d", {4, 6, 6}, -1},
          {"relu1", "relu", {4, 6, 6}, 0},
          {"flat", "flatten", {144}, -1},
          {"fc", "linear", {10}, -1},
          {"bn", "batchnorm1d", {10}, -1}};
}

// A clock the test moves: every mark reads `now`.
struct Clock {
  double now_us = 1e9;
  void ms(double d) { now_us += 1e3 * d; }
};

// One step of the scripted model on the profiler; each phase takes the given ms. Returns
// end_step's answer (the window's last step).
bool step(LayerProfiler& p, Clock& c, int64_t s, int micro_batches = 1) {
  p.begin_step(s);
  c.ms(0.5);  // zero_grad: unattributed
  for (int m = 0; m < micro_batches; ++m) {
    p.begin(Phase::DataWait), c.ms(1), p.end();
    p.node_begin(0, false), c.ms(3), p.node_end(0, false);  // conv1 (+relu1, not run)
    p.node_begin(2, false), c.ms(0.25), p.node_end(2, false);
    p.node_begin(3, false), c.ms(1), p.node_end(3, false);
    p.node_begin(4, false), c.ms(0.5), p.node_end(4, false);
    c.ms(0.25);  // the graph's output: unattributed
    p.begin(Phase::Loss), c.ms(0.5), p.end();
    p.node_begin(4, true), c.ms(1.5), p.node_end(4, true);
    p.node_begin(3, true), c.ms(1), p.node_end(3, true);
    p.node_begin(2, true), c.ms(0.25), p.node_end(2, true);
    p.node_begin(0, true), c.ms(4), p.node_end(0, true);
  }
  p.begin(Phase::CommWait), c.ms(0.25), p.end();
  p.begin(Phase::Optimizer), c.ms(0.75), p.end();
  c.ms(0.25);  // the buffer broadcast: unattributed
  const bool last = p.end_step();
  c.ms(10);  // checkpoint, evaluation: between steps, in no step
  return last;
}

TEST(LayerProfile, MeansOverTheWindowAddUpToTheStep) {
  Clock c;
  LayerProfiler p({3, 4}, clock_marks([&] { return c.now_us; }), step_mark_bound(5, 1));
  for (int64_t s = 1; s <= 6; ++s) {
    EXPECT_EQ(step(p, c, s), s == 4) << s;
    EXPECT_EQ(p.pending(), s >= 3) << s << ": recorded, not yet reported";
  }
  LayerProfile r = p.finish(nodes(), "cpu", "fp32", "f32");
  EXPECT_EQ(r.first, 3);
  EXPECT_EQ(r.last, 4);
  EXPECT_EQ(r.steps, 2);
  EXPECT_DOUBLE_EQ(r.step_ms, 15);  // 14 attributed + 1 unattributed; the 10 ms between steps is in none
  ASSERT_EQ(r.layers.size(), 4u) << "relu1 is conv1's";
  EXPECT_EQ(r.layers[0].name, "conv1");
  EXPECT_EQ(r.layers[0].fused, (std::vector<std::string>{"relu1"}));
  EXPECT_DOUBLE_EQ(r.layers[0].fwd_ms, 3);
  EXPECT_DOUBLE_EQ(r.layers[0].bwd_ms, 4);
  EXPECT_EQ(r.layers[1].name, "bn") << "fc and bn take 2.0 ms each: by name";
  EXPECT_EQ(r.layers[2].name, "fc");
  EXPECT_EQ(r.layers[3].name, "flat");
  EXPECT_DOUBLE_EQ(r.layers[3].fwd_ms + r.layers[3].bwd_ms, 0.5);
  EXPECT_EQ(r.layers[1].type, "batchnorm1d");
  EXPECT_EQ(r.layers[0].out_shape, (Shape{4, 6, 6}));
  EXPECT_DOUBLE_EQ(r.loss_ms, 0.5);
  EXPECT_DOUBLE_EQ(r.data_wait_ms, 1);
  EXPECT_DOUBLE_EQ(r.comm_wait_ms, 0.25);
  EXPECT_DOUBLE_EQ(r.optimizer_ms, 0.75);
  EXPECT_DOUBLE_EQ(r.unattributed_ms, 1);
  double sum = r.loss_ms + r.optimizer_ms + r.comm_wait_ms + r.data_wait_ms + r.unattributed_ms;
  for (const auto& l : r.layers) sum += l.fwd_ms + l.bwd_ms;
  EXPECT_EQ(sum, r.step_ms) << "the accounting identity";
  // Every attributed phase of both steps, unattributed ones left out: 8 layer spans, 4 others.
  EXPECT_EQ(r.spans.size(), 2u * 12u);
  EXPECT_EQ(r.spans[0].name, "data wait");
  EXPECT_EQ(r.spans[0].step, 3);
  EXPECT_DOUBLE_EQ(r.spans[0].begin_ms, 0.5);
  EXPECT_EQ(r.spans[1].name, "conv1");
  EXPECT_EQ(r.spans[1].phase, Phase::Forward);
  EXPECT_DOUBLE_EQ(r.spans[1].dur_ms, 3);
  EXPECT_EQ(r.spans[12].step, 4);
  EXPECT_DOUBLE_EQ(r.spans[12].begin_ms, 15 + 10 + 0.5) << "step 4 begins after step 3 and the 10 ms gap";
  EXPECT_DOUBLE_EQ(r.origin_us, 1e9 + 2 * (15 + 10) * 1e3) << "steps 1 and 2 came first";
  EXPECT_THROW(p.finish(nodes(), "cpu", "fp32", "f32"), DpError) << "once";
}

TEST(LayerProfile, NothingIsRecordedOutsideAStepOfTheWindow) {
  Clock c;
  LayerProfiler p({2, 2}, clock_marks([&] { return c.now_us; }), 40);
  p.node_begin(0, false);  // an evaluation's forward before any step: ignored
  step(p, c, 1);
  EXPECT_FALSE(p.recording());
  p.begin_step(2);
  EXPECT_TRUE(p.recording());
  c.ms(2);
  EXPECT_TRUE(p.end_step()) << "the window's last step";
  p.node_begin(0, false);  // after the step: ignored
  p.end();
  const LayerProfile r = p.finish(nodes(), "cpu", "fp32", "f32");
  EXPECT_DOUBLE_EQ(r.step_ms, 2);
  EXPECT_DOUBLE_EQ(r.unattributed_ms, 2);
  EXPECT_TRUE(r.spans.empty());
  step(p, c, 3);  // finished: nothing more
  EXPECT_FALSE(p.pending());
  LayerProfiler off(StepRange{}, nullptr, 40);  // no window: every call a no-op
  off.begin_step(1);
  off.node_begin(0, false);
  EXPECT_FALSE(off.end_step());
  EXPECT_FALSE(off.pending());
}

TEST(LayerProfile, ARunThatEndsOrResumesInsideTheWindowReportsTheStepsItRan) {
  Clock c;
  LayerProfiler p({3, 9}, clock_marks([&] { return c.now_us; }), 40);
  for (int64_t s = 5; s <= 6; ++s) step(p, c, s);  // resumed at step 4, stopped after 6
  ASSERT_TRUE(p.pending());
  const LayerProfile r = p.finish(nodes(), "cpu", "fp32", "f32");
  EXPECT_EQ(r.first, 5);
  EXPECT_EQ(r.last, 6);
  EXPECT_EQ(r.steps, 2);
  EXPECT_DOUBLE_EQ(r.step_ms, 15);
}

TEST(LayerProfile, MicroBatchesAddUpWithinTheirStep) {
  Clock c;
  LayerProfiler p({1, 2}, clock_marks([&] { return c.now_us; }), step_mark_bound(5, 2));
  step(p, c, 1, 2);
  step(p, c, 2, 2);
  const LayerProfile r = p.finish(nodes(), "cpu", "fp32", "f32");
  EXPECT_DOUBLE_EQ(r.layers[0].fwd_ms, 6);
  EXPECT_DOUBLE_EQ(r.layers[0].bwd_ms, 8);
  EXPECT_DOUBLE_EQ(r.data_wait_ms, 2);
  EXPECT_DOUBLE_EQ(r.loss_ms, 1);
  EXPECT_DOUBLE_EQ(r.step_ms, 0.5 + 2 * 13.25 + 0.25 + 0.75 + 0.25);
  EXPECT_DOUBLE_EQ(r.unattributed_ms, 0.5 + 2 * 0.25 + 0.25);
}

TEST(LayerProfile, StepMarkBoundCoversAStep) {
  // 2 for the step, per micro-batch 2 + 2 (data, loss) and 2 per node and pass, 2 + 2 (comm, optimizer).
  EXPECT_EQ(step_mark_bound(5, 1), 2u + (4 + 20) + 4);
  EXPECT_EQ(step_mark_bound(5, 3), 2u + 3 * (4 + 20) + 4);
  EXPECT_EQ(step_mark_bound(5, 0), step_mark_bound(5, 1));
}

// A GPU's marks without a GPU: events are made before the window (open), one recorded per mark
// with no host wait, read once after the window; their device times are not the host's.
class FakeEvents final : public MarkSource {
 public:
  struct Log {
    std::vector<std::string> calls;
    std::vector<double> device_ms;  // the time each recorded event "ran"
  };
  explicit FakeEvents(Log* log) : log_(log) {}
  void open(size_t n) override {
    log_->calls.push_back("open " + std::to_string(n) + " at mark " + std::to_string(recorded_));
    made_ = n;
  }
  void record(size_t i) override {
    EXPECT_EQ(i, recorded_) << "marks recorded in order";
    EXPECT_LT(i, made_) << "every event made before the window";
    ++recorded_;
  }
  std::vector<double> times_ms(size_t n) override {
    log_->calls.push_back("read " + std::to_string(n) + " of " + std::to_string(recorded_));
    std::vector<double> out(log_->device_ms.begin(), log_->device_ms.begin() + static_cast<std::ptrdiff_t>(n));
    for (double& t : out) t -= log_->device_ms[0];
    return out;
  }
  double origin_us() const override { return 5e6; }

 private:
  Log* log_;
  size_t made_ = 0, recorded_ = 0;
};

TEST(LayerProfile, GpuEventsAreMadeBeforeTheWindowAndReadOnceAfterIt) {
  FakeEvents::Log log;
  const size_t bound = step_mark_bound(5, 1);
  LayerProfiler p({2, 3}, std::make_unique<FakeEvents>(&log), bound);
  Clock host;  // the host's clock plays no part: the device times below decide
  for (int64_t s = 1; s <= 3; ++s) {
    EXPECT_EQ(step(p, host, s), s == 3);
    EXPECT_EQ(log.calls.size(), s < 2 ? 0u : 1u) << "opened before step 2's first mark, never read inside the window";
  }
  ASSERT_EQ(log.calls.size(), 1u);
  EXPECT_EQ(log.calls[0], "open " + std::to_string(2 * bound) + " at mark 0");
  // 26 marks a step: its 2, data and loss 2 each, 4 layers (relu1 is folded) x 2 passes x 2, comm
  // and optimizer 2 each. Device times: every phase runs 1 ms but the layers' backward (the spans
  // from marks 13, 15, 17, 19 of a step) 2 ms, and 5 ms pass between the steps, so the pairing of
  // consecutive marks, not the host's clock, decides every span.
  double t = 100;
  for (size_t i = 0; i < 2 * 26; ++i) {
    log.device_ms.push_back(t);
    const size_t k = i % 26;
    t += k == 25 ? 5 : (k == 13 || k == 15 || k == 17 || k == 19) ? 2 : 1;
  }
  const LayerProfile r = p.finish(nodes(), "cuda:0", "bf16", "bf16");
  ASSERT_EQ(log.calls.size(), 2u);
  EXPECT_EQ(log.calls[1], "read 52 of 52");
  EXPECT_EQ(r.first, 2);
  EXPECT_EQ(r.last, 3);
  EXPECT_DOUBLE_EQ(r.step_ms, 21 + 2 * 4) << "25 phases: 21 of 1 ms, 4 of 2 ms";
  EXPECT_DOUBLE_EQ(r.layers[0].fwd_ms, 1);
  EXPECT_DOUBLE_EQ(r.layers[0].bwd_ms, 2);
  EXPECT_DOUBLE_EQ(r.loss_ms, 1);
  EXPECT_DOUBLE_EQ(r.data_wait_ms, 1);
  EXPECT_DOUBLE_EQ(r.comm_wait_ms, 1);
  EXPECT_DOUBLE_EQ(r.optimizer_ms, 1);
  double sum = r.loss_ms + r.optimizer_ms + r.comm_wait_ms + r.data_wait_ms + r.unattributed_ms;
  for (const auto& l : r.layers) sum += l.fwd_ms + l.bwd_ms;
  EXPECT_DOUBLE_EQ(sum, r.step_ms);
  EXPECT_DOUBLE_EQ(r.unattributed_ms, 13) << "the 13 phases between the others, 1 ms each";
  EXPECT_DOUBLE_EQ(r.spans.back().begin_ms, 29 + 5 + 27) << "step 3's optimizer, after step 2 and the gap";
  EXPECT_DOUBLE_EQ(r.origin_us, 5e6);
}

LayerProfile fixed_profile() {
  LayerProfile p;
  p.first = 11, p.last = 15, p.steps = 5;
  p.device = "cpu", p.precision = "fp32", p.dtype = "f32";
  p.step_ms = 40;
  p.layers = {{"layer1.0.conv1", "conv2d", {64, 56, 56}, {"layer1.0.relu1"}, 10, 20},
              {"fc", "linear", {10}, {}, 1.25, 2.5}};
  p.loss_ms = 0.5, p.optimizer_ms = 2, p.comm_wait_ms = 0, p.data_wait_ms = 1.5, p.unattributed_ms = 2.25;
  p.origin_us = 1000;
  p.spans = {{11, Phase::Forward, 0, "layer1.0.conv1", 0.5, 10}, {12, Phase::Loss, -1, "loss", 50, 0.5},
             {13, Phase::Backward, 3, "fc", 90, 2.5}};
  return p;
}

TEST(LayerProfile, TheTableListsLayersSlowestFirstThenTheAccounting) {
  EXPECT_EQ(layer_table(fixed_profile()),
            "layer profile of steps 11-15 (5 steps) on cpu, fp32: 40.000 ms per step (means per step, slowest layers "
            "first)\n"
            "     #  layer                           type    out shape     dtype     fwd ms     bwd ms   share\n"
            "     1  layer1.0.conv1 +layer1.0.relu1  conv2d  [64, 56, 56]  f32       10.000     20.000   75.0%\n"
            "     2  fc                              linear  [10]          f32        1.250      2.500    9.4%\n"
            "  layers, forward         11.250 ms   28.1%\n"
            "  layers, backward        22.500 ms   56.2%\n"
            "  loss                     0.500 ms    1.2%\n"
            "  optimizer                2.000 ms    5.0%\n"
            "  comm wait                0.000 ms    0.0%\n"
            "  data wait                1.500 ms    3.8%\n"
            "  unattributed             2.250 ms    5.6%\n"
            "  step                    40.000 ms  100.0%");
}

TEST(LayerProfile, LayersJsonKeepsItsFixedNames) {
  const auto j = nlohmann::json::parse(layers_json(fixed_profile()));
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"device", "layers", "other", "precision", "step_ms", "steps"}));
  EXPECT_EQ(j["steps"], nlohmann::json::array({11, 15}));
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["step_ms"], 40.0);
  ASSERT_EQ(j["layers"].size(), 2u);
  EXPECT_EQ(j["layers"][0], nlohmann::json::parse(R"({"name": "layer1.0.conv1", "type": "conv2d",
      "out_shape": [64, 56, 56], "fwd_ms": 10.0, "bwd_ms": 20.0, "fused": ["layer1.0.relu1"]})"));
  EXPECT_EQ(j["layers"][1]["fused"], nlohmann::json::array());
  EXPECT_EQ(j["other"], nlohmann::json::parse(R"({"loss_ms": 0.5, "optimizer_ms": 2.0, "comm_wait_ms": 0.0,
      "data_wait_ms": 1.5, "unattributed_ms": 2.25})"));
  // Written in the documented key order.
  const std::string text = layers_json(fixed_profile());
  EXPECT_EQ(text.rfind("{\"steps\":[11,15],\"device\":\"cpu\",\"precision\":\"fp32\",\"step_ms\":40.0,\"layers\":["
                       "{\"name\":\"layer1.0.conv1\",\"type\":\"conv2d\",\"out_shape\":[64,56,56],\"fwd_ms\":10.0,",
                       0),
            0u)
      << text;
}

TEST(LayerProfile, TheTraceLaneHoldsTheSpansOfTheTraceWindow) {
  const auto ev = layer_trace_events(fixed_profile(), {12, 20}, 3);
  ASSERT_EQ(ev.size(), 2u) << "step 11 is outside the trace window";
  EXPECT_EQ(ev[0].name, "loss");
  EXPECT_EQ(ev[0].cat, "step");
  EXPECT_EQ(ev[0].lane, 3);
  EXPECT_DOUBLE_EQ(ev[0].ts_us, 1000 + 50e3);
  EXPECT_DOUBLE_EQ(ev[0].dur_us, 500);
  EXPECT_EQ(ev[1].name, "fc");
  EXPECT_EQ(ev[1].cat, "backward");
  EXPECT_TRUE(layer_trace_events(fixed_profile(), {}, 3).empty());
}

TEST(LayerProfile, AWindowWithoutAMarkSourceIsAProgrammingError) {
  EXPECT_THROW(LayerProfiler({1, 2}, nullptr, 10), DpError);
}

#ifdef DPTRAIN_HAVE_CUDA
// The real events: recorded around work on a stream with no host wait, read after; the span
// around a 256 MiB memset is longer than an empty one. Numbers are not asserted beyond order.
DP_GPU_TEST(LayerMarksGpu, EventsOnTheStreamTimeItsWorkAndAreReadAfterTheWindow) {
  cuda::CudaStream stream(0);
  constexpr size_t kBytes = size_t{256} << 20;
  cuda::DeviceBuffer buf(kBytes, stream.get());
  auto marks = cuda_event_marks(stream.get());
  marks->open(3);
  const double before = TraceRecorder::now_us();
  marks->record(0);
  CHECK_CUDA(cudaMemsetAsync(buf.data(), 1, kBytes, stream.get()));
  marks->record(1);
  marks->record(2);
  marks->record(3);  // one more than opened for: made on the spot
  const std::vector<double> t = marks->times_ms(4);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0], 0.0);
  EXPECT_GT(t[1], 0.0) << "the memset took device time";
  EXPECT_GE(t[2], t[1]);
  EXPECT_GE(t[3], t[2]);
  EXPECT_LT(t[2] - t[1], t[1] - t[0]) << "an empty span is shorter than a 256 MiB memset";
  EXPECT_GE(marks->origin_us(), before);
}
#endif

}  // namespace
}  // namespace dp::metrics
