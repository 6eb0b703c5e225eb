#include "engine/gpu_evaluator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include <nvtx3/nvToolsExt.h>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/stats.hpp"
#include "core/strings.hpp"
#include "engine/cublaslt.hpp"
#include "engine/ncu.hpp"
#include "engine/support_kernels.hpp"

namespace evotune {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int elem_code(ElemType e) {
  return static_cast<int>(e);
}

unsigned grid_for(int64_t n, int num_sms) {
  int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, static_cast<int64_t>(num_sms) * 8));
}

// Why the geometry cannot be launched at all, or empty.
std::string geometry_problem(const LaunchDims& d) {
  for (int i = 0; i < 3; ++i)
    if (d.grid[i] < 1 || d.block[i] < 1 || d.cluster[i] < 1) return "launch geometry has a dimension below 1";
  if (d.grid[0] > 2147483647LL || d.grid[1] > 65535 || d.grid[2] > 65535)
    return strfmt("grid (%lld,%lld,%lld) exceeds the device's limits", static_cast<long long>(d.grid[0]),
                  static_cast<long long>(d.grid[1]), static_cast<long long>(d.grid[2]));
  if (d.block[0] * d.block[1] * d.block[2] > 1024)
    return strfmt("block of %lld threads exceeds 1024", static_cast<long long>(d.block[0] * d.block[1] * d.block[2]));
  for (int i = 0; i < 3; ++i)
    if (d.grid[i] % d.cluster[i] != 0) return "grid is not a multiple of the cluster shape";
  if (d.smem < 0) return "negative dynamic shared memory";
  return {};
}

}  // namespace

CUtensorMapDataType tmap_type(ElemType e) {
  switch (e) {
    case ElemType::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case ElemType::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case ElemType::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case ElemType::i32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case ElemType::u32:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    default:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  }
}

