#include "base/error.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace dp {
namespace {
ProcessIdentity& mutable_identity() {
  static ProcessIdentity id = [] {
    ProcessIdentity p;
    char buf[256] = {0};
    if (gethostname(buf, sizeof buf - 1) == 0) p.host = buf;
    else p.host = "unknown-host";
    return p;
  }();
  return id;
}
}  // namespace

const ProcessIdentity& process_identity() { return mutable_identity(); }

void set_process_identity(int rank, int world_size) {
  mutable_identity().rank = rank;
  mutable_identity().world_size = world_size;
}

std::string identity_string() {
  const auto& id = process_identity();
  return fmt::format("rank {}/{} on {}", id.rank, id.world_size, id.host);
}

DpError::DpError(const std::string& message)
    : std::runtime_error(""), message_(std::make_shared<const std::string>(message)),
      context_(std::make_shared<const std::string>()) {}
DpError::DpError(const char* message) : DpError(std::string(message)) {}

void DpError::add_context(const std::string& where) {
  note_context(where);
  set_message(where + ": " + *message_);
}

void DpError::note_context(const std::string& where) {
  context_ = std::make_shared<const std::string>(context_->empty() ? where : where + ": " + *context_);
}

void DpError::set_message(std::string message) { message_ = std::make_shared<const std::string>(std::move(message)); }

void fail_check(const char* expr, const char* file, int line, const std::string& detail) {
  throw DpError(fmt::format("check failed: {} at {}:{} [{}]{}{}", expr, file, line, identity_string(),
                            detail.empty() ? "" : ": ", detail));
}

void fail_sys(const char* expr, const char* file, int line, int err) {
  throw DpError(fmt::format("system call failed: {} at {}:{} [{}]: {} (errno {})", expr, file, line,
                            identity_string(), std::strerror(err), err));
}

}  // namespace dp
