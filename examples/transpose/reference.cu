#if defined(EVOTUNE_DTYPE_FP16)
#include <cuda_fp16.h>
typedef __half T;
__device__ float to_f(T v) { return __half2float(v); }
#else
typedef float T;
__device__ float to_f(T v) { return v; }
#endif

// out[j][i] = in[i][j], one element per thread.
extern "C" __global__ void transpose_reference(const T* in, float* out, int M, int N) {
  long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (k >= static_cast<long long>(M) * N) return;
  long long i = k / N, j = k % N;
  out[j * M + i] = to_f(in[k]);
}
