# Sourced by the Slurm integration tests (tests/integration/test_*.sh): the checks and the
# environment every one of them starts with. Expects fail() to be defined by the caller.

# require_slurm CMD...: root, the Slurm/munge daemons and clients, PMIx and PMI2 libraries, and
# the extra commands named; a clear failure (never a skip) naming what is missing.
require_slurm() {
  [ "$(id -u)" -eq 0 ] || fail "needs root to run slurmd and munged"
  local missing=() c
  for c in srun sinfo /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/munged munge unmunge "$@"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  ls /usr/lib/*/pmix2/lib/libpmix.so >/dev/null 2>&1 || missing+=("pmix2/lib/libpmix.so (libpmix-dev)")
  ls /usr/lib/*/libpmi2.so* >/dev/null 2>&1 || missing+=("libpmi2.so (libpmi2-0)")
  [ ${#missing[@]} -eq 0 ] || fail "Slurm/munge/PMIx packages missing: ${missing[*]}; run tools/setup.sh (it installs slurm-wlm slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libpmix-dev libpmi2-0)"
}

# clean_launch_env: nothing from an enclosing Slurm job, MPI or torchrun-style launcher, and
# no DPTRAIN_* settings, reaches the processes a test starts.
clean_launch_env() {
  local v
  for v in $(compgen -e); do
    case "$v" in
      SLURM_*|PMI_*|PMIX_*|OMPI_*|RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|DPTRAIN_*)
        unset "$v" ;;
    esac
  done
}
