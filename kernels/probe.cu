// accprobe: the accumulator-count probe kernel (../shared/PROBE.md, "The probe").
//
// One template; the compile stage (src/compile.rs) appends one ACCPROBE_VARIANT(N, K, E)
// line per variant of the profile, so the whole matrix is one NVRTC program and every
// variant is an extern "C" kernel named as the study names it: chainN_accK_effectiveE.
//
// One loop iteration issues the N FFMAs of the chain round-robin over the E partials.
// Each warp loops until its clock64() budget is spent; lane 0 writes the warp's progress
// (iterations completed) and its elapsed %globaltimer nanoseconds. After the loop the
// partials are summed (the sink) and every thread stores the sum, so nothing can be
// optimised away. The FMA operands and the budget are kernel arguments, not constants.

template <int N, int E>
__device__ __forceinline__ void accprobe_chain(float a, float b, long long budget,
                                               float *__restrict__ out,
                                               unsigned long long *__restrict__ progress,
                                               unsigned long long *__restrict__ elapsed_ns)
{
    float acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        acc[e] = b * (float)(threadIdx.x + e + 1);
    }
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const long long start = clock64();
    unsigned long long iterations = 0;
    while (clock64() - start < budget) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            acc[i % E] = fmaf(acc[i % E], a, b);
        }
        ++iterations;
    }
    unsigned long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));

    float sink = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        sink += acc[e];
    }
    const unsigned int thread = blockIdx.x * blockDim.x + threadIdx.x;
    out[thread] = sink;
    if ((threadIdx.x & 31) == 0) {
        const unsigned int warp = thread / 32;
        progress[warp] = iterations;
        elapsed_ns[warp] = t1 - t0;
    }
}

#define ACCPROBE_VARIANT(N, K, E)                                                          \
    extern "C" __global__ void chain##N##_acc##K##_effective##E(                           \
        float a, float b, long long budget, float *out, unsigned long long *progress,      \
        unsigned long long *elapsed_ns)                                                    \
    {                                                                                      \
        accprobe_chain<N, E>(a, b, budget, out, progress, elapsed_ns);                     \
    }
