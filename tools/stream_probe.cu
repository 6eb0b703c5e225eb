// stream_probe: how fast can one pass over a K x N row-major bf16 matrix
// (the B of a GEMV, read once) be, by access pattern? Each probe reads the
// whole matrix once and does no math (a sum that is never stored, so the
// loads stay): the ceiling a GEMV built on that pattern cannot beat. Beside
// them, cuBLAS's GEMV 1 x N x K on the same matrix.
//
// Needs: nvcc (sm_90a), a Hopper GPU, cuBLAS. Build (no GPU needed):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o stream_probe tools/stream_probe.cu -lcublas -lcuda
// Run: ./stream_probe [K N]   (default 4096 4096)
// Prints, per probe: median kernel time over 30 launches by CUDA events,
// each launch after a 256 MB write that flushes L2, and the share of DRAM
// peak that is (peak from the device's memory clock and bus width).
//
// Probes:
//   ldg  COLS ROWS T U   CTAs own COLS x ROWS blocks; T threads; each thread
//                        reads 16-byte vectors, U rows in flight.
//   bulk BYTES S         CTAs own whole rows (contiguous), a ring of S
//                        stages of BYTES each filled by 1-D bulk copies.
//   tma  BC BR S CL G    CTAs own column blocks BC wide (one box), over K/G
//                        rows each; boxes BC x BR by 2-D TMA, S stages,
//                        clusters of CL along the columns.
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__device__ __forceinline__ float sum8(uint4 v) {
  __nv_bfloat162 a = *reinterpret_cast<__nv_bfloat162*>(&v.x), b = *reinterpret_cast<__nv_bfloat162*>(&v.y);
  __nv_bfloat162 c = *reinterpret_cast<__nv_bfloat162*>(&v.z), d = *reinterpret_cast<__nv_bfloat162*>(&v.w);
  float2 fa = __bfloat1622float2(a), fb = __bfloat1622float2(b), fc = __bfloat1622float2(c), fd = __bfloat1622float2(d);
  return fa.x + fa.y + fb.x + fb.y + fc.x + fc.y + fd.x + fd.y;
}

// ldg: grid (N/cols, K/rows); thread t takes vector column t % cvec and rows
// t / cvec, t / cvec + T / cvec, ...
template <int U>
__global__ void ldg_probe(const uint4* __restrict__ B, int nvec, int cvec, int rows, float* out) {
  const int tx = threadIdx.x % cvec, ty = threadIdx.x / cvec, step = blockDim.x / cvec;
  const uint4* p = B + (size_t)blockIdx.y * rows * nvec + (size_t)blockIdx.x * cvec + tx;
  float acc = 0.f;
  for (int r = ty; r < rows; r += step * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = (r + u * step < rows) ? __ldcs(p + (size_t)(r + u * step) * nvec) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += sum8(v[u]);
  }
  if (acc == 1234.5f) out[threadIdx.x] = acc;
}

__device__ __forceinline__ unsigned smem_u32(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned phase) {
  asm volatile(
      "{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W;\n}" ::"r"(bar),
      "r"(phase)
      : "memory");
}

// The ring shared by bulk and tma: warp 0 lane 0 produces, warps 1.. consume
// (wait for the stage, read it, free it).
template <typename Issue>
__device__ void ring(int tiles, int S, unsigned stage_bytes, Issue issue, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned char* base = smem + 1024;
  const unsigned full0 = smem_u32(smem), empty0 = full0 + 8 * S;
  const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, nwarps - 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == 0) {
    if (threadIdx.x == 0)
      for (int i = 0; i < tiles; ++i) {
        const int s = i % S;
        if (i >= S) mbar_wait(empty0 + 8 * s, ((i / S) - 1) & 1);
        mbar_expect(full0 + 8 * s, stage_bytes);
        issue(i, smem_u32(base + (size_t)s * stage_bytes), full0 + 8 * s);
      }
  } else {
    float acc = 0.f;
    const int t = threadIdx.x - 32, nt = blockDim.x - 32;
    for (int i = 0; i < tiles; ++i) {
      const int s = i % S;
      mbar_wait(full0 + 8 * s, (i / S) & 1);
      const uint4* v = reinterpret_cast<const uint4*>(base + (size_t)s * stage_bytes);
      for (int j = t; j < (int)(stage_bytes / 16); j += nt) acc += sum8(v[j]);
      __syncwarp();
      if ((threadIdx.x & 31) == 0) mbar_arrive(empty0 + 8 * s);
    }
    if (acc == 1234.5f) out[threadIdx.x] = acc;
  }
}

