// accprobe: the accumulator-count probe kernel (docs/study.md, "The probe").
//
// One template; the compile stage (src/compile/mod.rs) appends one ACCPROBE_VARIANT(N, K, E)
// line per variant of the profile (to each of the few NVRTC programs the matrix is split
// into), so every variant is an extern "C" kernel named as the study names it: chainN_accK_effectiveE.
// The sink-isolation variants (docs/study.md, "The follow-up: sink isolation") come from
// ACCPROBE_SINK_VARIANT(N, K, E, MODE) and are named chainN_accK_effectiveE_sinkMODE.
// Variants in a context other than the base (docs/study.md, "Contexts") come from
// ACCPROBE_CONTEXT_VARIANT(NAME, N, E, MODE, S, V, WARPS, BOUNDS), named by the compile stage
// (the variant's name with the context's suffix, e.g. chain13_acc2_effective2_w16_s4);
// BOUNDS is __launch_bounds__(threads) when the context sets the block's warps, so that
// ptxas holds the kernel to the registers that occupancy leaves (it spills rather than
// the launch being refused), and empty otherwise.
//
// One loop iteration issues the N FFMAs of the chain round-robin over the E partials.
// Each warp loops until its clock64() budget is spent; lane 0 writes the warp's progress
// (iterations completed), its elapsed %globaltimer nanoseconds and the SM it ran on (%smid). After the loop the
// partials are summed (the sink) and every thread stores the sum, so nothing can be
// optimised away. The FMA operands and the budget are kernel arguments, not constants.

// Sink modes: A sums all partials after the loop and stores the sum (the documented probe);
// B stores one partial and keeps the others live behind a condition that never holds at run
// time (budget < 0); C stores every partial; D sums the partials inside every iteration into
// a running total and stores the total.
#define ACCPROBE_SINK_A 0
#define ACCPROBE_SINK_B 1
#define ACCPROBE_SINK_C 2
#define ACCPROBE_SINK_D 3

// One iteration of the measured loop: the N FFMAs of the chain round-robin over the E
// partials, one FFMA per side chain, and in sink mode D the running total. A macro rather
// than a function, so that the one-loop form compiles to the study's loop as it is written.
// ACCPROBE_SLOWDOWN (0 unless defined, e.g. by ACCPROBE_EXTRA_OPTIONS=-DACCPROBE_SLOWDOWN=1)
// adds that many dependent FFMAs to the first partial: the test-only slowdown with which
// docs/h200.md measures the gate's detection power.
#ifndef ACCPROBE_SLOWDOWN
#define ACCPROBE_SLOWDOWN 0
#endif
#define ACCPROBE_ITERATION                                                                 \
    _Pragma("unroll") for (int i = 0; i < N; ++i)                                          \
    {                                                                                      \
        acc[i % E] = fmaf(acc[i % E], a, b);                                               \
    }                                                                                      \
    _Pragma("unroll") for (int x = 0; x < ACCPROBE_SLOWDOWN; ++x)                          \
    {                                                                                      \
        acc[0] = fmaf(acc[0], a, b);                                                       \
    }                                                                                      \
    _Pragma("unroll") for (int c = 0; c < S; ++c)                                          \
    {                                                                                      \
        side[c] = fmaf(side[c], a, b);                                                     \
    }                                                                                      \
    if (SINK == ACCPROBE_SINK_D) {                                                         \
        float s = 0.0f;                                                                    \
        _Pragma("unroll") for (int e = 0; e < E; ++e)                                      \
        {                                                                                  \
            s += acc[e];                                                                   \
        }                                                                                  \
        total += s;                                                                        \
    }                                                                                      \
    ++iterations;

// Phased starts (docs/h200.md, "Phased starts"). With 4 or 8 warps a scheduler (16- and
// 32-warp contexts), and with 48 values live at 8 warps, the warps of a launch lock into one
// of several issue rates, chosen by their relative start phase, which a barrier alone does
// not fix. So such a variant's budget is cut into ACCPROBE_PHASES shares: before share p,
// after a barrier, warp w waits accprobe_phase(w, p) cycles (a fixed pseudo-random draw
// below ACCPROBE_PHASE_SPAN), runs one uncounted iteration (the loop's code, cold after the
// wait), then counts iterations until share p's deadline, (p + 1) budget / PHASES cycles
// after the first share began. Every launch, process and machine measures the same set of
// start phases, progress is their sum, and the launch lasts its budget (the waits are
// inside it). The other contexts (side chains, the sink modes) and the base context start
// with the barrier alone: they hold one rate and measure the same serially as in a wave.
#define ACCPROBE_PHASES 256
#define ACCPROBE_PHASE_SPAN 128
#define ACCPROBE_PHASED_FROM_WARPS 16