// Encodes a tiled tensor map; a disabled map is all zeros. Throws
// EngineError with the driver's reason (e.g. a stride not a multiple of 16).
void encode_tmap(CUtensorMap& m, const TensorMapPlan& t, void* base) {
  std::memset(&m, 0, sizeof m);
  if (!t.enabled) return;
  const cuda::DriverApi& d = cuda::driver();
  if (!d.tensorMapEncodeTiled) throw EngineError("this CUDA driver has no cuTensorMapEncodeTiled (TMA needs sm_90)");
  auto swz = t.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
             : t.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
             : t.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                               : CU_TENSOR_MAP_SWIZZLE_NONE;
  auto l2 = t.l2_promotion == 256   ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
            : t.l2_promotion == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
            : t.l2_promotion == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                    : CU_TENSOR_MAP_L2_PROMOTION_NONE;
  std::vector<cuuint64_t> dims(t.dims.begin(), t.dims.end()), strides(t.strides_bytes.begin(), t.strides_bytes.end());
  std::vector<cuuint32_t> box(t.box.begin(), t.box.end()), estride(t.dims.size(), 1);
  CUresult r = d.tensorMapEncodeTiled(
      &m, tmap_type(t.elem), static_cast<cuuint32_t>(dims.size()), base, dims.data(), strides.data(), box.data(),
      estride.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, swz, l2,
      t.oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw EngineError("cuTensorMapEncodeTiled over " + t.buffer + ": " + cuda::error_text(r));
}

// The buffer a tensor map covers: a problem buffer, or one of the launch's
// scratch buffers.
static void* tmap_base(const LaunchPlan& plan, const std::map<std::string, GuardedBuffer>& buffers,
                       const std::vector<GuardedBuffer>& scratch, const std::string& name) {
  if (auto it = buffers.find(name); it != buffers.end()) return it->second.data();
  for (size_t i = 0; i < plan.scratch.size() && i < scratch.size(); ++i)
    if (plan.scratch[i].name == name) return scratch[i].data();
  throw EngineError("tensor map over unknown buffer " + name);
}

// Kernel parameters for one launch, with stable storage.
struct GpuSession::Launcher {
  CUfunction fn = nullptr;
  LaunchDims dims;
  std::vector<uint64_t> storage;
  std::vector<CUtensorMap> tmaps;  // 64-byte aligned by their type
  std::vector<void*> params;

  Launcher(CUfunction function, const LaunchPlan& plan, const std::map<std::string, GuardedBuffer>& buffers,
           const std::vector<GuardedBuffer>& scratch)
      : fn(function), dims(plan.dims), storage(plan.args.size(), 0) {
    size_t n_tmaps = 0;
    for (const ArgPlan& a : plan.args) n_tmaps += a.kind == ArgPlan::Kind::tmap;
    tmaps.resize(n_tmaps);  // sized once: params point into it
    size_t next_tmap = 0;
    for (size_t i = 0; i < plan.args.size(); ++i) {
      const ArgPlan& a = plan.args[i];
      void* slot = &storage[i];
      switch (a.kind) {
        case ArgPlan::Kind::buffer: {
          auto it = buffers.find(a.buffer);
          if (it == buffers.end()) throw EngineError("launch plan names unknown buffer " + a.buffer);
          void* p = it->second.data();
          std::memcpy(slot, &p, sizeof p);
          break;
        }
        case ArgPlan::Kind::scratch: {
          void* p = scratch.at(static_cast<size_t>(a.scratch)).data();
          std::memcpy(slot, &p, sizeof p);
          break;
        }
        case ArgPlan::Kind::tmap: {
          CUtensorMap& m = tmaps[next_tmap++];
          encode_tmap(m, a.tmap, tmap_base(plan, buffers, scratch, a.tmap.buffer));
          slot = &m;
          break;
        }
        case ArgPlan::Kind::scalar:
          if (a.type == ScalarType::f32) {
            float f = static_cast<float>(a.f);
            std::memcpy(slot, &f, sizeof f);
          } else if (a.type == ScalarType::i64) {
            std::memcpy(slot, &a.i, sizeof a.i);
          } else {
            int32_t v = static_cast<int32_t>(a.i);
            std::memcpy(slot, &v, sizeof v);
          }
          break;
      }
      params.push_back(slot);
    }
  }

  CUresult launch(cudaStream_t stream) {
    const cuda::DriverApi& d = cuda::driver();
    auto u = [](int64_t v) { return static_cast<unsigned>(v); };
    if (dims.cluster[0] * dims.cluster[1] * dims.cluster[2] == 1)
      return d.launchKernel(fn, u(dims.grid[0]), u(dims.grid[1]), u(dims.grid[2]), u(dims.block[0]), u(dims.block[1]),
                            u(dims.block[2]), u(dims.smem), stream, params.data(), nullptr);
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = u(dims.cluster[0]);
    attr.value.clusterDim.y = u(dims.cluster[1]);
    attr.value.clusterDim.z = u(dims.cluster[2]);
    CUlaunchConfig cfg{};
    cfg.gridDimX = u(dims.grid[0]);
    cfg.gridDimY = u(dims.grid[1]);
    cfg.gridDimZ = u(dims.grid[2]);
    cfg.blockDimX = u(dims.block[0]);
    cfg.blockDimY = u(dims.block[1]);
    cfg.blockDimZ = u(dims.block[2]);
    cfg.sharedMemBytes = u(dims.smem);
    cfg.hStream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    return d.launchKernelEx(&cfg, fn, params.data(), nullptr);
  }
};

namespace {

// A candidate's failure inside an evaluation: thrown by the steps, turned
// into the reply's status once, in evaluate().
struct Fault {
  TrialStatus status;
  std::string message;
  bool restart = false;
};

// Guard bytes on each side of a buffer: as large as the buffer, so that a
// tile-sized overrun of a small or large tensor lands in it, within bounds
// that keep the checks cheap.
size_t guard_bytes(size_t bytes) {
  constexpr size_t kMin = size_t{1} << 20, kMax = size_t{64} << 20;
  return (std::clamp(bytes, kMin, kMax) + 255) / 256 * 256;
}

}  // namespace

// One candidate, loaded: its modules and per problem its scratch buffers and
// launcher, with the number of launches made so far.
struct GpuSession::Candidate {
  std::vector<cuda::Module> modules;
  struct PerProblem {
    std::vector<GuardedBuffer> scratch;
    std::vector<std::string> scratch_names;
    std::array<std::unique_ptr<Launcher>, kDraws> launchers;  // per draw, the scratch shared
    long long launches = 0;
  };
  std::vector<PerProblem> problems;
};

void prewarm_context(int device) {
  cuda::driver();  // NoDeviceError here, before anything else
  cuda::check(cudaSetDevice(device), "cudaSetDevice");
  cuda::check(cudaFree(nullptr), "creating the CUDA context");
}

GpuSession::GpuSession(const SetupRequest& req) : setup_(req), device_(req.device) {
  prewarm_context(device_);
  stream_ = std::make_unique<cuda::Stream>();
  cudaDeviceProp prop{};
  cuda::check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  smem_optin_ = static_cast<long long>(prop.sharedMemPerBlockOptin);
  num_sms_ = prop.multiProcessorCount;
  if (req.cubins.empty()) throw EngineError("setup carries no support kernels");
  support_ = cuda::Module(req.cubins[0]);
  fill_fn_ = support_.function("evotune_fill");
  poison_fn_ = support_.function("evotune_poison");
  compare_fn_ = support_.function("evotune_compare");
  checksum_fn_ = support_.function("evotune_checksum");
  guard_fill_fn_ = support_.function("evotune_guard_fill");
  guard_check_fn_ = support_.function("evotune_guard_check");
  stats_ = cuda::DeviceBuffer(64);
  size_t flush_bytes = static_cast<size_t>(std::max(1.0, req.timing.flush_bytes_factor) * prop.l2CacheSize);
  if (req.timing.flush_l2) flush_ = cuda::DeviceBuffer(std::max<size_t>(flush_bytes, 1 << 20));

  for (size_t i = 1; i < req.cubins.size(); ++i) reference_modules_.emplace_back(req.cubins[i]);
  uint64_t problem_salt = 0;
  for (const ProblemSetup& ps : req.problems) {
    ++problem_salt;
    ProblemState st;
    st.setup = ps;
    for (size_t d = 0; d < kDraws; ++d) {
      const uint64_t seed = req.seed * 0x9E3779B97F4A7C15ULL + problem_salt * 1000003ULL + d * 0xD1B54A32D192ED03ULL;
      try {
        st.draws[d] = draw_data(ps, seed);
      } catch (const EngineError& e) {
        if (d == 0) throw;
        throw EngineError(ps.label +
                          ": the second draw of the inputs (for the check after timing, as large as the "
                          "first): " +
                          e.what());
      }
    }
    problems_.push_back(std::move(st));
  }
  sync("setting up the problems");
}

GpuSession::~GpuSession() = default;

GpuSession::DataSet GpuSession::draw_data(const ProblemSetup& ps, uint64_t seed_base) {
  DataSet ds;
  for (const BufferPlan& b : ps.buffers) {
    const uint64_t seed = seed_base + b.salt;
    GuardedBuffer buf = allocate(static_cast<size_t>(b.count) * static_cast<size_t>(elem_bytes(b.elem)), seed);
    if (b.role == ArgRole::in)
      fill(buf.data(), b.elem, b.count, b.init, b.scale, b.offset, seed);
    else
      poison(buf.data(), b.elem, b.count);
    ds.buffers.emplace(b.name, std::move(buf));
  }
  const LaunchPlan& ref = ps.reference;
  if (ref.cubin < 1 || static_cast<size_t>(ref.cubin) > reference_modules_.size())
    throw EngineError("setup names reference cubin " + std::to_string(ref.cubin) + " that it does not carry");
  CUfunction fn = reference_modules_[static_cast<size_t>(ref.cubin - 1)].function(ref.entry);
  std::string geo = geometry_problem(ref.dims);
  if (!geo.empty()) throw EngineError("reference launch on " + ps.label + ": " + geo);
  // Always opt in: 48 KiB of dynamic shared memory is the default limit
  // only for kernels without static shared memory.
  if (ref.dims.smem > 0)
    cuda::check(cuda::driver().funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                static_cast<int>(ref.dims.smem)),
                "reference: raising the dynamic shared memory limit");
  static const std::vector<GuardedBuffer> no_scratch;
  ds.reference = std::make_unique<Launcher>(fn, ref, ds.buffers, no_scratch);
  cuda::check(ds.reference->launch(stream_->get()), ("launching the reference on " + ps.label).c_str());
  sync(("the reference kernel on " + ps.label).c_str());
  for (const auto& [name, buf] : ds.buffers) {
    std::string damage = guard_damage(buf, name);
    if (!damage.empty()) throw EngineError("the reference kernel on " + ps.label + " " + damage);
  }
  for (const BufferPlan& b : ps.buffers)
    if (b.role == ArgRole::in || ends_with(b.name, ".ref")) ds.checksums[b.name] = checksum(ds.buffers.at(b.name));
  return ds;
}