// bulk: CTA b owns bytes [b * per, (b + 1) * per), stages of `chunk` bytes.
__global__ void bulk_probe(const unsigned char* B, size_t per, unsigned chunk, int S, float* out) {
  const unsigned char* src = B + blockIdx.x * per;
  const int tiles = (int)(per / chunk);
  ring(tiles, S, chunk,
       [&](int i, unsigned dst, unsigned bar) {
         asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                      "l"(src + (size_t)i * chunk), "r"(chunk), "r"(bar)
                      : "memory");
       },
       out);
}

// tma: CTA (x, y) owns columns x * bc.. (one box wide) and rows y * rows..
__global__ void tma_probe(const __grid_constant__ CUtensorMap tm, int bc, int br, int rows, int S, float* out) {
  const int c0 = blockIdx.x * bc, r0 = blockIdx.y * rows;
  ring(rows / br, S, (unsigned)(bc * br * 2),
       [&](int i, unsigned dst, unsigned bar) {
         asm volatile(
             "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
             "l"(&tm), "r"(c0), "r"(r0 + i * br), "r"(bar)
             : "memory");
       },
       out);
}

__global__ void flush_kernel(float4* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = make_float4(0, 0, 0, (float)i);
}

struct Timer {
  float4* flush;
  size_t nflush = (256u << 20) / 16;
  cudaEvent_t a, b;
  Timer() {
    CK(cudaMalloc(&flush, nflush * 16));
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  float median_us(const std::function<void()>& f, int reps = 30) {
    std::vector<float> t;
    for (int r = 0; r < reps + 2; ++r) {
      flush_kernel<<<1024, 256>>>(flush, nflush);
      CK(cudaEventRecord(a));
      f();
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      CK(cudaGetLastError());
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      if (r >= 2) t.push_back(ms * 1000.f);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

int main(int argc, char** argv) {
  const int K = argc > 2 ? std::atoi(argv[1]) : 4096, N = argc > 2 ? std::atoi(argv[2]) : 4096;
  const size_t bytes = (size_t)K * N * 2;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int clk_khz = 0, bus = 0;
  CK(cudaDeviceGetAttribute(&clk_khz, cudaDevAttrMemoryClockRate, 0));
  CK(cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0));
  const double peak = 2.0 * clk_khz * 1e3 * bus / 8;  // bytes/s
  std::printf("%s, %d SMs, DRAM peak %.0f GB/s; B %d x %d bf16 = %.1f MB\n", prop.name, prop.multiProcessorCount,
              peak / 1e9, K, N, bytes / 1e6);
  unsigned char* B;
  float* out;
  __nv_bfloat16 *x, *y;
  CK(cudaMalloc(&B, bytes));
  CK(cudaMemset(B, 0, bytes));
  CK(cudaMalloc(&out, 1 << 20));
  CK(cudaMalloc(&x, K * 2));
  CK(cudaMalloc(&y, N * 2));
  CK(cudaMemset(x, 0, K * 2));
  Timer tm;
  auto report = [&](const std::string& name, float us, int ctas) {
    std::printf("%-34s %5d CTAs  %8.2f us  %5.1f%% of peak\n", name.c_str(), ctas, us, 100.0 * bytes / (us * 1e-6) / peak);
  };

  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1.f, zero = 0.f;
  report("cublas gemv 1xNxK (A.B)",
         tm.median_us([&] {
           cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, 1, K, &one, B, CUDA_R_16BF, N, x, CUDA_R_16BF, K, &zero, y,
                        CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
         }),
         0);

  const int nvec = N / 8;
  // ldg: column block width in 16-byte vectors, rows per CTA, threads, unroll
  struct L { int cvec, rows, T, U; };
  std::vector<L> ls = {{512, 32, 512, 4},  {512, 32, 512, 8},  {512, 64, 512, 8},  {512, 16, 512, 8},
                       {512, 32, 1024, 4}, {256, 64, 512, 8},  {256, 32, 256, 8},  {128, 128, 512, 8},
                       {64, 256, 512, 8},  {32, 512, 512, 8},  {16, 1024, 512, 8}, {8, 2048, 256, 8},
                       {8, 1024, 256, 16}, {16, 512, 256, 16}, {32, 256, 256, 16}};
  for (const L& l : ls) {
    if (nvec % l.cvec || K % l.rows) continue;
    dim3 grid(nvec / l.cvec, K / l.rows);
    auto f = [&] {
      if (l.U == 4) ldg_probe<4><<<grid, l.T>>>((const uint4*)B, nvec, l.cvec, l.rows, out);
      else if (l.U == 8) ldg_probe<8><<<grid, l.T>>>((const uint4*)B, nvec, l.cvec, l.rows, out);
      else ldg_probe<16><<<grid, l.T>>>((const uint4*)B, nvec, l.cvec, l.rows, out);
    };
    char name[96];
    std::snprintf(name, sizeof name, "ldg %dB x %d rows T%d U%d", l.cvec * 16, l.rows, l.T, l.U);
    report(name, tm.median_us(f), grid.x * grid.y);
  }

  // bulk: CTAs, chunk bytes, stages, threads
  struct Bk { int ctas; unsigned chunk; int S, T; };
  std::vector<Bk> bs = {{64, 16384, 8, 160},  {64, 32768, 5, 160},  {128, 16384, 8, 160}, {128, 8192, 12, 160},
                        {128, 32768, 4, 160}, {256, 16384, 6, 160}, {256, 8192, 8, 160},  {132, 16384, 8, 160},
                        {512, 8192, 6, 160},  {128, 16384, 8, 288}};
  for (const Bk& b : bs) {
    if (bytes % ((size_t)b.ctas * b.chunk)) continue;
    const size_t per = bytes / b.ctas;
    const int smem = 1024 + b.S * (int)b.chunk;
    CK(cudaFuncSetAttribute(bulk_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    auto f = [&] { bulk_probe<<<b.ctas, b.T, smem>>>(B, per, b.chunk, b.S, out); };
    char name[96];
    std::snprintf(name, sizeof name, "bulk %uB x %d stages T%d", b.chunk, b.S, b.T);
    report(name, tm.median_us(f), b.ctas);
  }

  // tma: box columns, box rows, stages, cluster, CTAs along K
  void* enc = nullptr;
  cudaDriverEntryPointQueryResult q;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &enc, 12000, cudaEnableDefault, &q));
  auto encode = reinterpret_cast<decltype(&cuTensorMapEncodeTiled)>(enc);
  struct Tm { int bc, br, S, cl, gy; };
  std::vector<Tm> ts = {{64, 256, 6, 1, 1},  {64, 256, 6, 4, 1},  {64, 128, 8, 1, 2},  {64, 128, 8, 4, 2},
                        {128, 128, 6, 1, 4}, {128, 128, 6, 4, 4}, {256, 32, 8, 1, 4},  {256, 32, 8, 4, 4},
                        {256, 64, 6, 2, 8},  {256, 64, 6, 4, 8},  {128, 64, 8, 2, 4},  {64, 256, 3, 4, 2}};
  for (const Tm& t : ts) {
    CUtensorMap map;
    cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)K};
    cuuint64_t strides[1] = {(cuuint64_t)N * 2};
    cuuint32_t box[2] = {(cuuint32_t)t.bc, (cuuint32_t)t.br}, es[2] = {1, 1};
    if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, B, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
               CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
      std::printf("tma %dx%d: encode failed\n", t.bc, t.br);
      continue;
    }
    const int rows = K / t.gy;
    if (N % t.bc || rows % t.br) continue;
    const int smem = 1024 + t.S * t.bc * t.br * 2;
    CK(cudaFuncSetAttribute(tma_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(N / t.bc, t.gy);
    cfg.blockDim = dim3(160);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = t.cl;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    auto f = [&] { CK(cudaLaunchKernelEx(&cfg, tma_probe, map, t.bc, t.br, rows, t.S, out)); };
    char name[96];
    std::snprintf(name, sizeof name, "tma %dx%d S%d cluster %d", t.bc, t.br, t.S, t.cl);
    report(name, tm.median_us(f), (N / t.bc) * t.gy);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}
