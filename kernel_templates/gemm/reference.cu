// Reference for the gemm template: one thread per element of C, fp32
// accumulation over K in order, inputs read as the same rounded fp16/bf16
// values the kernel sees. Threads are numbered with n fastest, so a warp
// reads 32 consecutive elements of a row of B and one (broadcast) element of A.
// GEMM_TB=1 (the problem's TB, from spec.toml [defines]): B is stored
// transposed, N rows of K elements; GEMM_TA=1 (its TA): A is, K rows of M.
#include "evotune_ptx.cuh"

#ifndef GEMM_TB
#define GEMM_TB 0
#endif
#ifndef GEMM_TA
#define GEMM_TA 0
#endif

extern "C" __global__ void gemm_reference(const evotune_elem_t* A, const evotune_elem_t* B, float* C, int M, int N,
                                          int K) {
  const long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (long long)M * N) return;
  const long long m = idx / N;
  const long long n = idx - m * N;
#if GEMM_TA
  const evotune_elem_t* a = A + m;  // column m of Aᵀ's rows
  const long long a_step = M;
#else
  const evotune_elem_t* a = A + m * K;
  const long long a_step = 1;
#endif
#if GEMM_TB
  const evotune_elem_t* b = B + n * K;  // Bᵀ's row n
  const long long b_step = 1;
#else
  const evotune_elem_t* b = B + n;
  const long long b_step = N;
#endif
  float acc = 0.f;
  for (int k = 0; k < K; ++k) acc += evotune_ptx::to_float(a[k * a_step]) * evotune_ptx::to_float(b[k * b_step]);
  C[idx] = acc;
}