void GpuSession::sync(const char* what) {
  cuda::check(cudaStreamSynchronize(stream_->get()), what);
}

GuardedBuffer GpuSession::allocate(size_t bytes, uint64_t salt) {
  GuardedBuffer b;
  b.bytes = bytes;
  b.guard = setup_.guard_buffers ? guard_bytes(bytes) : 0;
  b.salt = salt;
  b.mem = cuda::DeviceBuffer(b.guard + bytes + b.guard);
  if (b.guard == 0) return b;
  for (void* side : {b.mem.get(), static_cast<void*>(static_cast<char*>(b.data()) + bytes)}) {
    void* p = side;
    long long n = static_cast<long long>(b.guard);
    unsigned long long sd = salt + (side == b.mem.get() ? 0 : 1);
    void* args[] = {&p, &n, &sd};
    cuda::check(cuda::driver().launchKernel(guard_fill_fn_, grid_for(n, num_sms_), 1, 1, 256, 1, 1, 0, stream_->get(),
                                            args, nullptr),
                "evotune_guard_fill");
  }
  return b;
}

std::string GpuSession::guard_damage(const GuardedBuffer& buf, const std::string& name) {
  if (buf.guard == 0) return {};
  std::vector<std::string> why;
  for (int side = 0; side < 2; ++side) {
    const unsigned long long init[3] = {0, ~0ULL, 0};
    cuda::check(cudaMemcpyAsync(stats_.get(), init, sizeof init, cudaMemcpyHostToDevice, stream_->get()),
                "cudaMemcpyAsync");
    const void* p = side == 0 ? buf.mem.get() : static_cast<const void*>(static_cast<char*>(buf.data()) + buf.bytes);
    long long n = static_cast<long long>(buf.guard);
    unsigned long long sd = buf.salt + static_cast<unsigned long long>(side);
    void* out = stats_.get();
    void* args[] = {&p, &n, &sd, &out};
    cuda::check(cuda::driver().launchKernel(guard_check_fn_, grid_for(n, num_sms_), 1, 1, 256, 1, 1, 0, stream_->get(),
                                            args, nullptr),
                "evotune_guard_check");
    unsigned long long res[3] = {};
    cuda::check(cudaMemcpyAsync(res, stats_.get(), sizeof res, cudaMemcpyDeviceToHost, stream_->get()),
                "cudaMemcpyAsync");
    sync("checking the guard regions");
    if (res[0] == 0) continue;
    if (side == 0)
      why.push_back(strfmt("wrote %llu byte(s) before the start of buffer '%s' (as far as %llu bytes before it)",
                           res[0], name.c_str(), static_cast<unsigned long long>(buf.guard) - res[1]));
    else
      why.push_back(strfmt("wrote %llu byte(s) past the end of buffer '%s' (%zu bytes; as far as %llu bytes past it)",
                           res[0], name.c_str(), buf.bytes, res[2]));
  }
  return join(why, "; ");
}

