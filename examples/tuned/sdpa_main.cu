// Runs the sdpa_fwd kernel as exported by `evotune export RUN -o sdpa_best.h`:
// the header's #defines select the tuned configuration of the template, its
// helpers give the launch geometry and buffer sizes. Checks the result against
// a double-precision CPU reference on sampled rows and prints the latency.
//
//   nvcc -std=c++17 -arch=sm_90 -I<repo> -I<repo>/kernel_templates/common \
//        -include sdpa_best.h examples/tuned/sdpa_main.cu -o sdpa_tuned
//   ./sdpa_tuned [B H S [HKV SKV]]   (D and causality come from the header;
//                                     HKV and SKV default to H and S)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#ifndef EVOTUNE_TUNED_SDPA_FWD_H_
#error "include an exported sdpa_fwd header first (nvcc -include sdpa_best.h)"
#endif
#include "kernel_templates/sdpa_fwd/kernel.cu"

#include "cuda_check.h"

namespace tuned = evotune_tuned::sdpa_fwd;

int main(int argc, char** argv) {
  long long B = argc > 3 ? std::atoll(argv[1]) : 2, H = argc > 3 ? std::atoll(argv[2]) : 8,
            S = argc > 3 ? std::atoll(argv[3]) : 512;
  const long long HKV = argc > 5 ? std::atoll(argv[4]) : H, SKV = argc > 5 ? std::atoll(argv[5]) : S;
  if (B < 1 || H < 1 || S < 1 || HKV < 1 || SKV < 1 || H % HKV != 0) {
    std::fprintf(stderr, "sdpa_tuned: need B, H, S, HKV, SKV >= 1 and HKV dividing H\n");
    return 2;
  }
  const long long D = HEAD_DIM, causal = IS_CAUSAL;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const size_t n = static_cast<size_t>(B * H * S * D), nkv = static_cast<size_t>(B * HKV * SKV * D);
  std::printf("sdpa_fwd %s, tuned config %s\nproblem B=%lld H=%lld HKV=%lld S=%lld SKV=%lld D=%lld causal=%lld\n",
              tuned::kDtype, tuned::kConfig, B, H, HKV, S, SKV, D, causal);

  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<evotune_elem_t> q(n), k(nkv), v(nkv), o(n);
  for (auto* t : {&q, &k, &v})
    for (auto& x : *t) x = evotune_elem_t(normal(rng));

  evotune_elem_t *dq, *dk, *dv, *dout;
  float* ws;
  unsigned* cnt;
  CHECK(cudaMalloc(&dq, n * sizeof(evotune_elem_t)));
  CHECK(cudaMalloc(&dk, nkv * sizeof(evotune_elem_t)));
  CHECK(cudaMalloc(&dv, nkv * sizeof(evotune_elem_t)));
  CHECK(cudaMalloc(&dout, n * sizeof(evotune_elem_t)));
  // Scratch: zero once; the kernel leaves its counters at zero after every launch.
  // The helpers take the problem's dims and options in the spec's order.
#define PROBLEM B, H, S, D, causal, HKV, SKV
  CHECK(cudaMalloc(&ws, tuned::workspace_bytes(PROBLEM)));
  CHECK(cudaMalloc(&cnt, tuned::counters_bytes(PROBLEM)));
  CHECK(cudaMemset(cnt, 0, tuned::counters_bytes(PROBLEM)));
  CHECK(cudaMemcpy(dq, q.data(), n * sizeof(evotune_elem_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dk, k.data(), nkv * sizeof(evotune_elem_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(dv, v.data(), nkv * sizeof(evotune_elem_t), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(dout, 0xFF, n * sizeof(evotune_elem_t)));  // NaN: an unwritten element fails the check

  dim3 grid(tuned::grid_x(PROBLEM), tuned::grid_y(PROBLEM), tuned::grid_z(PROBLEM));
  dim3 block(tuned::block_x(PROBLEM), tuned::block_y(PROBLEM), tuned::block_z(PROBLEM));
  size_t smem = tuned::dynamic_smem_bytes(PROBLEM);
  CHECK(cudaFuncSetAttribute(sdpa_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  auto launch = [&] {
    sdpa_fwd<<<grid, block, smem>>>(dq, dk, dv, dout, ws, cnt, static_cast<int>(B), static_cast<int>(H),
                                    static_cast<int>(HKV), static_cast<int>(S), static_cast<int>(SKV), scale);
  };
  launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(o.data(), dout, n * sizeof(evotune_elem_t), cudaMemcpyDeviceToHost));

  // Double-precision reference on sampled rows, every head: query head h reads
  // key/value head h / (H / HKV); causal rows see keys j <= i + SKV - S, and a
  // row that sees none is 0.
  double max_err = 0;
  long long checked = 0;
  std::vector<double> p(static_cast<size_t>(SKV));
  for (long long bh = 0; bh < B * H; ++bh) {
    const long long b = bh / H, h = bh % H;
    const size_t kv_base = static_cast<size_t>((b * HKV + h / (H / HKV)) * SKV * D);
    for (long long i : {0LL, S / 3, S / 2, S - 1}) {
      const size_t base = static_cast<size_t>(bh * S * D);
      const long long kv = causal ? std::max(0LL, std::min(SKV, i + SKV - S + 1)) : SKV;
      double m = -INFINITY, l = 0;
      for (long long j = 0; j < kv; ++j) {
        double s = 0;
        for (long long d = 0; d < D; ++d)
          s += double(float(q[base + i * D + d])) * double(float(k[kv_base + j * D + d]));
        p[j] = s * scale;
        m = std::max(m, p[j]);
      }
      for (long long j = 0; j < kv; ++j) l += (p[j] = std::exp(p[j] - m));
      for (long long d = 0; d < D; ++d) {
        double ref = 0;
        for (long long j = 0; j < kv; ++j) ref += p[j] * double(float(v[kv_base + j * D + d]));
        ref = kv > 0 ? ref / l : 0.0;
        double got = float(o[base + i * D + d]);
        max_err = std::isfinite(got) ? std::max(max_err, std::fabs(got - ref)) : INFINITY;
        ++checked;
      }
    }
  }
  const double tol = tuned::kDtype[0] == 'b' ? 3e-2 : 5e-3;
  bool ok = max_err <= tol;
  std::printf("check: %lld outputs against a double-precision reference, max abs error %.3g (tolerance %.1g): %s\n",
              checked, max_err, tol, ok ? "PASS" : "FAIL");

  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> ms;
  for (int r = 0; r < 100; ++r) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  double us = ms[ms.size() / 2] * 1e3;
  std::printf("latency: median %.2f us over 100 launches (hot L2), %.1f TFLOP/s; the tuner measured %.2f us (L2 flushed)\n", us,
              4.0 * B * H * S * SKV * D / (causal ? 2 : 1) / (us * 1e-6) / 1e12, tuned::kFitnessUs);
  return ok ? 0 : 1;
}
