#include "engine/cublaslt.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <utility>

#include <cublasLt.h>

#include "core/strings.hpp"
#include "engine/cuda_api.hpp"

namespace evotune {

namespace {

// The entry points used, resolved from the library.
struct LtApi {
  void* handle = nullptr;
  std::string path;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmulAlgoConfigGetAttribute) algo_get = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

// $EVOTUNE_CUBLASLT, then the loader's search path, then the toolkit's.
const LtApi& lt_api() {
  static const LtApi api = [] {
    LtApi a;
    std::vector<std::string> tried;
    std::vector<std::string> names;
    if (const char* e = std::getenv("EVOTUNE_CUBLASLT"); e && *e) names.emplace_back(e);
    for (const char* n : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) names.emplace_back(n);
    for (const char* dir : {static_cast<const char*>(std::getenv("CUDA_HOME")), "/usr/local/cuda"})
      if (dir && *dir) names.push_back(std::string(dir) + "/lib64/libcublasLt.so");
    for (const std::string& n : names) {
      tried.push_back(n);
      if ((a.handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        a.path = n;
        break;
      }
    }
    if (!a.handle) return a;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(a.handle, name));
    };
    sym(a.create, "cublasLtCreate");
    sym(a.destroy, "cublasLtDestroy");
    sym(a.get_version, "cublasLtGetVersion");
    sym(a.desc_create, "cublasLtMatmulDescCreate");
    sym(a.desc_destroy, "cublasLtMatmulDescDestroy");
    sym(a.desc_set, "cublasLtMatmulDescSetAttribute");
    sym(a.layout_create, "cublasLtMatrixLayoutCreate");
    sym(a.layout_destroy, "cublasLtMatrixLayoutDestroy");
    sym(a.pref_create, "cublasLtMatmulPreferenceCreate");
    sym(a.pref_destroy, "cublasLtMatmulPreferenceDestroy");
    sym(a.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    sym(a.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    sym(a.algo_get, "cublasLtMatmulAlgoConfigGetAttribute");
    sym(a.matmul, "cublasLtMatmul");
    return a;
  }();
  if (!api.handle)
    throw LibraryMissing(
        "cuBLASLt not found (libcublasLt.so.13 or .12 on the loader's path, $CUDA_HOME/lib64, "
        "/usr/local/cuda/lib64; or set EVOTUNE_CUBLASLT)");
  if (!api.create || !api.matmul || !api.heuristic || !api.desc_create || !api.layout_create || !api.pref_create ||
      !api.algo_get || !api.get_version || !api.destroy || !api.desc_destroy || !api.layout_destroy ||
      !api.pref_destroy || !api.pref_set || !api.desc_set)
    throw LibraryMissing(api.path + " lacks a cuBLASLt entry point evotune uses");
  return api;
}

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw EngineError(strfmt("cuBLASLt %s: status %d", what, static_cast<int>(s)));
}

constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLAS recommends on Hopper

}  // namespace

struct CublasLtGemm::Impl {
  const LtApi& api = lt_api();
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> algos;
  cuda::DeviceBuffer workspace{kWorkspaceBytes};
  const void *a = nullptr, *b = nullptr;
  void* c = nullptr;
  float alpha = 1, beta = 0;

  ~Impl() {
    if (pref) api.pref_destroy(pref);
    for (auto* l : {lc, lb, la})
      if (l) api.layout_destroy(l);
    if (desc) api.desc_destroy(desc);
    if (handle) api.destroy(handle);
  }
};

CublasLtGemm::CublasLtGemm(ElemType elem, int64_t m, int64_t n, int64_t k, const void* a, const void* b, void* c,
                           int max_algos, bool trans_b, bool trans_a)
    : impl_(std::make_unique<Impl>()) {
  Impl& x = *impl_;
  const LtApi& api = x.api;
  x.a = a;
  x.b = b;
  x.c = c;
  const cudaDataType_t t = elem == ElemType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  lt_check(api.create(&x.handle), "create");
  lt_check(api.desc_create(&x.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul descriptor");
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: cuBLASLt's A is our B
  // (n×k, leading dimension n), its B our A (k×m, leading dimension k). An
  // operand stored transposed (our row-major Bᵀ, n×k, or Aᵀ, k×m) is the
  // other way round, column-major with its other dimension leading: it is
  // laid out as stored and cuBLASLt transposes it.
  auto operand = [&](cublasLtMatrixLayout_t* layout, bool trans, cublasLtMatmulDescAttributes_t op_attr, int64_t rows,
                     int64_t cols, const char* what) {
    if (trans) {
      const cublasOperation_t op = CUBLAS_OP_T;
      lt_check(api.desc_set(x.desc, op_attr, &op, sizeof op), (std::string("transposed ") + what).c_str());
      std::swap(rows, cols);
    }
    lt_check(api.layout_create(layout, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), rows),
             (std::string("layout of ") + what).c_str());
  };
  operand(&x.la, trans_b, CUBLASLT_MATMUL_DESC_TRANSA, n, k, "B");
  operand(&x.lb, trans_a, CUBLASLT_MATMUL_DESC_TRANSB, k, m, "A");
  lt_check(api.layout_create(&x.lc, t, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n), "layout of C");
  lt_check(api.pref_create(&x.pref), "preference");
  const uint64_t ws = kWorkspaceBytes;
  lt_check(api.pref_set(x.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "workspace preference");
  x.algos.resize(static_cast<size_t>(std::max(1, max_algos)));
  int found = 0;
  lt_check(api.heuristic(x.handle, x.desc, x.la, x.lb, x.lc, x.lc, x.pref, static_cast<int>(x.algos.size()),
                         x.algos.data(), &found),
           "heuristic");
  x.algos.resize(static_cast<size_t>(std::max(0, found)));
  if (x.algos.empty()) throw EngineError("cuBLASLt's heuristic offers no algorithm for this problem");
}

CublasLtGemm::~CublasLtGemm() = default;

int CublasLtGemm::algorithms() const {
  return static_cast<int>(impl_->algos.size());
}

std::string CublasLtGemm::describe(int i) const {
  const cublasLtMatmulAlgo_t& algo = impl_->algos.at(static_cast<size_t>(i)).algo;
  auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
    uint32_t v = 0;
    size_t written = 0;
    impl_->api.algo_get(&algo, attr, &v, sizeof v, &written);
    return static_cast<long long>(v);
  };
  return strfmt("algo %lld, tile %lld, stages %lld, split-K %lld", get(CUBLASLT_ALGO_CONFIG_ID),
                get(CUBLASLT_ALGO_CONFIG_TILE_ID), get(CUBLASLT_ALGO_CONFIG_STAGES_ID),
                get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM));
}

bool CublasLtGemm::run(int i, cudaStream_t stream, std::string& why) {
  Impl& x = *impl_;
  cublasStatus_t s = x.api.matmul(x.handle, x.desc, &x.alpha, x.b, x.la, x.a, x.lb, &x.beta, x.c, x.lc, x.c, x.lc,
                                  &x.algos.at(static_cast<size_t>(i)).algo, x.workspace.get(), kWorkspaceBytes, stream);
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  why = strfmt("cublasLtMatmul: status %d", static_cast<int>(s));
  return false;
}

std::string CublasLtGemm::version() const {
  const size_t v = impl_->api.get_version();
  return strfmt("cuBLASLt %zu.%zu.%zu (%s)", v / 10000, (v / 100) % 100, v % 100, impl_->api.path.c_str());
}

}  // namespace evotune
