// train's fused CUDA kernels (compiled at run time by CuPy/NVRTC; see ops.DeviceOps).
__device__ __forceinline__ unsigned int mix32(unsigned int x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

// Storage types: float, double, and bfloat16 held as unsigned short (precision: bf16), so no cuda_bf16.h is
// needed under NVRTC. A kernel loads into its compute type (Acc: float for bfloat16) and stores back, rounding
// to the nearest even bfloat16 as cuBLASLt does.
template <typename S> struct Acc { typedef S type; };
template <> struct Acc<unsigned short> { typedef float type; };
__device__ __forceinline__ float ld(const float* p, long long i) { return p[i]; }
__device__ __forceinline__ double ld(const double* p, long long i) { return p[i]; }
__device__ __forceinline__ float ld(const unsigned short* p, long long i) {
    return __uint_as_float((unsigned int)p[i] << 16);
}
__device__ __forceinline__ void st(float* p, long long i, float v) { p[i] = v; }
__device__ __forceinline__ void st(double* p, long long i, double v) { p[i] = v; }
__device__ __forceinline__ unsigned short bf16(float v) {
    unsigned int u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);  // NaN stays NaN
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ void st(unsigned short* p, long long i, float v) { p[i] = bf16(v); }

// The float32 parameters as bfloat16 for the step's GEMMs (precision: bf16), once per step.
extern "C" __global__ void to_bf16(const float* w, unsigned short* out, long long n) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) out[e] = bf16(w[e]);
}

template <typename T>
__global__ void gather_rows(const T* xs, const int* ys, const int* idx, const long long* counters,
                            int per_step, int offset, int rows, int cols, int pitch, T* xb, int* yb) {
    // xb's rows are pitch elements apart (>= cols: the GEMMs' operands start rows on 16 bytes)
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)rows * cols) return;
    int i = (int)(e / cols), c = (int)(e % cols);
    long long src = idx[counters[0] * per_step + offset + i];
    xb[(long long)i * pitch + c] = xs[src * cols + c];
    if (c == 0) yb[i] = ys[src];
}

template <typename S>
__global__ void act_forward(S* z, const S* bias, int rows, int cols, float keep, typename Acc<S>::type inv_keep,
                            unsigned int seed, unsigned int salt, const long long* counters) {
    typedef typename Acc<S>::type T;
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= rows * cols) return;
    T v = ld(z, e) + ld(bias, e % cols);
    v = v > T(0) ? v : T(0);
    if (keep < 1.0f) {
        unsigned int key = mix32(seed ^ mix32((unsigned int)counters[1] ^ mix32(salt)));
        unsigned int h = mix32(key ^ (unsigned int)e);
        v = ((float)(h >> 8) * 5.9604644775390625e-08f < keep) ? v * inv_keep : T(0);
    }
    st(z, e, v);
}

template <typename S>
__global__ void act_backward(S* d, const S* a, int n, typename Acc<S>::type scale) {
    typedef typename Acc<S>::type T;
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) st(d, e, ld(a, e) > T(0) ? ld(d, e) * scale : T(0));
}

// Z: the logits (float or double, also under bf16), B: the bias, D: the logits' gradient (bf16 under bf16).
template <typename Z, typename B, typename D>
__global__ void softmax_xent(const Z* z, const B* bias, const int* y, int rows, int classes, Z scale,
                             D* dz, double* loss_acc, int* correct_acc) {
    typedef Z T;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const Z* zi = z + (long long)i * classes;
    long long row = (long long)i * classes;
    T top = zi[0] + (T)ld(bias, 0);
    int best = 0;
    for (int j = 1; j < classes; ++j) {
        T v = zi[j] + (T)ld(bias, j);
        if (v > top) { top = v; best = j; }
    }
    T total = 0;
    for (int j = 0; j < classes; ++j) total += exp(zi[j] + (T)ld(bias, j) - top);
    int label = y[i];
    loss_acc[i] += (double)(log(total) + top - (zi[label] + (T)ld(bias, label)));
    correct_acc[i] += best == label;
    for (int j = 0; j < classes; ++j)
        st(dz, row + j, (exp(zi[j] + (T)ld(bias, j) - top) / total - (j == label ? T(1) : T(0))) * scale);
}

template <typename T>
__global__ void sgd(T* w, const T* g, T* v, long long n, T lr, T momentum) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    T ve = momentum * v[e] + g[e];
    v[e] = ve;
    w[e] -= lr * ve;
}

// sgd on float4s (4 elements a thread, 16-byte loads): the step's one pass over all parameters, read and written
// at a larger share of HBM bandwidth than one float a thread (`large` at small batches is bound by it).
extern "C" __global__ void sgd_float4(float4* w, const float4* g, float4* v, long long n4, float lr, float momentum) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n4) return;
    float4 ge = g[e], ve = v[e], we = w[e];
    ve.x = momentum * ve.x + ge.x; ve.y = momentum * ve.y + ge.y;
    ve.z = momentum * ve.z + ge.z; ve.w = momentum * ve.w + ge.w;
    we.x -= lr * ve.x; we.y -= lr * ve.y; we.z -= lr * ve.z; we.w -= lr * ve.w;
    v[e] = ve;
    w[e] = we;
}

template <typename T>
__global__ void adam(T* w, const T* g, T* m, T* v, long long n, T lr, T beta1, T beta2, T eps,
                     const long long* counters) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= n) return;
    T t = (T)(counters[1] + 1);
    T ge = g[e];
    T me = beta1 * m[e] + (T(1) - beta1) * ge;
    T ve = beta2 * v[e] + (T(1) - beta2) * ge * ge;
    m[e] = me;
    v[e] = ve;
    T mhat = me / (T(1) - pow(beta1, t));
    T vhat = ve / (T(1) - pow(beta2, t));
    w[e] -= lr * mhat / (sqrt(vhat) + eps);
}

extern "C" __global__ void advance(long long* counters) {
    counters[0] += 1;
    counters[1] += 1;
}
