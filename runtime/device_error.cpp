#include "runtime/device_error.h"

#include <utility>

namespace dp {

std::string format_bytes(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
  return fmt::format("{:.1f} {} ({} bytes)", v, units[u], bytes);
}

std::string device_oom_hint(const DeviceOomInfo& info) {
  if (info.workspace)
    return "lower train.workspace_mb (the scratch one cuDNN/cuBLASLt call may use) or train.batch_size";
  return "lower train.batch_size (activations grow with it) or train.workspace_mb (the cuDNN/cuBLASLt scratch)";
}

std::string format_device_oom(const DeviceOomInfo& info) {
  std::string s = fmt::format("device out of memory on {} [{}]", info.device, info.identity);
  if (!info.where.empty()) s += " in " + info.where;
  s += ": ";
  s += info.asked > 0 ? format_bytes(info.asked) + " asked" : std::string("an allocation of unknown size failed");
  if (!info.allocation.empty()) s += " for " + info.allocation;
  if (info.total > 0) s += fmt::format(", {} free of {}", format_bytes(info.free), format_bytes(info.total));
  s += " (" + info.call;
  if (!info.source.empty()) s += " at " + info.source;
  s += "); " + device_oom_hint(info);
  if (!info.resume.empty()) s += "; " + info.resume;
  return s;
}

DeviceOutOfMemory::DeviceOutOfMemory(DeviceOomInfo info) : DpError(format_device_oom(info)), info_(std::move(info)) {}

void DeviceOutOfMemory::add_context(const std::string& where) {
  note_context(where);
  info_.where = info_.where.empty() ? where : where + ": " + info_.where;
  set_message(format_device_oom(info_));
}

void DeviceOutOfMemory::set_allocation(const std::string& allocation, bool workspace) {
  info_.allocation = info_.allocation.empty() ? allocation : allocation + " (" + info_.allocation + ")";
  info_.workspace = info_.workspace || workspace;
  set_message(format_device_oom(info_));
}

void DeviceOutOfMemory::set_resume(const std::string& resume) {
  info_.resume = resume;
  set_message(format_device_oom(info_));
}

}  // namespace dp
