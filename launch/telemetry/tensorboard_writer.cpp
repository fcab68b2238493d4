#include "launch/telemetry/tensorboard_writer.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "runtime/log.h"
#include "launch/telemetry/tensorboard_record.h"

namespace dp::metrics {

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

TbWriter::TbWriter(const std::string& dir, bool flush_each) : flush_each_(flush_each) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) DP_THROW_USER("cannot create TensorBoard folder '{}': {} (set run.dir to a writable folder)", dir, ec.message());
  const double now = wall_time_now();
  const std::string base =
      fmt::format("{}/events.out.tfevents.{}.{}", dir, static_cast<int64_t>(now), process_identity().host);
  path_ = base;
  // "x": fail if it exists (C11 exclusive mode), so two writers never share a file.
  for (int k = 1; (f_ = std::fopen(path_.c_str(), "wbx")) == nullptr; ++k) {
    if (errno != EEXIST || k > 1000)
      DP_THROW_USER("cannot create TensorBoard event file '{}': {} (set run.dir to a writable folder)", path_,
                    std::strerror(errno));
    path_ = fmt::format("{}.{}", base, k);
  }
  write_event(Event{.wall_time = now, .step = 0, .file_version = kTbFileVersion, .scalars = {}});
}

TbWriter::~TbWriter() {
  if (f_ && std::fclose(f_) != 0)
    log::get("metrics")->warn("closing TensorBoard event file '{}': {}", path_, std::strerror(errno));
}

void TbWriter::write_event(const Event& e) {
  const std::string rec = frame_record(encode_event(e));
  if (std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size())
    throw DpError(fmt::format("writing TensorBoard event file '{}' [{}]: {}", path_, identity_string(),
                              std::strerror(errno)));
  if (flush_each_) flush();
}

void TbWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars,
                           double wall_time) {
  Event e{.wall_time = wall_time < 0 ? wall_time_now() : wall_time, .step = step, .file_version = {}, .scalars = {}};
  for (const auto& [tag, v] : scalars) e.scalars.push_back({tag, static_cast<float>(v)});
  write_event(e);
}

void TbWriter::flush() {
  if (std::fflush(f_) != 0)
    throw DpError(fmt::format("flushing TensorBoard event file '{}' [{}]: {}", path_, identity_string(),
                              std::strerror(errno)));
}

std::vector<Event> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) DP_THROW_USER("cannot read TensorBoard event file '{}': {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::vector<Event> events;
  const auto records = read_records(bytes, path);
  for (size_t i = 0; i < records.size(); ++i)
    events.push_back(decode_event(records[i], fmt::format("{}: record {}", path, i)));
  if (events.empty() || events[0].file_version.rfind("brain.Event:", 0) != 0)
    throw DpError(fmt::format("{}: not a TensorBoard event file: the first record has no file_version "
                              "\"brain.Event:<n>\" (found \"{}\")",
                              path, events.empty() ? "" : events[0].file_version));
  return events;
}

}  // namespace dp::metrics
