// The FP8 attention's V_PACK=1 pass alone (sdpa_fwd_sm90's pack_vt and
// pack_vt_block, compiled from the template's own source), against a plain
// copy of the same bytes: how far the pass that writes Vᵀ before the
// attention is from the memory system's rate, and whether the claims, the
// grid-wide wait or the occupancy of the launch are what it waits on; and two
// candidates by 16-byte loads (checked to write the same Vᵀ): a warp takes 128
// keys by all of D (d), or 128 keys by 16 of D, 16 rows of Vᵀ (e), dealt out
// statically, claimed, or by sets that free CTAs take over (f).
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
// (d) a candidate block: 128 keys (8 groups of 16) of one head by 16-byte loads, a
// lane per (group, slot); each store instruction writes 128 bytes of one row of Vᵀ.
__device__ __forceinline__ void pack_vt_block16(const unsigned char* __restrict__ V, unsigned char* __restrict__ vp,
                                                long long bh, long long blk, int skv, int lane) {
  const int skv32 = (skv + 31) / 32 * 32;
  const int g = lane >> 2, r = lane & 3;
  const int key0 = (int)blk * 128 + 16 * g;
  if (key0 >= skv32) return;
  const int keys[4] = {key0 + 2 * r, key0 + 2 * r + 1, key0 + 8 + 2 * r, key0 + 9 + 2 * r};
  const unsigned char* src = V + bh * skv * kD;
  unsigned char* dst = vp + bh * kD * skv32 + key0 + 4 * r;
#pragma unroll
  for (int c = 0; c < kD / 16; ++c) {
    uint4 k[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      k[i] = keys[i] < skv ? __ldg(reinterpret_cast<const uint4*>(src + (long long)keys[i] * kD + 16 * c))
                           : make_uint4(0, 0, 0, 0);
    const unsigned w0[4] = {k[0].x, k[0].y, k[0].z, k[0].w}, w1[4] = {k[1].x, k[1].y, k[1].z, k[1].w};
    const unsigned w2[4] = {k[2].x, k[2].y, k[2].z, k[2].w}, w3[4] = {k[3].x, k[3].y, k[3].z, k[3].w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const unsigned lo_ab = __byte_perm(w0[w], w1[w], 0x5140), hi_ab = __byte_perm(w0[w], w1[w], 0x7362);
      const unsigned lo_cd = __byte_perm(w2[w], w3[w], 0x5140), hi_cd = __byte_perm(w2[w], w3[w], 0x7362);
      const unsigned o[4] = {__byte_perm(lo_ab, lo_cd, 0x5410), __byte_perm(lo_ab, lo_cd, 0x7632),
                             __byte_perm(hi_ab, hi_cd, 0x5410), __byte_perm(hi_ab, hi_cd, 0x7632)};
#pragma unroll
      for (int j = 0; j < 4; ++j) *reinterpret_cast<unsigned*>(dst + (long long)(16 * c + 4 * w + j) * skv32) = o[j];
    }
  }
}
__global__ void __launch_bounds__(384, 1) pass16_static(const unsigned char* V, unsigned char* vp, int bh, int skv) {
  const long long bph = (skv + 127) / 128, total = (long long)bh * bph;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long b = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; b < total; b += warps)
    pack_vt_block16(V, vp, b / bph, b % bph, skv, threadIdx.x & 31);
}
__global__ void __launch_bounds__(384, 1)
    pass16_claimed(const unsigned char* V, unsigned char* vp, int bh, int skv, unsigned* sync) {
  const long long bph = (skv + 127) / 128;
  evotune_sm90::grid_prepass(sync, (long long)bh * bph,
                             [&](long long blk, int lane) { pack_vt_block16(V, vp, blk / bph, blk % bph, skv, lane); });
}

