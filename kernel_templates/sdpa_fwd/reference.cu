// Reference for sdpa_fwd: plain fp32 softmax attention, one CTA per
// (query row, b*h). Pass 1: scores and their max; pass 2: exp and sum; pass 3:
// each thread accumulates its output dims. Scores are recomputed per pass and
// staged in shared memory one chunk of keys at a time. A key's score is one
// warp's dot product (lanes over d, coalesced), so it stays fast enough for
// S = 8192.
#include "evotune_ptx.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef IS_CAUSAL
#define IS_CAUSAL 0
#endif

#define REF_THREADS 128
#define REF_WARPS (REF_THREADS / 32)
#define REF_CHUNK 256

__device__ float ref_dot(const float* q, const evotune_elem_t* k, int lane) {
  float acc = 0.f;
  for (int d = lane; d < HEAD_DIM; d += 32) acc += q[d] * evotune_ptx::to_float(k[d]);
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  return acc;
}

extern "C" __global__ void __launch_bounds__(REF_THREADS)
    sdpa_reference(const evotune_elem_t* Q, const evotune_elem_t* K, const evotune_elem_t* V, float* O, int B, int H,
                   int S, float scale) {
  __shared__ float q[HEAD_DIM];
  __shared__ float p[REF_CHUNK];
  __shared__ float red[REF_WARPS];
  (void)B;
  (void)H;
  const int i = blockIdx.x;  // query row
  const size_t head = (size_t)blockIdx.y * S * HEAD_DIM;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int n_keys = IS_CAUSAL ? i + 1 : S;  // keys 0..n_keys-1

  for (int d = tid; d < HEAD_DIM; d += REF_THREADS) q[d] = evotune_ptx::to_float(Q[head + (size_t)i * HEAD_DIM + d]);
  __syncthreads();

  // Pass 1: max of the scaled scores.
  float mx = -3.0e38f;
  for (int j = warp; j < n_keys; j += REF_WARPS) mx = fmaxf(mx, scale * ref_dot(q, K + head + (size_t)j * HEAD_DIM, lane));
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
  for (int w = 1; w < REF_WARPS; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();

  // Passes 2 and 3, chunk by chunk: p_j = exp(s_j - max), l = Σ p_j,
  // o_d = Σ p_j v_jd.
  float l = 0.f;  // the same in every thread
  float acc[(HEAD_DIM + REF_THREADS - 1) / REF_THREADS];
  for (int t = 0; t < (HEAD_DIM + REF_THREADS - 1) / REF_THREADS; ++t) acc[t] = 0.f;
  for (int j0 = 0; j0 < n_keys; j0 += REF_CHUNK) {
    const int n = min(REF_CHUNK, n_keys - j0);
    for (int jj = warp; jj < n; jj += REF_WARPS) {
      const float s = scale * ref_dot(q, K + head + (size_t)(j0 + jj) * HEAD_DIM, lane);
      if (lane == 0) p[jj] = expf(s - mx);
    }
    __syncthreads();
    for (int jj = 0; jj < n; ++jj) l += p[jj];
    for (int t = 0; t * REF_THREADS + tid < HEAD_DIM; ++t) {
      const int d = t * REF_THREADS + tid;
      float a = acc[t];
      for (int jj = 0; jj < n; ++jj) a += p[jj] * evotune_ptx::to_float(V[head + (size_t)(j0 + jj) * HEAD_DIM + d]);
      acc[t] = a;
    }
    __syncthreads();
  }
  for (int t = 0; t * REF_THREADS + tid < HEAD_DIM; ++t) {
    const int d = t * REF_THREADS + tid;
    O[head + (size_t)i * HEAD_DIM + d] = acc[t] / l;
  }
}
