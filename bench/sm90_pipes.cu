// Per-SM throughput of the instructions an attention softmax issues (exp2,
// the conversions that pack P, max, add, fma), alone and mixed, so that a
// softmax's bound can be read off its instruction counts: which of them share
// a pipe, and how many a clock an SM retires. Each thread runs 8 independent
// chains (latency hidden), 1 CTA an SM of 4, 8 or 16 warps; cycles from
// clock64 around the loop, the slowest warp of the CTA.
//
// Needs:  an NVIDIA GPU and nvcc (CUDA 12.4+).
// Build:  nvcc -O3 -std=c++17 -arch=sm_90a -o sm90_pipes bench/sm90_pipes.cu
// Run:    ./sm90_pipes
// Prints: one line per mix and warp count: instructions retired a clock an SM
//         (all kinds of the mix together), and the cycles of the loop.
#include <cuda_runtime.h>

#include <cstdio>

constexpr int kIters = 2048;
constexpr int kChains = 8;

enum Mix { EX2, CVT_E4M3, CVT_F16X2, FMAX, FADD, FFMA, EX2_CVT_E4M3, EX2_CVT_F16X2, EX2_FFMA3, EX2_FMAX, SOFTMAX };
const char* kNames[] = {"ex2",           "cvt e4m3x2",     "cvt f16x2",       "max",     "add", "fma",
                        "ex2 + cvt e4m3x2", "ex2 + cvt f16x2", "ex2 + 3 fma", "ex2 + max",
                        "softmax: 2 ex2, 2 fma, 2 add, 2 max, 1 cvt e4m3x2"};
constexpr int kPerStep[] = {1, 1, 1, 1, 1, 1, 2, 2, 4, 2, 9};

template <int M>
__device__ __forceinline__ void step(float (&x)[kChains], float (&y)[kChains], unsigned (&h)[kChains]) {
#pragma unroll
  for (int i = 0; i < kChains; ++i) {
    if constexpr (M == EX2 || M == EX2_CVT_E4M3 || M == EX2_CVT_F16X2 || M == EX2_FFMA3 || M == EX2_FMAX)
      asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[i]));
    if constexpr (M == CVT_E4M3 || M == EX2_CVT_E4M3) {
      unsigned short r;
      asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(y[i]), "f"(y[(i + 1) % kChains]));
      y[i] = __uint_as_float(0x3f000000u | r);  // the next conversion depends on this one (a LOP3)
    }
    if constexpr (M == CVT_F16X2 || M == EX2_CVT_F16X2) {
      unsigned r;
      asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(y[i]), "f"(y[(i + 1) % kChains]));
      y[i] = __uint_as_float(0x3f000000u | (r & 0x007fffffu));
    }
    if constexpr (M == FMAX || M == EX2_FMAX) asm volatile("max.f32 %0, %0, %1;" : "+f"(y[i]) : "f"(y[(i + 3) % kChains]));
    if constexpr (M == FADD) asm volatile("add.f32 %0, %0, %1;" : "+f"(y[i]) : "f"(y[(i + 3) % kChains]));
    if constexpr (M == FFMA || M == EX2_FFMA3)
      asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(y[i]) : "f"(y[(i + 3) % kChains]), "f"(y[(i + 5) % kChains]));
    if constexpr (M == EX2_FFMA3) {
      asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(y[i]) : "f"(y[(i + 3) % kChains]), "f"(y[(i + 5) % kChains]));
      asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(y[i]) : "f"(y[(i + 3) % kChains]), "f"(y[(i + 5) % kChains]));
    }
    if constexpr (M == SOFTMAX) {  // per two scores, roughly the FP8 softmax's mix
      float a, b;
      asm volatile("max.f32 %0, %0, %1;" : "+f"(y[i]) : "f"(x[i]));
      asm volatile("max.f32 %0, %0, %1;" : "+f"(y[i]) : "f"(x[(i + 1) % kChains]));
      asm volatile("fma.rn.f32 %0, %1, 0f3FB8AA3B, 0fC0400000;" : "=f"(a) : "f"(x[i]));
      asm volatile("fma.rn.f32 %0, %1, 0f3FB8AA3C, 0fC0400001;" : "=f"(b) : "f"(y[i]));
      asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a));
      asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(b));
      asm volatile("add.f32 %0, %0, %1;" : "+f"(x[i]) : "f"(a));
      asm volatile("add.f32 %0, %0, %1;" : "+f"(x[i]) : "f"(b));
      unsigned short r;
      asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(a), "f"(b));
      h[i] += r;
      y[i] = __uint_as_float(0x3f000000u | r);
    }
  }
}

template <int M>
__global__ void pipes(float seed, long long* cycles, unsigned* sink) {
  float x[kChains], y[kChains];
  unsigned h[kChains];
#pragma unroll
  for (int i = 0; i < kChains; ++i) {
    x[i] = -seed * (i + 1) * 1e-3f;
    y[i] = seed * (i + 2) * 1e-3f;
    h[i] = 0;
  }
  __syncthreads();
  const long long t0 = clock64();
#pragma unroll 4
  for (int it = 0; it < kIters; ++it) step<M>(x, y, h);
  __syncthreads();
  const long long t1 = clock64();
  unsigned acc = 0;
#pragma unroll
  for (int i = 0; i < kChains; ++i) acc += h[i] + __float_as_uint(x[i]) + __float_as_uint(y[i]);
  if (acc == 0x12345678u) sink[threadIdx.x] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int M>
void run(int sms, long long* d_cycles, unsigned* d_sink) {
  for (int warps : {4, 8, 16}) {
    pipes<M><<<sms, 32 * warps>>>(1.f, d_cycles, d_sink);  // warm-up
    pipes<M><<<sms, 32 * warps>>>(1.f, d_cycles, d_sink);
    cudaDeviceSynchronize();
    long long c[1024];
    cudaMemcpy(c, d_cycles, sms * sizeof(long long), cudaMemcpyDeviceToHost);
    long long med = c[0];
    for (int i = 1; i < sms; ++i) med = c[i] > med ? c[i] : med;  // the slowest SM
    const double instr = (double)warps * 32 * kIters * kChains * kPerStep[M];
    std::printf("%-52s %2d warps  %7.1f a clock an SM  (%lld cycles)\n", kNames[M], warps, instr / med, med);
  }
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  long long* d_cycles;
  unsigned* d_sink;
  cudaMalloc(&d_cycles, 1024 * sizeof(long long));
  cudaMalloc(&d_sink, 1024 * sizeof(unsigned));
  run<EX2>(sms, d_cycles, d_sink);
  run<CVT_E4M3>(sms, d_cycles, d_sink);
  run<CVT_F16X2>(sms, d_cycles, d_sink);
  run<FMAX>(sms, d_cycles, d_sink);
  run<FADD>(sms, d_cycles, d_sink);
  run<FFMA>(sms, d_cycles, d_sink);
  run<EX2_CVT_E4M3>(sms, d_cycles, d_sink);
  run<EX2_CVT_F16X2>(sms, d_cycles, d_sink);
  run<EX2_FFMA3>(sms, d_cycles, d_sink);
  run<EX2_FMAX>(sms, d_cycles, d_sink);
  run<SOFTMAX>(sms, d_cycles, d_sink);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  return 0;
}
