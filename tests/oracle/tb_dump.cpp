// tb_dump: the C++ side of tests/oracle/test_tb_events_py.py (TensorBoard's own reader).
//
//   tb_dump --write DIR    writes a fixed series of scalars with dp::metrics::TbWriter into DIR and
//                          prints what it wrote: {"path": ..., "events": [{"step", "wall_time",
//                          "scalars": [[tag, value], ...]}, ...]} (values as the float32 written)
//   tb_dump --read FILE    reads FILE with dp::metrics::read_event_file (every CRC checked) and
//                          prints its events in the same form (file_version event included)
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "launch/telemetry/tensorboard_writer.h"

namespace {

nlohmann::json to_json(const dp::metrics::Event& e) {
  nlohmann::json scalars = nlohmann::json::array();
  for (const auto& s : e.scalars) scalars.push_back({s.tag, static_cast<double>(s.value)});
  return {{"step", e.step}, {"wall_time", e.wall_time}, {"file_version", e.file_version}, {"scalars", scalars}};
}

// The series the oracle compares: several tags, irregular steps, values that are not exact
// in float32, a step beyond 2^31 and an event with three scalars.
nlohmann::json write_series(const std::string& dir) {
  dp::metrics::TbWriter tb(dir);
  nlohmann::json events = nlohmann::json::array();
  auto add = [&](int64_t step, std::vector<std::pair<std::string, double>> scalars, double wall) {
    tb.add_scalars(step, scalars, wall);
    dp::metrics::Event e{.wall_time = wall, .step = step, .file_version = {}, .scalars = {}};
    for (const auto& [tag, v] : scalars) e.scalars.push_back({tag, static_cast<float>(v)});
    events.push_back(to_json(e));
  };
  const double t0 = 1700000000.125;
  for (int64_t i = 0; i < 20; ++i) {
    const int64_t step = i * 37 + 1;
    add(step,
        {{"train/loss", 2.302585 * std::exp(-0.1 * static_cast<double>(i))},
         {"train/lr", 1e-3 * (1.0 - 0.05 * static_cast<double>(i))},
         {"perf/samples_per_s", 1234.5 + static_cast<double>(i)}},
        t0 + static_cast<double>(i) * 0.5);
    if (i % 5 == 4) add(step, {{"eval/accuracy", 0.5 + 0.02 * static_cast<double>(i)}}, t0 + static_cast<double>(i) * 0.5 + 0.25);
  }
  add(int64_t{3} << 32, {{"train/loss", 0.125}}, t0 + 100);
  return {{"path", tb.path()}, {"events", events}};
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "--write" && mode != "--read") {
    std::fprintf(stderr, "usage: tb_dump --write DIR | --read FILE\n");
    return 2;
  }
  try {
    nlohmann::json out;
    if (mode == "--write") {
      out = write_series(argv[2]);
    } else {
      out = {{"events", nlohmann::json::array()}};
      for (const auto& e : dp::metrics::read_event_file(argv[2])) out["events"].push_back(to_json(e));
    }
    std::puts(out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tb_dump: %s\n", e.what());
    return 1;
  }
}
