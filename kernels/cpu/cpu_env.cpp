#include "kernels/cpu/cpu_env.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/blas_core.h"

namespace dp::kernels::cpu {

const char* default_gomp_spincount(const char* omp_wait_policy, const char* gomp_spincount) {
  if (omp_wait_policy != nullptr || gomp_spincount != nullptr) return nullptr;
  return "10000";
}

// The kernel names a process after the file it executed, so the re-exec through /proc/self/exe
// would show as "exe" in ps, top and /proc/<pid>/comm (and pkill dptrain would miss it): give it
// back its program's name, argv[0]'s last component (the kernel keeps 15 bytes of it).
void keep_program_name(const char* argv0) {
  if (argv0 == nullptr) return;
  const std::string path(argv0);
  const std::string name = path.substr(path.find_last_of('/') + 1);
  if (!name.empty()) prctl(PR_SET_NAME, name.c_str(), 0, 0, 0);
}

void ensure_cpu_env(char** argv) {
  keep_program_name(argv[0]);
  bool changed = false;
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {  // else the user's (or our earlier) choice
    const std::string core = preferred_openblas_core(openblas_core(), cpu_features());
    if (!core.empty() && setenv("OPENBLAS_CORETYPE", core.c_str(), 1) == 0) changed = true;
  }
  const char* spin = default_gomp_spincount(std::getenv("OMP_WAIT_POLICY"), std::getenv("GOMP_SPINCOUNT"));
  if (spin != nullptr && setenv("GOMP_SPINCOUNT", spin, 1) == 0) changed = true;
  if (changed) execv("/proc/self/exe", argv);
  // Nothing to change, or exec failed (no /proc?): carry on with what the libraries chose.
}

}  // namespace dp::kernels::cpu
