// accprobe: real accumulations beside the probe (docs/study.md, "Real reductions").
//
// Five loops people write, each with its accumulator split K ways, timed as the probe is
// (one block on one SM, a clock64() budget, lane 0 of each warp writes its iterations, its
// %globaltimer nanoseconds and its SM). This file is compiled after probe.cu, in the same
// NVRTC program, and uses its phased loop (ACCPROBE_PHASED, accprobe_phase) in every
// context, the base one too: unphased, a latency-bound split (GEMV at K = 1 to 4, dot,
// softmax and block reduction at K = 2) locks into one of several rates per process
// (docs/study.md, "Real reductions beside the probe", gives the figures). The compile stage appends one
// ACCPROBE_REDUCTION_VARIANT(NAME, KERNEL, E, WARPS, BOUNDS) line per variant, named
// `kernel_accK` plus the context's suffix (`dot_acc4_w16`).
//
// One iteration handles ACCPROBE_REDUCTION_ITEMS elements per thread (a warp reads them as
// ACCPROBE_REDUCTION_ITEMS coalesced rows of 32): element j of the iteration goes to
// partial j % E. Every input is written by the kernel itself before the barrier, from the
// kernel arguments and the thread's index, so nothing is copied to the GPU and the compiler
// can fold nothing:
//   dot          x[i] * w[i] summed, x read from shared memory (a warp-uniform 128-bit
//                load), w the thread's own values in registers (LDS, FFMA);
//   gemv         one matrix row per warp read from global memory through L2 (LDG.CG,
//                FFMA with the vector's element from shared memory); the matrix is
//                ACCPROBE_GEMV_ROWS rows of ACCPROBE_ROW floats (256 KiB), L2-resident;
//   softmax      the denominator: exp(x[i] - m) summed (FFMA, MUFU.EX2, FADD);
//   layernorm    the mean and the variance in one pass: x[i] and x[i] * x[i] summed, two
//                accumulators per element (FADD, FFMA);
//   blockreduce  a block reduction's per-thread stage as CUB's BlockReduce runs it with
//                ITEMS items per thread: the items reduced into E partials, the partials
//                combined, then a warp-shuffle tree (5 SHFL.BFLY + FADD) per iteration.
// The policy sees each as a chain of ACCPROBE_REDUCTION_ITEMS dependent accumulations per
// iteration when K = 1 (layernorm: two such chains).

#define ACCPROBE_REDUCTION_ITEMS 16
// A row of the shared vectors and of the matrix: 2048 floats, 4 iterations of a warp's
// 16 x 32 elements, so an iteration's offset into it is (iteration % 4) * 512 and every
// load's address is that base plus a constant.
#define ACCPROBE_ROW 2048
#define ACCPROBE_ROW_STEP (ACCPROBE_REDUCTION_ITEMS * 32)
#define ACCPROBE_GEMV_ROWS 32

#define ACCPROBE_DOT 0
#define ACCPROBE_GEMV 1
#define ACCPROBE_SOFTMAX 2
#define ACCPROBE_LAYERNORM 3
#define ACCPROBE_BLOCKREDUCE 4

__device__ float4 accprobe_matrix[ACCPROBE_GEMV_ROWS * ACCPROBE_ROW / 4];

// One iteration: ACCPROBE_REDUCTION_ITEMS elements per thread, read as 128-bit vectors (as
// such loops are written), element j into partial j % E. `base` is the iteration's first
// float4 of the lane's row; `q` is the warp-uniform float4 of the dot's shared vector.
template <int KERNEL, int E>
__device__ __forceinline__ void accprobe_reduction_step(const float4 *__restrict__ x,
                                                        const float4 *__restrict__ row,
                                                        const float *__restrict__ w,
                                                        unsigned int base, unsigned int q,
                                                        float m, float *__restrict__ acc,
                                                        float *__restrict__ acc2, float &total)
{
#pragma unroll
    for (int j = 0; j < ACCPROBE_REDUCTION_ITEMS / 4; ++j) {
        float4 v;
        if (KERNEL == ACCPROBE_DOT) {
            v = x[q + j];
        } else if (KERNEL == ACCPROBE_GEMV) {
            v = __ldcg(row + base + j * 32);
        } else {
            v = x[base + j * 32];
        }
        const float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int k = (4 * j + c) % E;
            if (KERNEL == ACCPROBE_DOT) {
                acc[k] = fmaf(e[c], w[4 * j + c], acc[k]);
            } else if (KERNEL == ACCPROBE_GEMV) {
                acc[k] = fmaf(e[c], w[4 * j + c], acc[k]);
            } else if (KERNEL == ACCPROBE_SOFTMAX) {
                acc[k] += __expf(e[c] - m);
            } else if (KERNEL == ACCPROBE_LAYERNORM) {
                acc[k] += e[c];
                acc2[k] = fmaf(e[c], e[c], acc2[k]);
            } else {
                acc[k] += e[c];
            }
        }
    }
    if (KERNEL == ACCPROBE_BLOCKREDUCE) {
        float s = acc[0];
#pragma unroll
        for (int k = 1; k < E; ++k) {
            s += acc[k];
            acc[k] = 0.0f;
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) {
            s += __shfl_xor_sync(0xffffffffu, s, offset);
        }
        total += s;
        acc[0] = 0.0f;
    }
}

