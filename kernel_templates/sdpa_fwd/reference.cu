// Reference for sdpa_fwd and sdpa_fwd_sm90: plain fp32 softmax attention, one
// CTA per (query row, b*h), with the templates' semantics: query head h reads
// key/value head h / (H / HKV); the causal mask is aligned bottom-right (query
// i sees keys j <= i + SKV - S); a query that sees no key gets O = 0. Pass 1:
// the max of the scaled scores; then chunk by chunk: p_j = exp(s_j - max),
// l = Σ p_j, o_d = Σ p_j v_jd. A key's score is one warp's dot product (lanes
// over d).
#include "evotune_ptx.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
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
    sdpa_reference(const evotune_elem_t* Q, const evotune_elem_t* K, const evotune_elem_t* V, float* O, int B,
                        int H, int HKV, int SQ, int SKV, float scale) {
  __shared__ float q[HEAD_DIM];
  __shared__ float p[REF_CHUNK];
  __shared__ float red[REF_WARPS];
  (void)B;
  const int i = blockIdx.x;  // query row
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const size_t qrow = ((size_t)bh * SQ + i) * HEAD_DIM;
  const size_t kv_head = ((size_t)b * HKV + h / (H / HKV)) * SKV * HEAD_DIM;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int n_keys = SKV;  // keys 0..n_keys-1
  if (IS_CAUSAL) n_keys = max(0, min(SKV, i + SKV - SQ + 1));

  for (int d = tid; d < HEAD_DIM; d += REF_THREADS) q[d] = evotune_ptx::to_float(Q[qrow + d]);
  __syncthreads();

  float mx = -3.0e38f;
  for (int j = warp; j < n_keys; j += REF_WARPS)
    mx = fmaxf(mx, scale * ref_dot(q, K + kv_head + (size_t)j * HEAD_DIM, lane));
  if (lane == 0) red[warp] = mx;
  __syncthreads();
  mx = red[0];
  for (int w = 1; w < REF_WARPS; ++w) mx = fmaxf(mx, red[w]);
  __syncthreads();

  float l = 0.f;  // the same in every thread
  float acc[(HEAD_DIM + REF_THREADS - 1) / REF_THREADS];
  for (int t = 0; t < (HEAD_DIM + REF_THREADS - 1) / REF_THREADS; ++t) acc[t] = 0.f;
  for (int j0 = 0; j0 < n_keys; j0 += REF_CHUNK) {
    const int n = min(REF_CHUNK, n_keys - j0);
    for (int jj = warp; jj < n; jj += REF_WARPS) {
      const float s = scale * ref_dot(q, K + kv_head + (size_t)(j0 + jj) * HEAD_DIM, lane);
      if (lane == 0) p[jj] = expf(s - mx);
    }
    __syncthreads();
    for (int jj = 0; jj < n; ++jj) l += p[jj];
    for (int t = 0; t * REF_THREADS + tid < HEAD_DIM; ++t) {
      const int d = t * REF_THREADS + tid;
      float a = acc[t];
      for (int jj = 0; jj < n; ++jj) a += p[jj] * evotune_ptx::to_float(V[kv_head + (size_t)(j0 + jj) * HEAD_DIM + d]);
      acc[t] = a;
    }
    __syncthreads();
  }
  for (int t = 0; t * REF_THREADS + tid < HEAD_DIM; ++t) {
    const int d = t * REF_THREADS + tid;
    O[qrow + d] = n_keys > 0 ? acc[t] / l : 0.f;
  }
}