__device__ __forceinline__ long long accprobe_phase(unsigned int warp, unsigned int share)
{
    unsigned int h = warp * 0x9E3779B1u ^ (share + 0x7F4A7C15u) * 0x85EBCA77u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    h *= 0x297A2D39u;
    h ^= h >> 15;
    return (long long)(h % ACCPROBE_PHASE_SPAN);
}

// The phased loop itself, the probe's and the real reductions' (reductions.cu): PHASES_
// shares of BUDGET cycles, each after a barrier (but the first), warp WARP's wait and one
// uncounted iteration (FIRST), then counted ones (STEP) until the share's deadline. A macro
// like ACCPROBE_ITERATION, so that each kernel compiles to the loop as it is written out.
#define ACCPROBE_PHASED(BUDGET, PHASES_, WARP, FIRST, STEP)                                \
    {                                                                                      \
        const long long share = (BUDGET) / (PHASES_);                                      \
        const long long begin = clock64();                                                 \
        for (int p = 0; p < (PHASES_); ++p) {                                              \
            if (p > 0) {                                                                   \
                __syncthreads();                                                           \
            }                                                                              \
            const long long wait = accprobe_phase((WARP), p);                              \
            const long long waited = clock64();                                            \
            while (clock64() - waited < wait) {                                            \
            }                                                                              \
            FIRST                                                                          \
            const long long deadline = share * (p + 1);                                    \
            while (clock64() - begin < deadline) {                                         \
                STEP                                                                       \
            }                                                                              \
        }                                                                                  \
    }


