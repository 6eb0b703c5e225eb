// Tiled transpose: a CTA reads a TILE x TILE tile of `in` with coalesced rows,
// and writes it transposed, again with coalesced rows, through shared memory.
#ifndef TILE
#define TILE 32
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8
#endif
#ifndef PAD
#define PAD 1
#endif

#if defined(EVOTUNE_DTYPE_FP16)
#include <cuda_fp16.h>
typedef __half T;
#else
typedef float T;
#endif

extern "C" __global__ void transpose(const T* __restrict__ in, T* __restrict__ out, int M, int N) {
  extern __shared__ unsigned char smem_raw[];
  T (*tile)[TILE + PAD] = reinterpret_cast<T (*)[TILE + PAD]>(smem_raw);
  int col = blockIdx.x * TILE + threadIdx.x;  // column of `in`
  int row0 = blockIdx.y * TILE;
  for (int r = threadIdx.y; r < TILE; r += BLOCK_ROWS) {
    int row = row0 + r;
    if (row < M && col < N) tile[r][threadIdx.x] = in[static_cast<long long>(row) * N + col];
  }
  __syncthreads();
  int ocol = row0 + threadIdx.x;  // column of `out` (a row of `in`)
  int orow0 = blockIdx.x * TILE;
  for (int r = threadIdx.y; r < TILE; r += BLOCK_ROWS) {
    int orow = orow0 + r;
    if (orow < N && ocol < M) out[static_cast<long long>(orow) * M + ocol] = tile[threadIdx.x][r];
  }
}