void GpuSession::fill(void* p, ElemType elem, int64_t count, InitKind init, double scale, double offset,
                      uint64_t seed) {
  if (count == 0) return;
  long long n = count;
  int e = elem_code(elem), k = static_cast<int>(init);
  float sc = static_cast<float>(scale), off = static_cast<float>(offset);
  unsigned long long sd = seed;
  void* args[] = {&p, &n, &e, &k, &sc, &off, &sd};
  cuda::check(cuda::driver().launchKernel(fill_fn_, grid_for(count, num_sms_), 1, 1, 256, 1, 1, 0, stream_->get(), args,
                                          nullptr),
              "evotune_fill");
}

void GpuSession::poison(void* p, ElemType elem, int64_t count) {
  if (count == 0) return;
  long long n = count;
  int e = elem_code(elem);
  void* args[] = {&p, &n, &e};
  cuda::check(cuda::driver().launchKernel(poison_fn_, grid_for(count, num_sms_), 1, 1, 256, 1, 1, 0, stream_->get(),
                                          args, nullptr),
              "evotune_poison");
}

unsigned long long GpuSession::checksum(const GuardedBuffer& buf) {
  cuda::check(cudaMemsetAsync(stats_.get(), 0, 8, stream_->get()), "cudaMemsetAsync");
  const void* p = buf.data();
  long long bytes = static_cast<long long>(buf.bytes);
  void* out = stats_.get();
  void* args[] = {&p, &bytes, &out};
  cuda::check(cuda::driver().launchKernel(checksum_fn_, grid_for(bytes / 4 + 1, num_sms_), 1, 1, 256, 1, 1, 0,
                                          stream_->get(), args, nullptr),
              "evotune_checksum");
  unsigned long long h = 0;
  cuda::check(cudaMemcpyAsync(&h, stats_.get(), 8, cudaMemcpyDeviceToHost, stream_->get()), "cudaMemcpyAsync");
  sync("checksum");
  return h;
}

ErrorStats GpuSession::compare(const GuardedBuffer& out, ElemType elem, const GuardedBuffer& ref, int64_t count,
                               const Tolerances& tol) {
  ErrorStats s;
  if (count == 0) return s;
  cuda::check(cudaMemsetAsync(stats_.get(), 0, 64, stream_->get()), "cudaMemsetAsync");
  const void* o = out.data();
  int e = elem_code(elem);
  const void* r = ref.data();
  long long n = count;
  float atol = static_cast<float>(tol.atol), rtol = static_cast<float>(tol.rtol);
  void* acc = stats_.get();
  void* counts = static_cast<char*>(stats_.get()) + 32;
  void* args[] = {&o, &e, &r, &n, &atol, &rtol, &acc, &counts};
  cuda::check(cuda::driver().launchKernel(compare_fn_, grid_for(count, num_sms_), 1, 1, 256, 1, 1, 0, stream_->get(),
                                          args, nullptr),
              "evotune_compare");
  double acc_h[4] = {};
  unsigned long long cnt[3] = {};
  cuda::check(cudaMemcpyAsync(acc_h, stats_.get(), 32, cudaMemcpyDeviceToHost, stream_->get()), "cudaMemcpyAsync");
  cuda::check(cudaMemcpyAsync(cnt, static_cast<char*>(stats_.get()) + 32, 24, cudaMemcpyDeviceToHost, stream_->get()),
              "cudaMemcpyAsync");
  sync("comparing with the reference");
  s.max_abs = acc_h[0];
  int64_t finite = count - static_cast<int64_t>(cnt[1] + cnt[2]);
  s.mean_abs = finite > 0 ? acc_h[1] / static_cast<double>(finite) : 0;
  s.rel_l2 = acc_h[3] > 0 ? std::sqrt(acc_h[2] / acc_h[3]) : std::sqrt(acc_h[2]);
  s.bad_frac = static_cast<double>(cnt[0]) / static_cast<double>(count);
  s.nan_count = static_cast<int64_t>(cnt[1]);
  s.unwritten = static_cast<int64_t>(cnt[2]);
  return s;
}

std::string verdict(const ErrorStats& e, const Tolerances& tol, int64_t count) {
  std::vector<std::string> why;
  if (e.unwritten > 0)
    why.push_back(strfmt("%lld of %lld elements never written", static_cast<long long>(e.unwritten),
                         static_cast<long long>(count)));
  if (e.nan_count > 0) why.push_back(strfmt("%lld NaN/Inf elements", static_cast<long long>(e.nan_count)));
  if (tol.max_abs > 0 && e.max_abs > tol.max_abs)
    why.push_back(strfmt("max abs error %.4g > %.4g", e.max_abs, tol.max_abs));
  if (tol.mean_abs > 0 && e.mean_abs > tol.mean_abs)
    why.push_back(strfmt("mean abs error %.4g > %.4g", e.mean_abs, tol.mean_abs));
  if (e.unwritten == 0 && e.nan_count == 0 && e.bad_frac > tol.max_bad_frac)
    why.push_back(strfmt("%.4g%% of elements outside atol %.3g + rtol %.3g*|ref| (allowed %.4g%%)", 100 * e.bad_frac,
                         tol.atol, tol.rtol, 100 * tol.max_bad_frac));
  return join(why, "; ");
}