// Context inputs, both 0 in the base context (whose code they leave as it is):
// S side chains, one FFMA each per iteration, independent of the partials and of each
// other (surrounding ILP); V values before the loop, each a volatile read of %clock
// mixed with the thread's index (so that each is a thread's own value, held in a
// register of its own, not a uniform register), which can be neither recomputed nor
// combined early: held in registers across the loop (register pressure). Both are used only after the loop, behind the
// condition that never holds at run time (budget < 0), in an order that needs each one.
template <int N, int E, int SINK, int S = 0, int V = 0, int PHASES = 0, bool PIN = false>
__device__ __forceinline__ void accprobe_chain(float a, float b, long long budget,
                                               float *__restrict__ out,
                                               unsigned long long *__restrict__ progress,
                                               unsigned long long *__restrict__ elapsed_ns,
                                               unsigned int *__restrict__ sm_ids)
{
    float acc[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
        acc[e] = b * (float)(threadIdx.x + e + 1);
    }
    float side[S > 0 ? S : 1];
#pragma unroll
    for (int c = 0; c < S; ++c) {
        side[c] = a * (float)(threadIdx.x + c + 2);
    }
    unsigned int live[V > 0 ? V : 1];
#pragma unroll
    for (int v = 0; v < V; ++v) {
        asm volatile("{\n\t.reg .u32 t;\n\tmov.u32 t, %%clock;\n\txor.b32 %0, t, %1;\n\t}"
                     : "=r"(live[v])
                     : "r"(threadIdx.x));
    }
    if (PIN) {
        // The multiplier held in a register of its own: a select on the budget's sign, which
        // ptxas can neither fold nor reload. Without it, with 48 values live at 8 warps,
        // ptxas re-reads `a` from the constant bank in every iteration (an LDC in the loop,
        // registers free), and that loop measured up to 0.7% faster serially than in a wave
        // (docs/h200.md, "Phased starts"). At 32 warps (64 registers) the pin would cost a
        // spill, so there the loop stays as ptxas writes it.
        asm volatile("{\n\t.reg .pred p;\n\tsetp.ge.s64 p, %2, 0;\n\tselp.f32 %0, %1, %3, p;\n\t}"
                     : "=f"(a)
                     : "f"(a), "l"(budget), "f"(b));
    }
    float total = 0.0f;
    // All warps of the block leave this barrier together, so the relative start phase of
    // the two warps that share a scheduler no longer depends on how the block was
    // dispatched. Without it, that phase picked one of several stable loop rates per launch
    // (56, 60 or 62 cycles per iteration for chain 7 with 7 partials on the H200): see
    // docs/h200.md, "One rate per variant".
    __syncthreads();
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    unsigned long long iterations = 0;
    if (PHASES == 0) {
        const long long start = clock64();
        while (clock64() - start < budget) {
            ACCPROBE_ITERATION
        }
    } else {
        // The budget in PHASES equal shares, each after a barrier, a wait and one uncounted
        // iteration (see "Phased starts" above).
        const unsigned int warp_in_block = threadIdx.x / 32;
        ACCPROBE_PHASED(budget, PHASES, warp_in_block, ACCPROBE_ITERATION --iterations;,
                        ACCPROBE_ITERATION)
    }
    unsigned long long t1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));

    const unsigned int thread = blockIdx.x * blockDim.x + threadIdx.x;
    if (SINK == ACCPROBE_SINK_C) {
#pragma unroll
        for (int e = 0; e < E; ++e) {
            out[thread * E + e] = acc[e];
        }
    } else if (SINK == ACCPROBE_SINK_B) {
        out[thread] = acc[0];
        if (budget < 0) {
            float rest = 0.0f;
#pragma unroll
            for (int e = 1; e < E; ++e) {
                rest += acc[e];
            }
            out[thread] = rest;
        }
    } else {
        float sink = SINK == ACCPROBE_SINK_D ? total : 0.0f;
        if (SINK == ACCPROBE_SINK_A) {
#pragma unroll
            for (int e = 0; e < E; ++e) {
                sink += acc[e];
            }
        }
        out[thread] = sink;
    }
    if ((S > 0 || V > 0) && budget < 0) {
        float kept = acc[0];
#pragma unroll
        for (int c = 0; c < S; ++c) {
            kept += side[c];
        }
#pragma unroll
        for (int v = 0; v < V; ++v) {
            kept = fmaf(kept, __uint_as_float(live[v]), 1.0f);
        }
        out[thread] = kept;
    }
    if ((threadIdx.x & 31) == 0) {
        const unsigned int warp = thread / 32;
        progress[warp] = iterations;
        elapsed_ns[warp] = t1 - t0;
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        sm_ids[warp] = smid;
    }
}

#define ACCPROBE_VARIANT(N, K, E)                                                          \
    extern "C" __global__ void chain##N##_acc##K##_effective##E(                           \
        float a, float b, long long budget, float *out, unsigned long long *progress,      \
        unsigned long long *elapsed_ns, unsigned int *sm_ids)                              \
    {                                                                                      \
        accprobe_chain<N, E, ACCPROBE_SINK_A>(a, b, budget, out, progress, elapsed_ns,     \
                                              sm_ids);                                     \
    }

#define ACCPROBE_SINK_VARIANT(N, K, E, MODE)                                               \
    extern "C" __global__ void chain##N##_acc##K##_effective##E##_sink##MODE(              \
        float a, float b, long long budget, float *out, unsigned long long *progress,      \
        unsigned long long *elapsed_ns, unsigned int *sm_ids)                              \
    {                                                                                      \
        accprobe_chain<N, E, ACCPROBE_SINK_##MODE>(a, b, budget, out, progress,            \
                                                   elapsed_ns, sm_ids);                    \
    }

#define ACCPROBE_CONTEXT_VARIANT(NAME, N, E, MODE, S, V, WARPS, BOUNDS)                          \
    extern "C" __global__ void BOUNDS NAME(float a, float b, long long budget, float *out,  \
                                           unsigned long long *progress,                   \
                                           unsigned long long *elapsed_ns,                 \
                                           unsigned int *sm_ids)                           \
    {                                                                                      \
        accprobe_chain<N, E, ACCPROBE_SINK_##MODE, S, V,                                   \
                       (WARPS >= ACCPROBE_PHASED_FROM_WARPS || V > 0 ? ACCPROBE_PHASES : 0), \
                       (V > 0 && WARPS < ACCPROBE_PHASED_FROM_WARPS)>(                     \
            a, b, budget, out, progress, elapsed_ns, sm_ids);                              \
    }
