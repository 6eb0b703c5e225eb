// cuBLASLt as a GEMM baseline, loaded at run time (dlopen), so that evotune
// starts and runs on a host without it. C[m,n] = A[m,k]·B[k,n], row-major
// fp16/bf16 buffers the caller owns, fp32 accumulation: the problem of the
// GEMM templates, on their own buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/error.hpp"
#include "core/types.hpp"

namespace evotune {

// The library is not installed (the baseline is skipped, never a failure).
struct LibraryMissing : EngineError {
  using EngineError::EngineError;
};

class CublasLtGemm {
 public:
  // Asks cuBLASLt's heuristic for up to `max_algos` algorithms, best first.
  // Throws LibraryMissing, or EngineError when cuBLASLt refuses the problem.
  // `trans_b`: b holds Bᵀ (n rows of k elements) instead of B; `trans_a`: a
  // holds Aᵀ (k rows of m) instead of A.
  CublasLtGemm(ElemType elem, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c, int max_algos,
               bool trans_b = false, bool trans_a = false);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  int algorithms() const;
  // "algo 21, tile 15, stages 20, split-K 1" (cuBLASLt's own ids).
  std::string describe(int i) const;
  // Launches algorithm i on `stream`; false (and why) when cuBLASLt refuses.
  bool run(int i, cudaStream_t stream, std::string& why);
  // "cuBLASLt 13.0.2 (/usr/local/cuda/lib64/libcublasLt.so.13)".
  std::string version() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace evotune