EvalReply GpuSession::evaluate(const EvalRequest& req) {
  EvalReply reply;
  auto t0 = Clock::now();
  double later_verify_ms = 0;
  try {
    if (req.launches.size() != problems_.size())
      throw Fault{TrialStatus::launch_error, "evaluation request does not match the set-up problems"};
    Candidate cand = load(req);
    reply.per_problem.resize(problems_.size());
    for (size_t pi = 0; pi < problems_.size(); ++pi) {
      reply.per_problem[pi].problem = static_cast<int>(pi);
      reply.per_problem[pi].err = verify_launch(pi, cand, false);
    }
    reply.verify_ms = ms_since(t0);
    const auto t_bench = Clock::now();
    for (size_t pi = 0; pi < problems_.size(); ++pi) {
      if (problems_[pi].setup.timed) time_problem(pi, cand, req, reply.per_problem[pi]);
      const auto t_later = Clock::now();
      verify_launch(pi, cand, true);
      later_verify_ms += ms_since(t_later);
    }
    reply.bench_ms = ms_since(t_bench) - later_verify_ms;
    reply.verify_ms += later_verify_ms;
    if (std::any_of(problems_.begin(), problems_.end(), [](const ProblemState& p) { return p.setup.timed; }))
      last_timed_ = Clock::now();
  } catch (const Fault& f) {
    reply.status = f.status;
    reply.error = f.message;
    reply.worker_must_restart = f.restart;
    if (reply.verify_ms <= 0) reply.verify_ms = ms_since(t0);
  }
  return reply;
}

GpuSession::Candidate GpuSession::load(const EvalRequest& req) {
  Candidate cand;
  try {
    for (const auto& c : req.cubins) cand.modules.emplace_back(c);
  } catch (const EngineError& e) {
    throw Fault{TrialStatus::launch_error, std::string("loading the cubin: ") + e.what()};
  }
  cand.problems.resize(problems_.size());
  for (size_t pi = 0; pi < problems_.size(); ++pi) {
    ProblemState& st = problems_[pi];
    const LaunchPlan& lp = req.launches[pi];
    std::string geo = geometry_problem(lp.dims);
    if (!geo.empty()) throw Fault{TrialStatus::launch_error, st.setup.label + ": " + geo};
    if (lp.cubin < 0 || static_cast<size_t>(lp.cubin) >= cand.modules.size())
      throw Fault{TrialStatus::launch_error, "launch plan names a missing cubin"};
    CUfunction fn = nullptr;
    try {
      fn = cand.modules[static_cast<size_t>(lp.cubin)].function(lp.entry);
    } catch (const EngineError& e) {
      throw Fault{TrialStatus::launch_error, e.what()};
    }
    if (lp.dims.smem > 0) {  // opt in always: static shared memory lowers the default 48 KiB
      CUresult r = cuda::driver().funcSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                   static_cast<int>(lp.dims.smem));
      if (r != CUDA_SUCCESS)
        throw Fault{TrialStatus::launch_error,
                    strfmt("%lld bytes of dynamic shared memory refused (device allows %lld per block): ",
                           static_cast<long long>(lp.dims.smem), smem_optin_) +
                        cuda::error_text(r)};
    }
    Candidate::PerProblem& pp = cand.problems[pi];
    try {
      uint64_t salt = 0x5C7A7C400000ULL + pi * 64;
      for (const ScratchPlan& sp : lp.scratch) {
        const int64_t count = std::max<int64_t>(sp.count, 1);
        pp.scratch.push_back(allocate(static_cast<size_t>(count) * static_cast<size_t>(elem_bytes(sp.elem)), ++salt));
        pp.scratch_names.push_back(sp.name.empty() ? "scratch" : sp.name);
        fill(pp.scratch.back().data(), sp.elem, count, sp.init, 1.0, 0.0, 12345);
      }
      for (size_t d = 0; d < kDraws; ++d)
        pp.launchers[d] = std::make_unique<Launcher>(fn, lp, st.draws[d].buffers, pp.scratch);
    } catch (const EngineError& e) {
      throw Fault{TrialStatus::launch_error, st.setup.label + ": " + e.what()};
    }
  }
  return cand;
}

const BufferPlan& GpuSession::buffer_plan(size_t pi, const std::string& name) const {
  for (const auto& b : problems_[pi].setup.buffers)
    if (b.name == name) return b;
  throw EngineError("set-up has no buffer " + name);
}

void GpuSession::poison_outputs(size_t pi, size_t draw) {
  for (const auto& name : problems_[pi].setup.outputs)
    poison(problems_[pi].draws[draw].buffers.at(name).data(), buffer_plan(pi, name).elem, buffer_plan(pi, name).count);
}

