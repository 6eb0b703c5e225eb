// Reference for the gemm_sm90 template: one output of C per thread, fp32
// accumulation over K in order k = 0, 1, ..., K-1, inputs read as the same
// rounded fp16/bf16 values the kernel sees. A block of 256 threads computes a
// 16 x 16 patch of C (threads numbered with n fastest) and stages 16 x 16
// pieces of A and B through shared memory so that 8192^3 takes seconds, not
// minutes; elements past the matrix edges are staged as zeros and never stored.
// GEMM_TB=1 (the problem's TB, from spec.toml [defines]): B is stored
// transposed, N rows of K elements; GEMM_TA=1 (its TA): A is, K rows of M.
#include "evotune_ptx.cuh"

#ifndef GEMM_TB
#define GEMM_TB 0
#endif
#ifndef GEMM_TA
#define GEMM_TA 0
#endif

extern "C" __global__ void __launch_bounds__(256) gemm_sm90_reference(const evotune_elem_t* A, const evotune_elem_t* B,
                                                                      float* C, int M, int N, int K) {
  __shared__ float a_s[16][16];  // a_s[row][k]
  __shared__ float b_s[16][16];  // b_s[k][col]
  const long long tiles_n = (N + 15) / 16;
  const long long tile_m = blockIdx.x / tiles_n;
  const long long tile_n = blockIdx.x - tile_m * tiles_n;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const long long m = tile_m * 16 + ty;  // this thread's output row
  const long long n = tile_n * 16 + tx;  // and column
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += 16) {
    // Thread (ty, tx) stages A[tile_m*16 + ty][k0 + tx] and B[k0 + ty][tile_n*16 + tx].
    const long long ka = k0 + tx, kb = k0 + ty;
#if GEMM_TA
    // Thread (ty, tx) stages Aᵀ[k0 + ty][tile_m*16 + tx] (M contiguous) as a_s[tx][ty].
    const long long ma = tile_m * 16 + tx;
    a_s[tx][ty] = (ma < M && kb < K) ? evotune_ptx::to_float(A[kb * M + ma]) : 0.f;
#else
    a_s[ty][tx] = (m < M && ka < K) ? evotune_ptx::to_float(A[m * K + ka]) : 0.f;
#endif
#if GEMM_TB
    // Thread (ty, tx) stages Bᵀ[tile_n*16 + ty][k0 + tx] (K contiguous) as b_s[tx][ty].
    const long long nb = tile_n * 16 + ty;
    b_s[tx][ty] = (ka < K && nb < N) ? evotune_ptx::to_float(B[nb * K + ka]) : 0.f;
#else
    b_s[ty][tx] = (kb < K && n < N) ? evotune_ptx::to_float(B[kb * N + n]) : 0.f;
#endif
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) acc += a_s[ty][kk] * b_s[kk][tx];
    __syncthreads();
  }
  if (m < M && n < N) C[m * N + n] = acc;
}
