// defines: ensure_cpu_env, the environment the CPU libraries read once, when they load, set before
// they start by one re-exec of the program: OpenBLAS's kernels (OPENBLAS_CORETYPE, blas_core.h)
// and how long OpenMP's threads spin before they sleep (GOMP_SPINCOUNT).
//
// Wait policy: libgomp's default lets a thread that waits (at a barrier, for the next parallel
// region) spin for up to 300000 iterations before it sleeps. When the machine has more runnable
// threads than cores (other ranks, other jobs, a CI machine), the spinning thread burns the time
// slice that the thread it waits for needs. oneDNN's Winograd kernels meet at many barriers: at
// load 8 on 2 cores, with 2 threads, a 64-channel 56x56 layer's forward took 44 ms with the default
// spin, 20 ms with GOMP_SPINCOUNT=10000 and 19 ms with passive waits; on the quiet machine 10000
// spins cost nothing measurable (CNN and ResNet-50 at 2 threads, within 2 %), passive waits 3-7 %
// (docs/cpu-performance.md). So dptrain spins 10000 times unless the user chose (OMP_WAIT_POLICY
// or GOMP_SPINCOUNT set: theirs stands).
#pragma once

namespace dp::kernels::cpu {

// The GOMP_SPINCOUNT to set ("10000"), or nullptr to leave the user's choice (pure; tested).
const char* default_gomp_spincount(const char* omp_wait_policy, const char* gomp_spincount);

// Sets what the libraries should have read (OPENBLAS_CORETYPE when OpenBLAS fell back to a generic
// core on an AVX2/AVX-512 CPU, GOMP_SPINCOUNT as above) and, if anything changed, re-executes
// this program with the same arguments and pid (once: the second run finds them set); the process
// keeps its program's name (argv[0]'s) through it, not "exe". Call first in main, before any
// thread starts.
void ensure_cpu_env(char** argv);

}  // namespace dp::kernels::cpu
