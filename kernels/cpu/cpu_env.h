// defines: ensure_cpu_env, the environment the CPU libraries read once, when they load, set before
// they start by one re-exec of the program: OpenBLAS's kernels (OPENBLAS_CORETYPE, blas_core.h)
// and OpenMP's wait policy (OMP_WAIT_POLICY).
//
// Wait policy: libgomp's default lets a thread that waits (at a barrier, for the next parallel
// region) spin for up to 300000 iterations before it sleeps. When the machine has more runnable
// threads than cores (other ranks, other jobs, a CI machine), the spinning thread burns the time
// slice that the thread it waits for needs. oneDNN's Winograd kernels meet at many barriers: at
// load 8 on 2 cores, with 2 threads, a 64-channel 56x56 layer's three passes took 44-78 ms with the default
// spin, and 17-20 ms with passive waits (docs/cpu-performance.md). So dptrain waits passively
// unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set: theirs stands).
#pragma once

namespace dp::kernels::cpu {

// The OMP_WAIT_POLICY to set ("passive"), or nullptr to leave the user's choice (pure; tested).
const char* default_omp_wait_policy(const char* omp_wait_policy, const char* gomp_spincount);

// Sets what the libraries should have read (OPENBLAS_CORETYPE when OpenBLAS fell back to a generic
// core on an AVX2/AVX-512 CPU, OMP_WAIT_POLICY as above) and, if anything changed, re-executes
// this program with the same arguments and pid (once: the second run finds them set). Call first
// in main, before any thread starts.
void ensure_cpu_env(char** argv);

}  // namespace dp::kernels::cpu
