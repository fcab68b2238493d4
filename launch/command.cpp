#include "launch/command.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace dp::launch {

CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    r.output = std::strerror(errno);
    return r;
  }
  r.started = true;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) r.output += buf;
  const int status = ::pclose(p);
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

}  // namespace dp::launch
