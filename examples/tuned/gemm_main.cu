// Runs the gemm kernel as exported by `evotune export RUN -o gemm_best.h`,
// checks sampled outputs against a double-precision CPU reference and prints
// the latency.
//
//   nvcc -std=c++17 -arch=sm_90 -I<repo> -I<repo>/kernel_templates/common \
//        -include gemm_best.h examples/tuned/gemm_main.cu -o gemm_tuned
//   ./gemm_tuned [M N K]
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#ifndef EVOTUNE_TUNED_GEMM_H_
#error "include an exported gemm header first (nvcc -include gemm_best.h)"
#endif
#include "kernel_templates/gemm/kernel.cu"

#include "cuda_check.h"

namespace tuned = evotune_tuned::gemm;

int main(int argc, char** argv) {
  long long M = argc > 3 ? std::atoll(argv[1]) : 4096, N = argc > 3 ? std::atoll(argv[2]) : 4096,
            K = argc > 3 ? std::atoll(argv[3]) : 4096;
  std::printf("gemm %s, tuned config %s\nproblem M=%lld N=%lld K=%lld\n", tuned::kDtype, tuned::kConfig, M, N, K);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<evotune_elem_t> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N)), c(static_cast<size_t>(M * N));
  for (auto& x : a) x = evotune_elem_t(uni(rng));
  for (auto& x : b) x = evotune_elem_t(uni(rng));

  evotune_elem_t *da, *db, *dc;
  float* ws;
  unsigned* cnt;
  CHECK(cudaMalloc(&da, a.size() * sizeof(evotune_elem_t)));
  CHECK(cudaMalloc(&db, b.size() * sizeof(evotune_elem_t)));
  CHECK(cudaMalloc(&dc, c.size() * sizeof(evotune_elem_t)));
  CHECK(cudaMalloc(&ws, tuned::workspace_bytes(M, N, K)));
  CHECK(cudaMalloc(&cnt, tuned::counters_bytes(M, N, K)));
  CHECK(cudaMemset(cnt, 0, tuned::counters_bytes(M, N, K)));
  CHECK(cudaMemcpy(da, a.data(), a.size() * sizeof(evotune_elem_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, b.data(), b.size() * sizeof(evotune_elem_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dc, 0xFF, c.size() * sizeof(evotune_elem_t)));

  dim3 grid(tuned::grid_x(M, N, K), tuned::grid_y(M, N, K), tuned::grid_z(M, N, K));
  dim3 block(tuned::block_x(M, N, K), tuned::block_y(M, N, K), tuned::block_z(M, N, K));
  size_t smem = tuned::dynamic_smem_bytes(M, N, K);
  CHECK(cudaFuncSetAttribute(gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  auto launch = [&] {
    gemm_kernel<<<grid, block, smem>>>(da, db, dc, ws, cnt, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K));
  };
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(c.data(), dc, c.size() * sizeof(evotune_elem_t), cudaMemcpyDeviceToHost));

  // Sampled outputs (corners, edges, random) against double precision,
  // relative to the output type's resolution.
  std::vector<std::pair<long long, long long>> at = {{0, 0}, {M - 1, N - 1}, {0, N - 1}, {M - 1, 0}};
  for (int i = 0; i < 2000; ++i) at.emplace_back(rng() % M, rng() % N);
  const double ulp = tuned::kDtype[0] == 'b' ? 1.0 / 128 : 1.0 / 1024;
  double worst = 0;
  for (auto [i, j] : at) {
    double ref = 0;
    for (long long kk = 0; kk < K; ++kk) ref += double(float(a[i * K + kk])) * double(float(b[kk * N + j]));
    double got = float(c[i * N + j]);
    double err = std::fabs(got - ref) / (std::fabs(ref) * ulp + 1e-3 * std::sqrt(double(K)));
    worst = std::isfinite(got) ? std::max(worst, err) : INFINITY;
  }
  bool ok = worst <= 2.0;
  std::printf("check: %zu outputs against a double-precision reference, worst error %.2f of the tolerance: %s\n",
              at.size(), worst / 2.0, ok ? "PASS" : "FAIL");

  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 50; ++r) {
    CHECK(cudaEventRecord(e0));
    launch();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  double us = ms[ms.size() / 2] * 1e3;
  std::printf("latency: median %.1f us over 50 launches, %.1f TFLOP/s; the tuner measured %.1f us (L2 flushed)\n", us,
              2.0 * M * N * K / (us * 1e-6) / 1e12, tuned::kFitnessUs);
  return ok ? 0 : 1;
}
