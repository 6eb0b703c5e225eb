// The FP8 attention's V_PACK=1 pass alone (sdpa_fwd_sm90's pack_vt and
// pack_vt_block, compiled from the template's own source), against a plain
// copy of the same bytes: how far the pass that writes Vᵀ before the
// attention is from the memory system's rate, and whether the claims, the
// grid-wide wait or the occupancy of the launch are what it waits on.
// V of 4,16,4096,128 (33.5 MB of e4m3); CUDA-event time, median of 30
// launches, each after an L2 flush (and again hot). Prints µs and TB/s
// (bytes read + written).
//
// Needs:  an sm_90 GPU and nvcc (CUDA 12.4+).
// Build:  nvcc -O3 -std=c++17 -arch=sm_90a -Ikernel_templates/common \
//           -Ikernel_templates/sdpa_fwd_sm90 -o vpack_pass bench/vpack_pass.cu
// Run:    ./vpack_pass
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

// The template's source for one FP8 V_PACK build (the defines its spec would pass).
#define SDPA_FP8 1
#define V_PACK 1
#define HEAD_DIM 128
#define BLOCK_N 256
#define CONSUMER_WG 2
#define OVERLAP 0
#define PERSISTENT 1
#define O_TMA 1
#define STAGES 2
#include "kernel.cu"
using namespace sdpa_sm90;

// (a) the launch's pass: warps claim blocks by an atomic, then a grid-wide wait
__global__ void __launch_bounds__(384, 1)
    pass_claimed(const unsigned char* V, unsigned char* vp, int bh, int skv, unsigned* sync) {
  pack_vt(V, vp, bh, skv, sync);
}
// (b) the same blocks dealt out statically (warp w: w, w + warps, ...), no wait
__global__ void __launch_bounds__(384, 1) pass_static(const unsigned char* V, unsigned char* vp, int bh, int skv) {
  const unsigned bph = vpack_blocks_per_head(skv);
  const long long total = (long long)bh * bph;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; b < total; b += warps)
    pack_vt_block(V, vp, b / bph, b % bph, skv, threadIdx.x & 31);
}
// (c) a copy of V by 16-byte loads and stores
__global__ void copy16(const uint4* a, uint4* b, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    b[i] = a[i];
}
__global__ void flush(uint4* f, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    f[i].x += 1;
}

int main() {
  const int bh = 64, skv = 4096, D = 128;  // 4,16,4096,128: 33.5 MB of V
  const size_t vbytes = (size_t)bh * skv * D, fbytes = 256u << 20;
  unsigned char *V, *vp;
  unsigned* sync;
  uint4* fl;
  cudaMalloc(&V, vbytes);
  cudaMalloc(&vp, (size_t)bh * D * ((skv + 31) / 32 * 32));
  cudaMalloc(&sync, 64);
  cudaMalloc(&fl, fbytes);
  cudaMemset(V, 0x3c, vbytes);
  cudaMemset(sync, 0, 64);
  cudaMemset(fl, 0, fbytes);
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto time = [&](const char* name, auto launch, bool do_flush) {
    std::vector<float> ts;
    for (int r = 0; r < 30; ++r) {
      if (do_flush) flush<<<sms * 8, 256>>>(fl, fbytes / 16);
      cudaEventRecord(e0);
      launch();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms;
      cudaEventElapsedTime(&ms, e0, e1);
      ts.push_back(ms * 1000);
    }
    std::sort(ts.begin(), ts.end());
    const float us = ts[ts.size() / 2];
    printf("%-44s %s %8.1f us  %6.2f TB/s (read + written)\n", name, do_flush ? "flushed" : "hot    ", us,
           2.0 * vbytes / (us * 1e-6) / 1e12);
    if (cudaGetLastError() != cudaSuccess) printf("  error\n");
  };
  for (bool f : {true, false}) {
    time(
        "copy, 16-byte loads/stores, 8 CTAs/SM",
        [&] { copy16<<<sms * 8, 256>>>((const uint4*)V, (uint4*)vp, vbytes / 16); }, f);
    time(
        "pass, claimed, 1 CTA of 384 a SM (the launch's)", [&] { pass_claimed<<<sms, 384>>>(V, vp, bh, skv, sync); },
        f);
    time(
        "pass, static, 1 CTA of 384 a SM", [&] { pass_static<<<sms, 384>>>(V, vp, bh, skv); }, f);
    time(
        "pass, static, 2 CTAs of 384 a SM", [&] { pass_static<<<sms * 2, 384>>>(V, vp, bh, skv); }, f);
    time(
        "pass, static, one block a warp",
        [&] { pass_static<<<(bh * ((skv + 31) / 32 + 7) / 8 * 4 + 11) / 12, 384>>>(V, vp, bh, skv); }, f);
  }
  return 0;
}