// (e) the candidate by 16-key chunks of d: a warp writes 16 rows of Vᵀ over 128 keys; consecutive
// units take consecutive key blocks, so the warps at work write whole rows together.
__device__ __forceinline__ void pack_vt_chunk(const unsigned char* __restrict__ V, unsigned char* __restrict__ vp,
                                              long long bh, int c, int kb, int skv, int lane) {
  const int skv32 = (skv + 31) / 32 * 32;
  const int g = lane >> 2, r = lane & 3;
  const int key0 = kb * 128 + 16 * g;
  if (key0 >= skv32) return;
  const int keys[4] = {key0 + 2 * r, key0 + 2 * r + 1, key0 + 8 + 2 * r, key0 + 9 + 2 * r};
  const unsigned char* src = V + bh * skv * kD + 16 * c;
  unsigned char* dst = vp + (bh * kD + 16 * c) * skv32 + key0 + 4 * r;
  uint4 k[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    k[i] =
        keys[i] < skv ? __ldg(reinterpret_cast<const uint4*>(src + (long long)keys[i] * kD)) : make_uint4(0, 0, 0, 0);
  const unsigned w0[4] = {k[0].x, k[0].y, k[0].z, k[0].w}, w1[4] = {k[1].x, k[1].y, k[1].z, k[1].w};
  const unsigned w2[4] = {k[2].x, k[2].y, k[2].z, k[2].w}, w3[4] = {k[3].x, k[3].y, k[3].z, k[3].w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const unsigned lo_ab = __byte_perm(w0[w], w1[w], 0x5140), hi_ab = __byte_perm(w0[w], w1[w], 0x7362);
    const unsigned lo_cd = __byte_perm(w2[w], w3[w], 0x5140), hi_cd = __byte_perm(w2[w], w3[w], 0x7362);
    const unsigned o[4] = {__byte_perm(lo_ab, lo_cd, 0x5410), __byte_perm(lo_ab, lo_cd, 0x7632),
                           __byte_perm(hi_ab, hi_cd, 0x5410), __byte_perm(hi_ab, hi_cd, 0x7632)};
#pragma unroll
    for (int j = 0; j < 4; ++j) *reinterpret_cast<unsigned*>(dst + (long long)(4 * w + j) * skv32) = o[j];
  }
}
template <int UNROLL>
__global__ void __launch_bounds__(384, 1) passE_static(const unsigned char* V, unsigned char* vp, int bh, int skv) {
  const int kbs = (skv + 127) / 128, chunks = kD / 16;
  const long long total = (long long)bh * chunks * kbs;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  const long long w0 = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  for (long long b0 = w0; b0 < total; b0 += warps * UNROLL)
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long b = b0 + u * warps;
      if (b < total)
        pack_vt_chunk(V, vp, b / (chunks * kbs), (int)(b / kbs % chunks), (int)(b % kbs), skv, threadIdx.x & 31);
    }
}

// (e) claimed: warps claim BATCH consecutive units at a time, then the grid-wide wait.
template <int BATCH>
__global__ void __launch_bounds__(384, 1)
    passE_claimed(const unsigned char* V, unsigned char* vp, int bh, int skv, unsigned* sync) {
  const int kbs = (skv + 127) / 128, chunks = kD / 16;
  const long long total = (long long)bh * chunks * kbs;
  evotune_sm90::grid_prepass(sync, (total + BATCH - 1) / BATCH, [&](long long blk, int lane) {
#pragma unroll
    for (int u = 0; u < BATCH; ++u) {
      const long long b = blk * BATCH + u;
      if (b < total) pack_vt_chunk(V, vp, b / (chunks * kbs), (int)(b / kbs % chunks), (int)(b % kbs), skv, lane);
    }
  });
}

