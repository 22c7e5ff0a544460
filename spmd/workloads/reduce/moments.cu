// One pass over a 1-D float or double array: count, mean, M2 (sum of squared deviations),
// min and max, all accumulated in double whatever the input type.
//
// Each thread folds tiles of LOADS coalesced vector loads (LOADS x 4 floats or LOADS x 2
// doubles) into a running state with Chan's parallel formula; a block folds its threads with
// warp shuffles; a second one-block launch folds the block partials. No atomics: the result
// is deterministic for a given grid. NaN propagates into min and max as NumPy's does.
// Min and max stay in the input type (exact, and cheap: float compares run at 4x the
// double rate); only the sums are double. LOADS is set at compile time (-DLOADS=n).
// MIN_BLOCKS=n > 0: __launch_bounds__ asks the compiler to fit n blocks of 256 threads on an SM (fewer registers
// per thread); the host sizes the grid to the blocks that are resident at once (one wave, no tail).
//
// The variants tried beside this kernel and how they measured: docs/benchmarks.md (the reduce kernel's notes).

#ifndef LOADS
#define LOADS 8
#endif
// FAST_MINMAX=1 (the host's default): a tile's min and max by the min/max instructions (which skip NaN) and one NaN
// flag, instead of a NaN-propagating compare and select per value; fewer instructions per value, the same answers
// (tests/gpu runs both; bench/tools/fused_kernel.py measures both).
#ifndef FAST_MINMAX
#define FAST_MINMAX 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0
#endif
// ASYNC_STAGES=S > 0: a thread's rounds go to shared memory by asynchronous copies (cp.async, sm_80+), S rounds in a
// ring of which S - 1 are in flight while the thread folds the one that landed. Bytes in flight are then bounded by
// shared memory, not by registers: loaded into registers, a warp has no load in flight while it folds, and at the
// few blocks an SM its registers allow that can leave too few bytes in flight to cover a fast memory's latency at
// its bandwidth. Each thread copies and reads only its own slots, so no block-wide barrier;
// the fold's order is the registers' path's, so the same answers, bit for bit, on the same grid and loads.
// Needs blockDim.x == ASYNC_BLOCK and the ring within a block's 48 KiB of static shared memory.
#ifndef ASYNC_STAGES
#define ASYNC_STAGES 0
#endif
#define ASYNC_BLOCK 256
#if MIN_BLOCKS > 0
#define PARTIAL_BOUNDS __launch_bounds__(256, MIN_BLOCKS)
#else
#define PARTIAL_BOUNDS
#endif

struct Moments {
    double n, mean, m2, lo, hi;
};

template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a < b || a != a) ? a : b; }
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a > b || a != a) ? a : b; }

__device__ __forceinline__ Moments moments_empty() {
    Moments m;
    m.n = 0.0;
    m.mean = 0.0;
    m.m2 = 0.0;
    m.lo = __longlong_as_double(0x7ff0000000000000LL);   // +inf
    m.hi = -m.lo;
    return m;
}

// Chan, Golub & LeVeque: merge the count, mean and M2 of two disjoint sets (min and max: the first set's).
__device__ __forceinline__ Moments combine_sums(const Moments& a, const Moments& b) {
    if (b.n == 0.0) return a;
    if (a.n == 0.0) return b;
    Moments r;
    r.n = a.n + b.n;
    const double delta = b.mean - a.mean;
    const double wb = b.n / r.n;
    r.mean = a.mean + delta * wb;
    r.m2 = a.m2 + b.m2 + delta * delta * a.n * wb;
    r.lo = a.lo;
    r.hi = a.hi;
    return r;
}

// Merge the statistics of two disjoint sets.
__device__ __forceinline__ Moments combine(const Moments& a, const Moments& b) {
    Moments r = combine_sums(a, b);
    r.lo = nan_min(a.lo, b.lo);
    r.hi = nan_max(a.hi, b.hi);
    return r;
}

