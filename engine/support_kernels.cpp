#include "engine/support_kernels.hpp"

namespace evotune {

// Element codes follow ElemType: elem=0 (never seen here), f16=1, bf16=2,
// f32=3, i32=4, u32=5, u8=6, e4m3=7, e5m2=8. Init codes follow InitKind:
// normal=0, uniform=1, zero=2, ones=3. The 8-bit floats round to nearest and
// saturate at their largest finite value (±448, ±57344), as a quantizer
// would; their poison is a NaN (0xFF, 0xFE), so a kernel that writes NaN
// there counts as not having written.
const char* support_kernels_source() {
  return R"cuda(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__device__ __forceinline__ float unit_float(unsigned long long h) {  // (0, 1]
  return ((h >> 40) + 1) * (1.0f / 16777216.0f);
}

// Unsigned buffers get random bits for normal/uniform, and exactly 0 or 1
// for zero/ones (counters and flags must start at zero).
__device__ __forceinline__ void store_elem(void* p, long long i, int elem, int init, float v, unsigned long long h) {
  const bool random_bits = init == 0 || init == 1;
  switch (elem) {
    case 1: reinterpret_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case 2: reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    case 3: reinterpret_cast<float*>(p)[i] = v; break;
    case 4: reinterpret_cast<int*>(p)[i] = __float2int_rn(v); break;
    case 5: reinterpret_cast<unsigned*>(p)[i] = random_bits ? static_cast<unsigned>(h) : static_cast<unsigned>(v); break;
    case 6: reinterpret_cast<unsigned char*>(p)[i] = random_bits ? static_cast<unsigned char>(h) : static_cast<unsigned char>(v); break;
    case 7: reinterpret_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); break;
    case 8: reinterpret_cast<__nv_fp8_storage_t*>(p)[i] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2); break;
  }
}

__device__ __forceinline__ float fp8_to_float(__nv_fp8_storage_t b, __nv_fp8_interpretation_t kind) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, kind)));
}

extern "C" __global__ void evotune_fill(void* p, long long n, int elem, int init, float scale, float offset,
                                        unsigned long long seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    unsigned long long h1 = mix64(seed ^ mix64((unsigned long long)i));
    unsigned long long h2 = mix64(h1);
    float v;
    if (init == 2) v = 0.0f;
    else if (init == 3) v = 1.0f;
    else if (init == 1) v = offset + (2.0f * unit_float(h1) - 1.0f) * scale;
    else v = offset + sqrtf(-2.0f * logf(unit_float(h1))) * cospif(2.0f * unit_float(h2)) * scale;
    store_elem(p, i, elem, init, v, h2);
  }
}

extern "C" __global__ void evotune_poison(void* p, long long n, int elem) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    switch (elem) {
      case 1: reinterpret_cast<unsigned short*>(p)[i] = 0xFE5A; break;
      case 2: reinterpret_cast<unsigned short*>(p)[i] = 0xFFDA; break;
      case 3: reinterpret_cast<unsigned*>(p)[i] = 0xFFC0DEADu; break;
      case 4: case 5: reinterpret_cast<unsigned*>(p)[i] = 0xDEADBEEFu; break;
      case 6: reinterpret_cast<unsigned char*>(p)[i] = 0xAB; break;
      case 7: reinterpret_cast<unsigned char*>(p)[i] = 0xFF; break;
      case 8: reinterpret_cast<unsigned char*>(p)[i] = 0xFE; break;
    }
  }
}

__device__ __forceinline__ float load_elem(const void* p, long long i, int elem, bool& poison) {
  switch (elem) {
    case 1: { unsigned short b = reinterpret_cast<const unsigned short*>(p)[i]; poison = b == 0xFE5A;
              return __half2float(__ushort_as_half(b)); }
    case 2: { unsigned short b = reinterpret_cast<const unsigned short*>(p)[i]; poison = b == 0xFFDA;
              return __bfloat162float(__ushort_as_bfloat16(b)); }
    case 3: { unsigned b = reinterpret_cast<const unsigned*>(p)[i]; poison = b == 0xFFC0DEADu;
              return __uint_as_float(b); }
    case 4: { int b = reinterpret_cast<const int*>(p)[i]; poison = (unsigned)b == 0xDEADBEEFu; return (float)b; }
    case 5: { unsigned b = reinterpret_cast<const unsigned*>(p)[i]; poison = b == 0xDEADBEEFu; return (float)b; }
    case 7: { unsigned char b = reinterpret_cast<const unsigned char*>(p)[i]; poison = b == 0xFF;
              return fp8_to_float(b, __NV_E4M3); }
    case 8: { unsigned char b = reinterpret_cast<const unsigned char*>(p)[i]; poison = b == 0xFE;
              return fp8_to_float(b, __NV_E5M2); }
    default: { unsigned char b = reinterpret_cast<const unsigned char*>(p)[i]; poison = false; return (float)b; }
  }
}