ErrorStats GpuSession::compare_outputs(size_t pi, int64_t& total_count, size_t draw) {
  ProblemState& st = problems_[pi];
  const auto& buffers = st.draws[draw].buffers;
  ErrorStats total;
  double weighted_mean = 0;
  total_count = 0;
  for (const auto& name : st.setup.outputs) {
    const BufferPlan& b = buffer_plan(pi, name);
    ErrorStats es = compare(buffers.at(name), b.elem, buffers.at(name + ".ref"), b.count, st.setup.tol);
    total.max_abs = std::max(total.max_abs, es.max_abs);
    weighted_mean += es.mean_abs * static_cast<double>(b.count);
    total.bad_frac += es.bad_frac * static_cast<double>(b.count);
    total.rel_l2 = std::max(total.rel_l2, es.rel_l2);
    total.nan_count += es.nan_count;
    total.unwritten += es.unwritten;
    total_count += b.count;
  }
  if (total_count > 0) {
    total.mean_abs = weighted_mean / static_cast<double>(total_count);
    total.bad_frac /= static_cast<double>(total_count);
  }
  return total;
}

// Poisons the outputs, launches once, and checks everything a candidate can
// break: the guards around its buffers, its outputs against the reference,
// its inputs untouched. After the timed launches, on the second draw of the
// inputs: a mismatch there means the kernel depends on state earlier
// launches left behind (it would give the first draw's answer).
ErrorStats GpuSession::verify_launch(size_t pi, Candidate& cand, bool after_timing) {
  ProblemState& st = problems_[pi];
  Candidate::PerProblem& pp = cand.problems[pi];
  const std::string& label = st.setup.label;
  const size_t draw = after_timing ? 1 : 0;
  DataSet& data = st.draws[draw];
  ErrorStats total;
  int64_t total_count = 0;
  try {
    poison_outputs(pi, draw);
    CUresult r = pp.launchers[draw]->launch(stream_->get());
    ++pp.launches;
    if (r != CUDA_SUCCESS) {
      bool sticky = cuda::is_sticky(static_cast<cudaError_t>(r));
      throw Fault{sticky ? TrialStatus::crashed : TrialStatus::launch_error,
                  label + ": launch failed: " + cuda::error_text(r), sticky};
    }
    cudaError_t e = cudaStreamSynchronize(stream_->get());
    if (e != cudaSuccess) throw Fault{TrialStatus::crashed, label + ": kernel failed: " + cuda::error_text(e), true};
    // A write past a buffer may have reached memory later candidates rely
    // on: the worker is replaced.
    std::vector<std::string> damage;
    for (const auto& [name, buf] : data.buffers) damage.push_back(guard_damage(buf, name));
    for (size_t i = 0; i < pp.scratch.size(); ++i) damage.push_back(guard_damage(pp.scratch[i], pp.scratch_names[i]));
    damage.erase(std::remove(damage.begin(), damage.end(), std::string()), damage.end());
    if (!damage.empty()) throw Fault{TrialStatus::crashed, label + ": the kernel " + join(damage, "; "), true};
    total = compare_outputs(pi, total_count, draw);
    for (const auto& [name, sum] : data.checksums)
      if (checksum(data.buffers.at(name)) != sum)
        throw Fault{TrialStatus::crashed,
                    label + ": the kernel wrote into buffer '" + name + "' (not one of its outputs)", true};
  } catch (const EngineError& err) {
    throw Fault{TrialStatus::crashed, label + ": " + err.what(), true};
  }
  std::string why = verdict(total, st.setup.tol, total_count);
  if (!why.empty()) {
    if (!after_timing) throw Fault{TrialStatus::incorrect, label + ": " + why};
    throw Fault{TrialStatus::incorrect,
                strfmt("%s: the first launch was right, launch %lld (after %lld more, on a second draw of the "
                       "inputs) was not: ",
                       label.c_str(), pp.launches, pp.launches - 1) +
                    why + " (does the kernel depend on state an earlier launch left in a buffer?)"};
  }
  return total;
}

void GpuSession::time_problem(size_t pi, Candidate& cand, const EvalRequest& req, Measurement& m) {
  const std::string& label = problems_[pi].setup.label;
  Candidate::PerProblem& pp = cand.problems[pi];
  Launcher& l = *pp.launchers[0];
  const double abort_us = pi < req.abort_us.size() ? req.abort_us[pi] : 0;
  time_series(
      label,
      [&](cudaStream_t s) {
        ++pp.launches;
        if (l.launch(s) != CUDA_SUCCESS) throw Fault{TrialStatus::crashed, label + ": relaunch failed", true};
      },
      req.sustained, abort_us, m, kTimedRange);
}

