// train's fused CUDA kernels (compiled at run time by CuPy/NVRTC; see ops.DeviceOps).
__device__ __forceinline__ unsigned int mix32(unsigned int x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

template <typename T>
__global__ void gather_rows(const T* xs, const int* ys, const int* idx, const long long* counters,
                            int per_step, int offset, int rows, int cols, T* xb, int* yb) {
    long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (long long)rows * cols) return;
    int i = (int)(e / cols), c = (int)(e % cols);
    long long src = idx[counters[0] * per_step + offset + i];
    xb[e] = xs[src * cols + c];
    if (c == 0) yb[i] = ys[src];
}

template <typename T>
__global__ void act_forward(T* z, const T* bias, int rows, int cols, float keep, T inv_keep,
                            unsigned int seed, unsigned int salt, const long long* counters) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= rows * cols) return;
    T v = z[e] + bias[e % cols];
    v = v > T(0) ? v : T(0);
    if (keep < 1.0f) {
        unsigned int key = mix32(seed ^ mix32((unsigned int)counters[1] ^ mix32(salt)));
        unsigned int h = mix32(key ^ (unsigned int)e);
        v = ((float)(h >> 8) * 5.9604644775390625e-08f < keep) ? v * inv_keep : T(0);
    }
    z[e] = v;
}

template <typename T>
__global__ void act_backward(T* d, const T* a, int n, T scale) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) d[e] = a[e] > T(0) ? d[e] * scale : T(0);
}

template <typename T>
__global__ void softmax_xent(const T* z, const T* bias, const int* y, int rows, int classes, T scale,
                             T* dz, double* loss_acc, int* correct_acc) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const T* zi = z + (long long)i * classes;
    T* di = dz + (long long)i * classes;
    T top = zi[0] + bias[0];
    int best = 0;
    for (int j = 1; j < classes; ++j) {
        T v = zi[j] + bias[j];
        if (v > top) { top = v; best = j; }
    }
    T total = 0;
    for (int j = 0; j < classes; ++j) total += exp(zi[j] + bias[j] - top);
    int label = y[i];
    loss_acc[i] += (double)(log(total) + top - (zi[label] + bias[label]));
    correct_acc[i] += best == label;
    for (int j = 0; j < classes; ++j)
        di[j] = (exp(zi[j] + bias[j] - top) / total - (j == label ? T(1) : T(0))) * scale;
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
