// defines: DpError, the process identity used in every message, and the check-macro family
// (DP_CHECK, CHECK_SYS; CHECK_CUDA/CUDNN/CUBLAS/NCCL live in runtime/cuda/check.h).
//
// Every failure message has the same shape (one line):
//   <what failed> at <file>:<line> [rank r/N on host] : <library's own error string> (hint)
#pragma once
#include <fmt/format.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace dp {

// Who this process is, for error and log prefixes. Set once by the bootstrap (rank 0 of 1 until).
struct ProcessIdentity {
  int rank = 0;
  int world_size = 1;
  std::string host;
};
const ProcessIdentity& process_identity();
void set_process_identity(int rank, int world_size);
// "rank r/N on host"
std::string identity_string();

// The project's error. Its message can gain context on the way up (the layer that raised it, the
// allocation that failed) without losing the error's type: `catch (DpError& e) {
// e.add_context("layer 'fc' (linear), forward"); throw; }` rethrows the same object. Copies are
// cheap and never throw (the message is shared, as std::runtime_error's is).
class DpError : public std::runtime_error {
 public:
  explicit DpError(const std::string& message);
  explicit DpError(const char* message);
  const char* what() const noexcept override { return message_->c_str(); }
  // what() becomes "<where>: <what()>", and context() "<where>[: <context()>]" (outermost first).
  // Subclasses whose message has a form of its own (DeviceOutOfMemory) place it themselves.
  virtual void add_context(const std::string& where);
  // The context added so far ("" when none).
  const std::string& context() const { return *context_; }

 protected:
  void set_message(std::string message);
  // Records `where` in context() only (an override of add_context places it in the message).
  void note_context(const std::string& where);

 private:
  std::shared_ptr<const std::string> message_, context_;
};

// A user-facing error (bad config, missing file): the message is complete as given, with no
// source location, because it is about the user's input, not about our code.
class UserError : public DpError {
 public:
  using DpError::DpError;
};

[[noreturn]] void fail_check(const char* expr, const char* file, int line, const std::string& detail);
[[noreturn]] void fail_sys(const char* expr, const char* file, int line, int err);

}  // namespace dp

// DP_CHECK(cond, "fmt {}", args...): internal invariant or argument check.
#define DP_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) [[unlikely]]                                                                \
      ::dp::fail_check(#cond, __FILE__, __LINE__, ::fmt::format(__VA_ARGS__));               \
  } while (0)

// CHECK_SYS(expr): a POSIX call that returns -1 and sets errno.
#define CHECK_SYS(expr)                                                                      \
  do {                                                                                       \
    if ((expr) == -1) [[unlikely]]                                                           \
      ::dp::fail_sys(#expr, __FILE__, __LINE__, errno);                                      \
  } while (0)

// DP_THROW_USER("fmt", args...): a clear error about the user's input.
#define DP_THROW_USER(...) throw ::dp::UserError(::fmt::format(__VA_ARGS__))
