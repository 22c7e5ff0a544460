// Probes for the floor under spmd's fused moments kernel (spmd/workloads/reduce/moments.cu) on float32 data: the
// same grid, block and loads, each doing less of its work per value, so what each piece costs in read rate shows.
//   WORK=0: a float32 sum (what CuPy's sum does)
//   WORK=1: a float64 sum (each value converted, then added in double)
//   WORK=2: float64 sum and sum of squares (the moments' arithmetic without the tile's mean)
//   WORK=3: WORK=2 and min, max and a NaN flag in float32 (every input the moments read, none of Chan's merges)
// LOADS independent accumulators per thread (one per load of a round), so no chain of dependent adds is longer
// than the moments kernel's; each thread writes one value so nothing is optimised away. Whole rounds only: the
// host passes a multiple of LOADS x grid x block vectors.

#ifndef WORK
#define WORK 0
#endif
#ifndef LOADS
#define LOADS 4
#endif

extern "C" __global__ void floor_probe(const float4* __restrict__ x, long long nvec, double* __restrict__ out) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float fs[LOADS];
    double s[LOADS], q[LOADS];
    float lo = __int_as_float(0x7f800000), hi = -lo;
    bool nan = false;
#pragma unroll
    for (int j = 0; j < LOADS; ++j) {
        fs[j] = 0.0f;
        s[j] = 0.0;
        q[j] = 0.0;
    }
    for (long long base = gid; base < nvec; base += LOADS * stride) {
        float4 r[LOADS];
#pragma unroll
        for (int j = 0; j < LOADS; ++j) r[j] = x[base + j * stride];
#pragma unroll
        for (int j = 0; j < LOADS; ++j) {
            const float v[4] = {r[j].x, r[j].y, r[j].z, r[j].w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#if WORK == 0
                fs[j] += v[i];
#else
                const double d = (double)v[i];
                s[j] += d;
#endif
#if WORK >= 2
                q[j] = fma(d, d, q[j]);
#endif
#if WORK >= 3
                lo = fminf(lo, v[i]);
                hi = fmaxf(hi, v[i]);
                nan |= v[i] != v[i];
#endif
            }
        }
    }
    double total = (double)lo + (double)hi + (double)nan;
#pragma unroll
    for (int j = 0; j < LOADS; ++j) total += (double)fs[j] + s[j] + q[j];
    out[gid] = total;
}
