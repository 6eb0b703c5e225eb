// Reference for sdpa_fp8: plain fp32 softmax attention on the dequantized
// inputs (e4m3 decoded by cuda_fp8.h, times each tensor's descale), one CTA
// per (query row, b*h), as sdpa_fwd's reference: pass 1 the scores' max,
// pass 2 the exponentials and their sum, pass 3 each thread's output dims.
// Query head h reads key/value head h / group; causal: query i sees keys
// j <= i + SKV - S, and a query that sees none gets 0. V_TRANSPOSED=1 (the
// sdpa_fp8_sm90 option): V is stored as Vᵀ, [B, HKV, D, SKV].
#include <cuda_fp8.h>

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef IS_CAUSAL
#define IS_CAUSAL 0
#endif
#ifndef FP8_DESCALE_PER_HEAD
#define FP8_DESCALE_PER_HEAD 0  // 1: per (batch, key/value head) factors on the descales
#endif
#ifndef V_TRANSPOSED
#define V_TRANSPOSED 0
#endif

#define REF_THREADS 128
#define REF_WARPS (REF_THREADS / 32)
#define REF_CHUNK 256

__device__ __forceinline__ float dq(unsigned char b, float descale) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3))) * descale;
}

__device__ float ref_dot(const float* q, const unsigned char* k, float k_descale, int lane) {
  float acc = 0.f;
  for (int d = lane; d < HEAD_DIM; d += 32) acc += q[d] * dq(k[d], k_descale);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  return acc;
}

extern "C" __global__ void __launch_bounds__(REF_THREADS)
    sdpa_fp8_reference(const unsigned char* Q, const unsigned char* K, const unsigned char* V, float* O, int H, int S,
                       int SKV, int group, float scale, float q_descale, float k_descale, float v_descale,
                       const float* q_descales, const float* k_descales, const float* v_descales) {
  __shared__ float q[HEAD_DIM];
  __shared__ float p[REF_CHUNK];
  __shared__ float red[REF_WARPS];
  const int i = blockIdx.x;
  const size_t head = (size_t)blockIdx.y * S * HEAD_DIM;
  const int b = blockIdx.y / H, h = blockIdx.y % H;
  const int kvh = b * (H / group) + h / group;
  const size_t kv = (size_t)kvh * SKV * HEAD_DIM;
#if FP8_DESCALE_PER_HEAD
  q_descale *= q_descales[kvh];
  k_descale *= k_descales[kvh];
  v_descale *= v_descales[kvh];
#endif
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n_keys = IS_CAUSAL ? max(0, min(SKV, i + 1 + SKV - S)) : SKV;
  if (n_keys == 0) {
    for (int d = tid; d < HEAD_DIM; d += REF_THREADS) O[head + (size_t)i * HEAD_DIM + d] = 0.f;
    return;
  }

  for (int d = tid; d < HEAD_DIM; d += REF_THREADS) q[d] = dq(Q[head + (size_t)i * HEAD_DIM + d], q_descale);
  __syncthreads();

  float mx = -3.0e38f;
  for (int j = warp; j < n_keys; j += REF_WARPS)
    mx = fmaxf(mx, scale * ref_dot(q, K + kv + (size_t)j * HEAD_DIM, k_descale, lane));
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
  for (int w = 1; w < REF_WARPS; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();

  float l = 0.f;
  float acc[(HEAD_DIM + REF_THREADS - 1) / REF_THREADS];
  for (int t = 0; t < (HEAD_DIM + REF_THREADS - 1) / REF_THREADS; ++t) acc[t] = 0.f;
  for (int j0 = 0; j0 < n_keys; j0 += REF_CHUNK) {
    const int n = min(REF_CHUNK, n_keys - j0);
    for (int jj = warp; jj < n; jj += REF_WARPS) {
      const float s = scale * ref_dot(q, K + kv + (size_t)(j0 + jj) * HEAD_DIM, k_descale, lane);
      if (lane == 0) p[jj] = expf(s - mx);
    }
    __syncthreads();
    for (int jj = 0; jj < n; ++jj) l += p[jj];
    for (int t = 0; t * REF_THREADS + tid < HEAD_DIM; ++t) {
      const int d = t * REF_THREADS + tid;
      float a = acc[t];
#if V_TRANSPOSED
      const unsigned char* vt = V + kv + (size_t)d * SKV + j0;  // kv: the head's first element either way
      for (int jj = 0; jj < n; ++jj) a += p[jj] * dq(vt[jj], v_descale);
#else
      for (int jj = 0; jj < n; ++jj) a += p[jj] * dq(V[kv + (size_t)(j0 + jj) * HEAD_DIM + d], v_descale);
#endif
      acc[t] = a;
    }
    __syncthreads();
  }
  for (int t = 0; t * REF_THREADS + tid < HEAD_DIM; ++t) {
    const int d = t * REF_THREADS + tid;
    O[head + (size_t)i * HEAD_DIM + d] = acc[t] / l;
  }
}