// acc: [0] max |out-ref| (as ordered bits of a non-negative double), [1] sum |out-ref|,
// [2] sum (out-ref)^2, [3] sum ref^2. counts: [0] bad, [1] NaN/Inf, [2] unwritten.
extern "C" __global__ void evotune_compare(const void* out, int elem, const float* ref, long long n, float atol,
                                           float rtol, double* acc, unsigned long long* counts) {
  double mx = 0, sum = 0, sq = 0, rsq = 0;
  unsigned long long bad = 0, nan = 0, unwritten = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    bool poison = false;
    float o = load_elem(out, i, elem, poison);
    float r = ref[i];
    if (poison) { ++unwritten; ++bad; continue; }
    if (!isfinite(o)) { ++nan; ++bad; continue; }
    double d = fabs((double)o - (double)r);
    mx = fmax(mx, d);
    sum += d;
    sq += d * d;
    rsq += (double)r * r;
    if (d > atol + rtol * fabsf(r)) ++bad;
  }
  for (int off = 16; off > 0; off >>= 1) {
    mx = fmax(mx, __shfl_down_sync(0xffffffffu, mx, off));
    sum += __shfl_down_sync(0xffffffffu, sum, off);
    sq += __shfl_down_sync(0xffffffffu, sq, off);
    rsq += __shfl_down_sync(0xffffffffu, rsq, off);
    bad += __shfl_down_sync(0xffffffffu, bad, off);
    nan += __shfl_down_sync(0xffffffffu, nan, off);
    unwritten += __shfl_down_sync(0xffffffffu, unwritten, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicMax(reinterpret_cast<unsigned long long*>(&acc[0]), (unsigned long long)__double_as_longlong(mx));
    atomicAdd(&acc[1], sum);
    atomicAdd(&acc[2], sq);
    atomicAdd(&acc[3], rsq);
    if (bad) atomicAdd(&counts[0], bad);
    if (nan) atomicAdd(&counts[1], nan);
    if (unwritten) atomicAdd(&counts[2], unwritten);
  }
}

// Guard regions around every buffer a candidate can reach: a canary byte
// pattern that depends on the salt and the position, so a kernel that writes
// anything (zeros, NaN, a copy of its data) past a buffer's end changes it.
__device__ __forceinline__ unsigned char canary_byte(unsigned long long salt, long long i) {
  return (unsigned char)(mix64(salt ^ (unsigned long long)(i >> 3)) >> ((i & 7) * 8));
}

extern "C" __global__ void evotune_guard_fill(unsigned char* p, long long bytes, unsigned long long salt) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < bytes; i += (long long)gridDim.x * blockDim.x)
    p[i] = canary_byte(salt, i);
}

// out: [0] guard bytes changed, [1] lowest changed offset, [2] highest changed offset + 1.
// The caller sets out to {0, ~0, 0} first.
extern "C" __global__ void evotune_guard_check(const unsigned char* p, long long bytes, unsigned long long salt,
                                               unsigned long long* out) {
  unsigned long long changed = 0, lo = ~0ULL, hi = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < bytes; i += (long long)gridDim.x * blockDim.x)
    if (p[i] != canary_byte(salt, i)) {
      ++changed;
      lo = min(lo, (unsigned long long)i);
      hi = max(hi, (unsigned long long)i + 1);
    }
  for (int off = 16; off > 0; off >>= 1) {
    changed += __shfl_down_sync(0xffffffffu, changed, off);
    lo = min(lo, __shfl_down_sync(0xffffffffu, lo, off));
    hi = max(hi, __shfl_down_sync(0xffffffffu, hi, off));
  }
  if ((threadIdx.x & 31) == 0 && changed) {
    atomicAdd(&out[0], changed);
    atomicMin(&out[1], lo);
    atomicMax(&out[2], hi);
  }
}

// Order-sensitive 64-bit checksum of a buffer's 32-bit words (tail bytes included).
extern "C" __global__ void evotune_checksum(const unsigned char* p, long long bytes, unsigned long long* out) {
  unsigned long long h = 0;
  long long words = bytes / 4;
  const unsigned* w = reinterpret_cast<const unsigned*>(p);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words; i += (long long)gridDim.x * blockDim.x)
    h += mix64(((unsigned long long)w[i] << 32) ^ (unsigned long long)i);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (long long i = words * 4; i < bytes; ++i) h += mix64((unsigned long long)p[i] ^ ((unsigned long long)i << 40));
  for (int off = 16; off > 0; off >>= 1) h += __shfl_down_sync(0xffffffffu, h, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, h);
}
)cuda";
}

}  // namespace evotune