namespace {

// An NVTX range (nothing without a tool attached), popped on every way out.
struct NvtxRange {
  explicit NvtxRange(const char* name) : on(name != nullptr) {
    if (on) nvtxRangePushA(name);
  }
  ~NvtxRange() {
    if (on) nvtxRangePop();
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
  bool on;
};

}  // namespace

void GpuSession::profiled_launch(const BaselineResult& r, const std::function<void(cudaStream_t)>& launch) {
  if (!r.ok()) return;
  const std::string name = baseline_range(r.name, r.problem);
  {
    NvtxRange range(name.c_str());
    launch(stream_->get());
  }
  sync(("a baseline on " + problems_[static_cast<size_t>(r.problem)].setup.label).c_str());
}

namespace {

// One series of timed launches on a stream: each timed launch after an L2
// flush (a memset of a buffer twice L2's size, a new byte each time), between
// two events; a failure of the kernel becomes a crashed fault naming it.
class TimedLoop {
 public:
  TimedLoop(cudaStream_t s, const std::string& label, const std::function<void(cudaStream_t)>& launch,
            const cuda::DeviceBuffer* flush, int max_samples)
      : s_(s),
        label_(label),
        launch_(launch),
        flush_(flush),
        starts_(static_cast<size_t>(max_samples)),
        stops_(static_cast<size_t>(max_samples)) {}

  // One launch, timed (no flush): the estimate the warm-up and the sample
  // count are sized by, in ms.
  double estimate_ms(const char* nvtx_range) {
    cudaEventRecord(starts_[0].get(), s_);
    {
      NvtxRange range(nvtx_range);
      launch_(s_);
    }
    cudaEventRecord(stops_[0].get(), s_);
    synced(cudaEventSynchronize(stops_[0].get()), "");
    float ms = 0;
    cudaEventElapsedTime(&ms, starts_[0].get(), stops_[0].get());
    return std::max(ms, 0.001f);
  }

  // Sustained (sustain_ms > 0): the timed loop itself, flushes included, for
  // that much wall time. Otherwise warmup_ms worth of plain launches.
  void warm_up(double est_ms, double sustain_ms, double warmup_ms) {
    if (sustain_ms > 0) {
      auto t_warm = Clock::now();
      while (ms_since(t_warm) < sustain_ms) {
        for (int k = 0; k < 32; ++k) {
          flush();
          launch_(s_);
        }
        synced(cudaStreamSynchronize(s_), " while warming up");
      }
    } else {
      int warm = static_cast<int>(std::clamp(warmup_ms / est_ms, 1.0, 2000.0));
      for (int i = 0; i < warm; ++i) launch_(s_);
    }
  }

  // `want` per-launch times in µs, in batches of `batch`; with abort_us > 0,
  // fewer once the median of at least `batch` exceeds it (m.aborted_early).
  std::vector<double> sample(int want, int batch_size, double abort_us, Measurement& m) {
    std::vector<double> samples;
    while (static_cast<int>(samples.size()) < want) {
      const int batch = std::min(want - static_cast<int>(samples.size()), std::max(batch_size, 1));
      const size_t base = samples.size();
      for (int k = 0; k < batch; ++k) {
        flush();
        cudaEventRecord(starts_[base + static_cast<size_t>(k)].get(), s_);
        launch_(s_);
        cudaEventRecord(stops_[base + static_cast<size_t>(k)].get(), s_);
      }
      synced(cudaStreamSynchronize(s_), " while timing");
      for (int k = 0; k < batch; ++k) {
        float t = 0;
        cudaEventElapsedTime(&t, starts_[base + static_cast<size_t>(k)].get(),
                             stops_[base + static_cast<size_t>(k)].get());
        samples.push_back(static_cast<double>(t) * 1000.0);
      }
      if (abort_us > 0 && static_cast<int>(samples.size()) >= batch_size && median(samples) > abort_us) {
        m.aborted_early = true;
        break;
      }
    }
    return samples;
  }

 private:
  void flush() {
    if (flush_ && flush_->get()) cudaMemsetAsync(flush_->get(), flush_value_++, flush_->bytes(), s_);
  }
  void synced(cudaError_t e, const char* when) const {
    if (e != cudaSuccess)
      throw Fault{TrialStatus::crashed, label_ + ": kernel failed" + when + ": " + cuda::error_text(e), true};
  }

