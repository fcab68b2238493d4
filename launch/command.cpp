#include "launch/command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace dp::launch {
namespace {

// Only async-signal-safe calls between fork and exec. The child gets an empty signal mask: ours
// blocks the signals the signal thread takes (launch/signal_thread.h), and a mask survives exec.
[[noreturn]] void exec_shell(const char* cmd, int out_w) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(out_w, 1);
  ::execl("/bin/sh", "sh", "-c", cmd, static_cast<char*>(nullptr));
  ::_exit(127);
}

}  // namespace

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.output = std::strerror(errno);
    return r;
  }
  const pid_t pid = ::fork();
  if (pid == 0) exec_shell(cmd.c_str(), fds[1]);  // dup2 clears O_CLOEXEC on fd 1
  ::close(fds[1]);
  if (pid < 0) {
    r.output = std::strerror(errno);
    ::close(fds[0]);
    return r;
  }
  r.started = true;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n > 0) r.output.append(buf, static_cast<size_t>(n));
    else if (errno != EINTR) break;
  }
  ::close(fds[0]);
  int status = 0;
  pid_t w;
  while ((w = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (w == pid && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (w == pid && WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace dp::launch
