#include "kernels/cpu/blas_core.h"
#include "launch/cli.h"

int main(int argc, char** argv) {
  dp::kernels::cpu::ensure_fast_blas(argv);
  return dp::launch::run_cli(argc, argv);
}
