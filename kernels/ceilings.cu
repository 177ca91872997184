// accprobe: the ceilings microbenchmark (docs/profiles.md, "Onboarding a new GPU").
//
// Two kernels, each timing itself with clock64(), compiled by NVRTC for the GPU at hand
// like kernels/probe.cu (src/measure/ceilings.rs launches them):
//
// - ffma_latency: one warp runs one long chain of dependent FFMAs (each reads the result
//   of the one before), CEILINGS_CHAIN per loop iteration, so the loop's own instructions
//   overlap the chain. Cycles per FFMA = elapsed cycles / FFMAs: the dependent latency.
// - ffma_issue: a block of many warps on one SM, each thread with CEILINGS_ILP independent
//   accumulators, so every scheduler always has an FFMA ready. Warp FFMAs per cycle for
//   the whole SM = warps x FFMAs per warp / (last end - first start): the issue rate, one
//   warp instruction per cycle per scheduler.
//
// The operands and the iteration count are kernel arguments and every thread stores its
// result, so nothing can be folded or optimised away.

#define CEILINGS_CHAIN 256
#define CEILINGS_ILP 8
#define CEILINGS_STEPS 32

extern "C" __global__ void ffma_latency(float a, float b, int iterations,
                                        float *__restrict__ out,
                                        long long *__restrict__ cycles)
{
    float x = b * (float)(threadIdx.x + 1);
    __syncwarp();
    const long long start = clock64();
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int j = 0; j < CEILINGS_CHAIN; ++j) {
            x = fmaf(x, a, b);
        }
    }
    const long long end = clock64();
    out[threadIdx.x] = x;
    if (threadIdx.x == 0) {
        cycles[0] = end - start;
    }
}

// starts[w] and ends[w]: warp w's clock64() before and after its loop (all warps of the
// block are on one SM, whose clock they share).
extern "C" __global__ void ffma_issue(float a, float b, int iterations,
                                      float *__restrict__ out,
                                      long long *__restrict__ starts,
                                      long long *__restrict__ ends)
{
    float acc[CEILINGS_ILP];
#pragma unroll
    for (int k = 0; k < CEILINGS_ILP; ++k) {
        acc[k] = b * (float)(threadIdx.x + k + 1);
    }
    __syncthreads();
    const long long start = clock64();
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int j = 0; j < CEILINGS_STEPS; ++j) {
#pragma unroll
            for (int k = 0; k < CEILINGS_ILP; ++k) {
                acc[k] = fmaf(acc[k], a, b);
            }
        }
    }
    const long long end = clock64();
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < CEILINGS_ILP; ++k) {
        sum += acc[k];
    }
    out[blockDim.x * blockIdx.x + threadIdx.x] = sum;
    if (threadIdx.x % 32 == 0) {
        starts[threadIdx.x / 32] = start;
        ends[threadIdx.x / 32] = end;
    }
}