  cudaStream_t s_;
  const std::string& label_;
  const std::function<void(cudaStream_t)>& launch_;
  const cuda::DeviceBuffer* flush_;  // null: no flush
  unsigned char flush_value_ = 0;
  std::vector<cuda::Event> starts_, stops_;
};

}  // namespace

void GpuSession::time_series(const std::string& label, const std::function<void(cudaStream_t)>& launch_on,
                             const SustainedTiming& sus, double abort_us, Measurement& m, const char* nvtx_range) {
  const TimingOptions& to = setup_.timing;
  const bool gpu_busy = last_timed_ && ms_since(*last_timed_) < to.busy_gap_ms;
  const double warmup_ms = gpu_busy ? std::min(to.warmup_busy_ms, to.warmup_ms) : to.warmup_ms;
  const double sustain_ms = sus.on() ? sus.warmup_ms : to.sustain_ms;
  const int max_samples = std::max(to.min_samples, sus.on() && sus.max_samples > 0 ? sus.max_samples : to.max_samples);
  const double target_ms = sus.on() && sus.target_ms > 0 ? sus.target_ms : to.target_ms;

  TimedLoop loop(stream_->get(), label, launch_on, to.flush_l2 ? &flush_ : nullptr, max_samples);
  const double est_ms = loop.estimate_ms(nvtx_range);
  loop.warm_up(est_ms, sustain_ms, warmup_ms);
  const int want = static_cast<int>(
      std::clamp(target_ms / est_ms, static_cast<double>(to.min_samples), static_cast<double>(max_samples)));
  summarize_times(loop.sample(want, to.min_samples, abort_us, m), m);
}

// ------------------------------------------------------------ baselines

std::vector<BaselineResult> GpuSession::baseline(const BaselineRequest& req) {
  BaselineResult r;
  r.problem = req.problem;
  r.name = req.name;
  r.library = req.library;
  try {
    if (req.problem < 0 || static_cast<size_t>(req.problem) >= problems_.size())
      throw EngineError("baseline request names problem " + std::to_string(req.problem) + " of " +
                        std::to_string(problems_.size()));
    if (req.library == "reference") return {reference_baseline(req)};
    if (req.library == "cublaslt") return cublaslt_baseline(req);
    throw EngineError("the worker runs no baseline library '" + req.library + "'");
  } catch (const LibraryMissing& e) {
    r.status = "skipped";
    r.reason = e.what();
  } catch (const Fault& f) {
    r.status = "failed";
    r.reason = f.message;
  } catch (const std::exception& e) {
    r.status = "failed";
    r.reason = e.what();
  }
  return {r};
}

ErrorStats GpuSession::check_baseline(size_t pi, const std::function<void(cudaStream_t)>& launch,
                                      std::string& verdict_text) {
  poison_outputs(pi);
  launch(stream_->get());
  sync(("a baseline on " + problems_[pi].setup.label).c_str());
  int64_t count = 0;
  ErrorStats e = compare_outputs(pi, count);
  verdict_text = verdict(e, problems_[pi].setup.tol, count);
  return e;
}

BaselineResult GpuSession::reference_baseline(const BaselineRequest& req) {
  const size_t pi = static_cast<size_t>(req.problem);
  ProblemState& st = problems_[pi];
  BaselineResult r;
  r.problem = req.problem;
  r.name = req.name;
  r.library = req.library;
  r.detail = "the template's reference kernel (" + st.setup.reference.entry + ")";
  auto launch = [&](cudaStream_t s) {
    if (st.draws[0].reference->launch(s) != CUDA_SUCCESS)
      throw Fault{TrialStatus::crashed, st.setup.label + ": the reference kernel failed to launch", true};
  };
  time_series(st.setup.label, launch, req.sustained, 0, r.m);
  r.m.problem = req.problem;
  profiled_launch(r, launch);
  return r;
}

std::vector<BaselineResult> GpuSession::cublaslt_baseline(const BaselineRequest& req) {
  const size_t pi = static_cast<size_t>(req.problem);
  ProblemState& st = problems_[pi];
  auto buffer = [&](const char* key) -> void* {
    auto it = req.buffers.find(key);
    if (it == req.buffers.end()) throw EngineError(std::string("cublaslt baseline without buffer '") + key + "'");
    return st.draws[0].buffers.at(it->second).data();
  };
  auto value = [&](const char* key) { return req.values.at(key); };
  const ElemType elem = buffer_plan(pi, req.buffers.at("c")).elem;
  const int top = static_cast<int>(std::max<int64_t>(1, value("top")));
  auto flag = [&](const char* key) { return req.values.count(key) > 0 && value(key) != 0; };
  CublasLtGemm lt(elem, value("m"), value("n"), value("k"), buffer("a"), buffer("b"), buffer("c"), top, flag("trans_b"),
                  flag("trans_a"));
  // Each algorithm the heuristic offers: checked against the reference, then
  // timed; the first is the heuristic's choice, the fastest correct one of
  // the first `top` the best a user could pick.
  std::vector<BaselineResult> each;
  auto launch_of = [&](int i) {
    return [&, i](cudaStream_t s) {
      std::string why;
      if (!lt.run(i, s, why)) throw Fault{TrialStatus::launch_error, st.setup.label + ": " + why};
    };
  };
  for (int i = 0; i < lt.algorithms(); ++i) {
    BaselineResult r;
    r.problem = req.problem;
    r.library = req.library;
    r.detail = lt.version() + ", " + lt.describe(i);
    try {
      std::string wrong;
      r.m.err = check_baseline(pi, launch_of(i), wrong);
      if (!wrong.empty()) {
        r.status = "wrong";
        r.reason = wrong;
      } else {
        const ErrorStats err = r.m.err;
        time_series(st.setup.label, launch_of(i), req.sustained, 0, r.m);
        r.m.err = err;
      }
    } catch (const Fault& f) {
      r.status = "failed";
      r.reason = f.message;
    }
    r.m.problem = req.problem;
    each.push_back(std::move(r));
  }
  std::vector<BaselineResult> out = {each.front()};
  out.front().name = req.name;
  profiled_launch(out.front(), launch_of(0));
  if (top > 1) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(each.size()); ++i)
      if (each[static_cast<size_t>(i)].ok() &&
          (best < 0 || each[static_cast<size_t>(i)].m.p50_us < each[static_cast<size_t>(best)].m.p50_us))
        best = i;
    BaselineResult b = each[static_cast<size_t>(std::max(best, 0))];
    b.name = req.name + "-top" + std::to_string(top);
    b.detail += strfmt(" (fastest of the heuristic's first %d)", lt.algorithms());
    profiled_launch(b, launch_of(std::max(best, 0)));
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace evotune