__device__ __forceinline__ float plain_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double plain_min(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ float plain_max(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double plain_max(double a, double b) { return fmax(a, b); }

// Min and max of values in the input type, and whether one was NaN (FAST_MINMAX: the min/max instructions, which
// skip NaN, and a flag; else a NaN-propagating compare and select).
template <typename T> struct Extremes {
    T lo, hi;
    bool nan;
};

template <typename T> __device__ __forceinline__ Extremes<T> extremes_empty() {
    Extremes<T> e;
    e.lo = (T)__longlong_as_double(0x7ff0000000000000LL);  // +inf
    e.hi = -e.lo;
    e.nan = false;
    return e;
}

template <typename T, int K> __device__ __forceinline__ void extremes_add(Extremes<T>& e, const T (&v)[K]) {
#pragma unroll
    for (int i = 0; i < K; ++i) {
#if FAST_MINMAX
        e.lo = plain_min(e.lo, v[i]);
        e.hi = plain_max(e.hi, v[i]);
        e.nan |= v[i] != v[i];
#else
        e.lo = nan_min(e.lo, v[i]);
        e.hi = nan_max(e.hi, v[i]);
#endif
    }
}

// ``m``'s min and max from ``e``; a NaN among the values made the sum, so the mean, NaN.
template <typename T> __device__ __forceinline__ void set_extremes(Moments& m, const Extremes<T>& e) {
    m.lo = (double)e.lo;
    m.hi = (double)e.hi;
    if (e.nan) m.lo = m.hi = m.mean;
}

// Count, mean and M2 of K values held in registers (two passes over registers, one over memory); min and max empty.
template <typename T, int K>
__device__ __forceinline__ Moments tile_sums(const T (&v)[K]) {
    double sum = 0.0;
#pragma unroll
    for (int i = 0; i < K; ++i) sum += (double)v[i];
    Moments m = moments_empty();
    m.n = K;
    m.mean = sum * (1.0 / K);
    double m2 = 0.0;
#pragma unroll
    for (int i = 0; i < K; ++i) {
        const double d = (double)v[i] - m.mean;
        m2 += d * d;
    }
    m.m2 = m2;
    return m;
}

// Statistics of K values held in registers.
template <typename T, int K>
__device__ __forceinline__ Moments tile_moments(const T (&v)[K]) {
    Moments m = tile_sums(v);
    Extremes<T> e = extremes_empty<T>();
    extremes_add(e, v);
    set_extremes(m, e);
    return m;
}

template <typename T> struct Vec;
template <> struct Vec<float> { typedef float4 type; enum { width = 4 }; };
template <> struct Vec<double> { typedef double2 type; enum { width = 2 }; };

__device__ __forceinline__ void unpack(const float4& v, float* out) {
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
}
__device__ __forceinline__ void unpack(const double2& v, double* out) {
    out[0] = v.x; out[1] = v.y;
}

__device__ __forceinline__ Moments shfl_down(const Moments& m, int offset) {
    Moments r;
    r.n = __shfl_down_sync(0xffffffffu, m.n, offset);
    r.mean = __shfl_down_sync(0xffffffffu, m.mean, offset);
    r.m2 = __shfl_down_sync(0xffffffffu, m.m2, offset);
    r.lo = __shfl_down_sync(0xffffffffu, m.lo, offset);
    r.hi = __shfl_down_sync(0xffffffffu, m.hi, offset);
    return r;
}

// Fold every thread's state into thread 0 (blockDim.x a multiple of 32, at most 1024).
__device__ Moments block_reduce(Moments m) {
    __shared__ Moments warp_partial[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1) m = combine(m, shfl_down(m, offset));
    if (lane == 0) warp_partial[warp] = m;
    __syncthreads();
    if (warp == 0) {
        m = (lane < (blockDim.x >> 5)) ? warp_partial[lane] : moments_empty();
        for (int offset = 16; offset > 0; offset >>= 1) m = combine(m, shfl_down(m, offset));
    }
    return m;
}

#if ASYNC_STAGES > 0
// the ring and block_reduce's 32 warp partials within the 48 KiB of static shared memory a block may have
static_assert(ASYNC_STAGES * LOADS * ASYNC_BLOCK * 16 + 32 * sizeof(Moments) <= 48 * 1024,
              "ASYNC_STAGES x LOADS rounds exceed 48 KiB");

// One 16-byte asynchronous copy from global to shared memory (cached in L2 only, as a streaming load is).
__device__ __forceinline__ void copy_async16(void* shared, const void* global) {
    const unsigned address = (unsigned)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most N of this thread's committed groups of copies are still in flight.
template <int N> __device__ __forceinline__ void copy_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

// x must be 16-byte aligned, blockDim.x 256. Writes one Moments per block into partial[blockIdx.x].
template <typename T>
__global__ void PARTIAL_BOUNDS moments_partial(const T* __restrict__ x, long long n, Moments* __restrict__ partial) {
    typedef typename Vec<T>::type V;
    const int W = Vec<T>::width;
    const long long nvec = n / W;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long gid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const V* __restrict__ xv = reinterpret_cast<const V*>(x);
    Moments acc = moments_empty();
    // Whole rounds of LOADS vectors per thread; load j of a round is coalesced across threads.
    const long long full = (nvec / (LOADS * stride)) * (LOADS * stride);
#if ASYNC_STAGES > 0
    __shared__ __align__(16) V ring[ASYNC_STAGES][LOADS][ASYNC_BLOCK];
    const long long rounds = full / (LOADS * stride);  // every thread takes the same number of whole rounds
    // Copy round k (of this thread's) into ring slot ``slot``, as one group; a group is committed even where there
    // is no round left, so that "all but the newest S - 1 groups" always means "the oldest round has landed".
    auto issue = [&](long long k, int slot) {
        if (k < rounds) {
            const V* __restrict__ from = xv + gid + k * LOADS * stride;
#pragma unroll
            for (int j = 0; j < LOADS; ++j) copy_async16(&ring[slot][j][threadIdx.x], from + j * stride);
        }
        copy_async_commit();
    };
#pragma unroll
    for (int k = 0; k < ASYNC_STAGES - 1; ++k) issue(k, k);
    int slot = 0;  // round k's slot: k % ASYNC_STAGES
#pragma unroll 1
    for (long long k = 0; k < rounds; ++k) {
        issue(k + ASYNC_STAGES - 1, slot == 0 ? ASYNC_STAGES - 1 : slot - 1);  // the slot folded last round
        copy_async_wait<ASYNC_STAGES - 1>();
        T v[LOADS * W];
#pragma unroll
        for (int j = 0; j < LOADS; ++j) unpack(ring[slot][j][threadIdx.x], v + j * W);
        acc = combine(acc, tile_moments(v));
        slot = slot + 1 == ASYNC_STAGES ? 0 : slot + 1;
    }
    copy_async_wait<0>();
#else
    for (long long base = gid; base < full; base += LOADS * stride) {
        V r[LOADS];
#pragma unroll
        for (int j = 0; j < LOADS; ++j) r[j] = xv[base + j * stride];
        T v[LOADS * W];
#pragma unroll
        for (int j = 0; j < LOADS; ++j) unpack(r[j], v + j * W);
        acc = combine(acc, tile_moments(v));
    }
#endif
    for (long long i = full + gid; i < nvec; i += stride) {  // vectors left over
        T v[W];
        unpack(xv[i], v);
        acc = combine(acc, tile_moments(v));
    }
    for (long long i = nvec * W + gid; i < n; i += stride) {  // scalars left over
        T v[1] = {x[i]};
        acc = combine(acc, tile_moments(v));
    }
    acc = block_reduce(acc);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One block: fold `count` partials into out[0..4] = count, mean, m2, min, max.
__global__ void moments_final(const Moments* __restrict__ partial, int count, double* __restrict__ out) {
    Moments acc = moments_empty();
    for (int i = threadIdx.x; i < count; i += blockDim.x) acc = combine(acc, partial[i]);
    acc = block_reduce(acc);
    if (threadIdx.x == 0) {
        out[0] = acc.n;
        out[1] = acc.mean;
        out[2] = acc.m2;
        out[3] = acc.lo;
        out[4] = acc.hi;
    }
}
