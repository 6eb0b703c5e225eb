// Device helpers shared by the built-in templates: the element type chosen by
// the tuner's dtype macro, cp.async with zero-fill, ldmatrix and mma.sync.
// Self-contained (no CUDA headers beyond fp16/bf16), so a template compiles the
// same under NVRTC and under nvcc in a user's program.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#if defined(EVOTUNE_DTYPE_BF16)
typedef __nv_bfloat16 evotune_elem_t;
#define EVOTUNE_MMA_TYPE "bf16"
#else
typedef __half evotune_elem_t;
#define EVOTUNE_MMA_TYPE "f16"
#endif

namespace evotune_ptx {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16-byte global → shared copy. With `valid` false the 16 bytes are zero-filled
// and global memory is not read (src may point anywhere, e.g. the base).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  unsigned src_bytes = valid ? 16u : 0u;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
}

// Partial copy: the first `bytes` (0..16) are read, the rest zero-filled.
// cp.async.ca permits 4/8/16 byte transfers; `size` is the transfer width.
template <int SIZE>
__device__ __forceinline__ void cp_async_ca(void* smem, const void* gmem, unsigned bytes) {
  static_assert(SIZE == 4 || SIZE == 8 || SIZE == 16, "cp.async size");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(smem)), "l"(gmem), "n"(SIZE),
               "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::); }

// ldmatrix: four 8x8 b16 matrices; lane i supplies the row address of matrix
// i/8, row i%8.
__device__ __forceinline__ void ldmatrix_x4(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                            const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(smem)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3,
                                                  const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(smem)));
}

__device__ __forceinline__ void ldmatrix_x2(unsigned& r0, unsigned& r1, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(smem)));
}

__device__ __forceinline__ void ldmatrix_x2_trans(unsigned& r0, unsigned& r1, const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r0), "=r"(r1)
               : "r"(smem_addr(smem)));
}

// D = A·B + D for one m16n8k16 tile, fp32 accumulators, A/B in the element
// type selected by the dtype macro. Fragment layouts are PTX's
// (mma.m16n8k16, .row.col).
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." EVOTUNE_MMA_TYPE "." EVOTUNE_MMA_TYPE
               ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Two floats packed into one register of two elements (low half = x).
__device__ __forceinline__ unsigned pack2(float x, float y) {
#if defined(EVOTUNE_DTYPE_BF16)
  __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
#else
  __half2 v = __floats2half2_rn(x, y);
#endif
  return *reinterpret_cast<unsigned*>(&v);
}

__device__ __forceinline__ evotune_elem_t from_float(float x) {
#if defined(EVOTUNE_DTYPE_BF16)
  return __float2bfloat16_rn(x);
#else
  return __float2half_rn(x);
#endif
}

__device__ __forceinline__ float to_float(evotune_elem_t x) {
#if defined(EVOTUNE_DTYPE_BF16)
  return __bfloat162float(x);
#else
  return __half2float(x);
#endif
}

// Named barriers (ids 1..15; 0 is __syncthreads): producers arrive, consumers sync.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace evotune_ptx