template <int KERNEL, int E>
__device__ __forceinline__ void accprobe_reduction(float a, float b, long long budget,
                                                   float *__restrict__ out,
                                                   unsigned long long *__restrict__ progress,
                                                   unsigned long long *__restrict__ elapsed_ns,
                                                   unsigned int *__restrict__ sm_ids)
{
    __shared__ float4 x[ACCPROBE_ROW / 4];
    const unsigned int lane = threadIdx.x & 31;
    const unsigned int warp_in_block = threadIdx.x / 32;
    for (unsigned int i = threadIdx.x; i < ACCPROBE_ROW / 4; i += blockDim.x) {
        x[i] = make_float4(a * (float)((4 * i) % 61) * (1.0f / 64.0f),
                           a * (float)((4 * i + 1) % 61) * (1.0f / 64.0f),
                           a * (float)((4 * i + 2) % 61) * (1.0f / 64.0f),
                           a * (float)((4 * i + 3) % 61) * (1.0f / 64.0f));
    }
    const unsigned int my_row = warp_in_block % ACCPROBE_GEMV_ROWS;
    const float4 *row = accprobe_matrix + my_row * (ACCPROBE_ROW / 4);
    if (KERNEL == ACCPROBE_GEMV) {
        // Every block writes the rows its warps read (the same values whichever block
        // writes them), then makes them visible before it reads them back.
        for (unsigned int i = lane; i < ACCPROBE_ROW / 4; i += 32) {
            const float f = b * (float)((i + my_row) % 37 + 1);
            accprobe_matrix[my_row * (ACCPROBE_ROW / 4) + i] = make_float4(f, f, f, f);
        }
        __threadfence();
    }
    // The dot's and the GEMV's other operand: a thread's own values, held in registers.
    float w[KERNEL == ACCPROBE_DOT || KERNEL == ACCPROBE_GEMV ? ACCPROBE_REDUCTION_ITEMS : 1];
#pragma unroll
    for (int j = 0; j < (KERNEL == ACCPROBE_DOT || KERNEL == ACCPROBE_GEMV ? ACCPROBE_REDUCTION_ITEMS : 1); ++j) {
        w[j] = b * (float)(threadIdx.x % 29 + j + 1);
    }
    const float m = a;
    float acc[E];
    float acc2[KERNEL == ACCPROBE_LAYERNORM ? E : 1];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        acc[e] = 0.0f;
        acc2[KERNEL == ACCPROBE_LAYERNORM ? e : 0] = 0.0f;
    }
    float total = 0.0f;
    __syncthreads();
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    unsigned long long iterations = 0;
    // Where iteration `it` reads: the lane's float4 in its quarter of the row, and the
    // dot's warp-uniform float4 (128 positions of 4 in the shared vector).
#define ACCPROBE_REDUCTION_AT(it)                                                          \
    accprobe_reduction_step<KERNEL, E>(x, row, w, (unsigned int)((it) & 3) * 128 + lane,  \
                                       (unsigned int)((it) & 127) * 4, m, acc, acc2, total)
    // Phased starts, as the probe's (probe.cu, "Phased starts").
    ACCPROBE_PHASED(budget, ACCPROBE_PHASES, warp_in_block, ACCPROBE_REDUCTION_AT(iterations);,
                    ACCPROBE_REDUCTION_AT(iterations); ++iterations;)
#undef ACCPROBE_REDUCTION_AT
    unsigned long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));

    float sink = total;
#pragma unroll
    for (int e = 0; e < E; ++e) {
        sink += acc[e];
        if (KERNEL == ACCPROBE_LAYERNORM) {
            sink += acc2[e];
        }
    }
    const unsigned int thread = blockIdx.x * blockDim.x + threadIdx.x;
    out[thread] = sink;
    if (lane == 0) {
        const unsigned int warp = thread / 32;
        progress[warp] = iterations;
        elapsed_ns[warp] = t1 - t0;
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        sm_ids[warp] = smid;
    }
}

#define ACCPROBE_REDUCTION_VARIANT(NAME, KERNEL, E, WARPS, BOUNDS)                         \
    extern "C" __global__ void BOUNDS NAME(float a, float b, long long budget, float *out,  \
                                           unsigned long long *progress,                   \
                                           unsigned long long *elapsed_ns,                 \
                                           unsigned int *sm_ids)                           \
    {                                                                                      \
        accprobe_reduction<ACCPROBE_##KERNEL, E>(a, b, budget, out, progress, elapsed_ns,  \
                                                 sm_ids);                                  \
    }