// (f) the 16-row candidate dealt out as (e) statically, but by sets: set i is the units CTA i
// takes statically; a CTA takes its own set by a compare-and-swap, then any set still free
// (a CTA that has not started), so that a launch whose CTAs are not all resident completes.
// sync: [0] sets taken, [1] sets done, [2] CTAs past the wait, [3 + i] set i taken.
__global__ void __launch_bounds__(384, 1)
    passF(const unsigned char* V, unsigned char* vp, int bh, int skv, unsigned* sync) {
  const int G = gridDim.x, W = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int kbs = (skv + 127) / 128, chunks = kD / 16;
  const long long total = (long long)bh * chunks * kbs;
  __shared__ int s_set;
  if (threadIdx.x == 0) {
    const bool mine = atomicCAS(&sync[3 + blockIdx.x], 0u, 1u) == 0u;
    if (mine) atomicAdd(&sync[0], 1u);
    s_set = mine ? (int)blockIdx.x : -1;
  }
  __syncthreads();
  for (int set = s_set;;) {
    if (set >= 0) {
      for (long long u = (long long)set * W + warp; u < total; u += (long long)G * W)
        pack_vt_chunk(V, vp, u / (chunks * kbs), (int)(u / kbs % chunks), (int)(u % kbs), skv, lane);
      __threadfence();
      __syncthreads();
      if (threadIdx.x == 0) atomicAdd(&sync[1], 1u);
    }
    if (warp == 0) {  // a free set, if any CTA has not started: the lanes look at G / 32 sets each
      int next = -1;
      if (evotune_sm90::ld_acquire_gpu(&sync[0]) < (unsigned)G)
        for (int j0 = 0; j0 < G && next < 0; j0 += 32) {
          const int j = j0 + lane;
          const bool free = j < G && *reinterpret_cast<volatile unsigned*>(&sync[3 + j]) == 0u;
          unsigned ballot = __ballot_sync(0xffffffffu, free);
          while (ballot && next < 0) {
            const int cand = j0 + __ffs(ballot) - 1;
            ballot &= ballot - 1;
            unsigned won = 0;
            if (lane == 0) won = atomicCAS(&sync[3 + cand], 0u, 1u) == 0u;
            if (__shfl_sync(0xffffffffu, won, 0)) {
              next = cand;
              if (lane == 0) atomicAdd(&sync[0], 1u);
            }
          }
        }
      if (lane == 0) s_set = next;
    }
    __syncthreads();
    set = s_set;
    __syncthreads();
    if (set < 0) break;
  }
  if (threadIdx.x == 0)
    while (evotune_sm90::ld_acquire_gpu(&sync[1]) < (unsigned)G) __nanosleep(64);
  __syncthreads();
  if (warp == 0) {  // the last CTA past the wait re-arms every word
    unsigned past = 0;
    if (lane == 0) {
      __threadfence();
      past = atomicAdd(&sync[2], 1u) + 1u;
    }
    if (__shfl_sync(0xffffffffu, past, 0) == (unsigned)G) {
      for (int j = lane; j < G; j += 32) sync[3 + j] = 0u;
      if (lane < 3) sync[lane] = 0u;
    }
  }
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
  cudaMalloc(&sync, 4096);
  cudaMalloc(&fl, fbytes);
  cudaMemset(V, 0x3c, vbytes);
  cudaMemset(sync, 0, 4096);
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
  // The candidate writes what the pass writes (random V, an odd key count too).
  for (int n : {skv, 1000}) {
    const size_t bytes = (size_t)bh * n * D, out = (size_t)bh * D * ((n + 31) / 32 * 32);
    std::vector<unsigned char> h(bytes), a(out), b(out);
    for (size_t i = 0; i < bytes; ++i) h[i] = (unsigned char)(i * 2654435761u >> 13);
    cudaMemcpy(V, h.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemset(vp, 0xff, out);
    pass_claimed<<<sms, 384>>>(V, vp, bh, n, sync);
    cudaMemcpy(a.data(), vp, out, cudaMemcpyDeviceToHost);
    cudaMemset(vp, 0xee, out);
    pass16_static<<<sms, 384>>>(V, vp, bh, n);
    cudaMemcpy(b.data(), vp, out, cudaMemcpyDeviceToHost);
    printf("SKV=%d: the candidate's Vt %s the pass's\n", n, a == b ? "equals" : "DIFFERS FROM");
    cudaMemset(vp, 0xdd, out);
    passE_static<2><<<sms, 384>>>(V, vp, bh, n);
    cudaMemcpy(b.data(), vp, out, cudaMemcpyDeviceToHost);
    printf("SKV=%d: the chunked candidate's Vt %s the pass's\n", n, a == b ? "equals" : "DIFFERS FROM");
    for (int rep = 0; rep < 3; ++rep) {  // by sets, again and again (re-armed)
      cudaMemset(vp, 0xcc, out);
      passF<<<sms, 384>>>(V, vp, bh, n, sync);
      cudaMemcpy(b.data(), vp, out, cudaMemcpyDeviceToHost);
      printf("SKV=%d: by sets, launch %d: Vt %s the pass's\n", n, rep, a == b ? "equals" : "DIFFERS FROM");
    }
  }
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
        "candidate, 16-byte loads, static, 1 CTA a SM", [&] { pass16_static<<<sms, 384>>>(V, vp, bh, skv); }, f);
    time(
        "candidate, claimed, 1 CTA a SM", [&] { pass16_claimed<<<sms, 384>>>(V, vp, bh, skv, sync); }, f);
    time(
        "chunked candidate by sets (taken, free ones taken over)", [&] { passF<<<sms, 384>>>(V, vp, bh, skv, sync); },
        f);
    time(
        "  the same, 2 CTAs a SM (sets of 24 units)", [&] { passF<<<sms * 2, 384>>>(V, vp, bh, skv, sync); }, f);
    time(
        "chunked candidate, claimed 1 a claim", [&] { passE_claimed<1><<<sms, 384>>>(V, vp, bh, skv, sync); }, f);
    time(
        "chunked candidate, claimed 2 a claim", [&] { passE_claimed<2><<<sms, 384>>>(V, vp, bh, skv, sync); }, f);
    time(
        "chunked candidate, claimed 8 a claim", [&] { passE_claimed<8><<<sms, 384>>>(V, vp, bh, skv, sync); }, f);
    time(
        "chunked candidate, 1 unit in flight", [&] { passE_static<1><<<sms, 384>>>(V, vp, bh, skv); }, f);
    time(
        "chunked candidate, 2 units in flight", [&] { passE_static<2><<<sms, 384>>>(V, vp, bh, skv); }, f);
    time(
        "chunked candidate, 4 units in flight", [&] { passE_static<4><<<sms, 384>>>(V, vp, bh, skv); }, f);
    time(
        "chunked candidate, 2 in flight, 2 CTAs a SM", [&] { passE_static<2><<<sms * 2, 384>>>(V, vp, bh, skv); }, f);
    time(
        "candidate, static, 2 CTAs a SM", [&] { pass16_static<<<sms * 2, 384>>>(V, vp, bh, skv); }, f);
    time(
        "pass, static, one block a warp",
        [&] { pass_static<<<(bh * ((skv + 31) / 32 + 7) / 8 * 4 + 11) / 12, 384>>>(V, vp, bh, skv); }, f);
  }
  return 0;
}
