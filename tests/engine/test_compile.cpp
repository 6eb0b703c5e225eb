#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>

#include <chrono>
#include <thread>
#include "core/spec.hpp"
#include "core/strings.hpp"

#include "engine/compile_cache.hpp"
#include "engine/compile_service.hpp"
#include "engine/compiler.hpp"
#include "engine/plan.hpp"
#include "engine/support_kernels.hpp"
#include "kernel_templates/registry.hpp"
#include "search/space.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"

using namespace evotune;

namespace {

const char* kTiny = R"(
extern "C" __global__ void tiny(float* out, int n) {
  __shared__ float buf[256];
  buf[threadIdx.x] = threadIdx.x * SCALE;
  __syncthreads();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = buf[255 - threadIdx.x];
}
)";

CompileRequest tiny(const std::string& arch, int scale = 2) {
  CompileRequest r;
  r.source_name = "tiny.cu";
  r.source = kTiny;
  r.entry = "tiny";
  r.arch = arch;
  r.defines = {{"SCALE", std::to_string(scale)}};
  return r;
}

// Each test gets a private cache directory, removed afterwards.
struct TempCache {
  std::filesystem::path dir;
  TempCache() {
    dir = std::filesystem::temp_directory_path() / ("evotune_cache_test_" + std::to_string(std::random_device{}()));
    CompileCache::global().set_dir(dir.string());
  }
  ~TempCache() {
    CompileCache::global().set_enabled(false);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// One config of a template compiled as the tuner compiles it.
CompileResult compile_config(const KernelSpec& spec, const Config& c, const Problem& p, const DeviceTraits& dev,
                             const std::string& arch) {
  return compile(kernel_request(spec, arch, spec.compile_defines(c, p, dev)));
}

// The tensor map a launch encodes over `buffer`, if any.
const TensorMapPlan* tmap_over(const LaunchPlan& l, const std::string& buffer) {
  for (const ArgPlan& a : l.args)
    if (a.kind == ArgPlan::Kind::tmap && a.tmap.buffer == buffer) return &a.tmap;
  return nullptr;
}

// The element count of a launch's scratch buffer `name` (-1: none).
int64_t scratch_count(const LaunchPlan& l, const std::string& name) {
  for (const ScratchPlan& s : l.scratch)
    if (s.name == name) return s.count;
  return -1;
}

}  // namespace

TEST_CASE("NVRTC compiles to a cubin for the named architecture and reports resources", "[compile]") {
  TempCache cache;
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    CompileResult r = compile(tiny(arch));
    INFO(arch << "\n" << r.log);
    REQUIRE(r.ok);
    CHECK(r.cubin.size() > 100);
    CHECK(r.cubin.substr(1, 3) == "ELF");  // a cubin, not PTX
    CHECK(r.res.registers > 0);
    CHECK(r.res.smem_static == 1024);
    CHECK(r.res.spill_bytes() == 0);
  }
}

TEST_CASE("a compile error is a result with the compiler's log, not an exception", "[compile]") {
  TempCache cache;
  CompileRequest r = tiny("sm_90a");
  r.source += "\nthis does not compile;\n";
  CompileResult res = compile(r);
  CHECK_FALSE(res.ok);
  CHECK(res.cubin.empty());
  CHECK(res.log.find("error") != std::string::npos);
  CHECK(res.log.find("tiny.cu") != std::string::npos);

  CompileRequest wrong_entry = tiny("sm_90a");
  wrong_entry.entry = "not_there";
  CompileResult res2 = compile(wrong_entry);
  CHECK_FALSE(res2.ok);
  CHECK(res2.log.find("not_there") != std::string::npos);
}

TEST_CASE("ptxas reports are parsed per entry point", "[compile]") {
  const std::string log =
      "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
      "insufficient register resources for the function 'a'\n"
      "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non "
      "wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in "
      "the function 'z'\n"
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'a' for 'sm_90a'\n"
      "ptxas info    : Function properties for a\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 49152 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'b' for 'sm_90a'\n"
      "ptxas info    : Function properties for b\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 32 registers, used 0 barriers, 400 bytes cmem[0]\n";
  Resources a, b;
  REQUIRE(parse_ptxas_resources(log, "a", a));
  CHECK(a.registers == 255);
  CHECK(a.smem_static == 49152);
  CHECK(a.stack_frame == 16);
  CHECK(a.spill_stores == 8);
  CHECK(a.spill_loads == 12);
  CHECK(a.wgmma_serialized == 7512);
  REQUIRE(parse_ptxas_resources(log, "b", b));
  CHECK(b.registers == 32);
  CHECK(b.smem_static == 0);
  CHECK(b.spill_bytes() == 0);
  CHECK(b.wgmma_serialized == 0);  // 'z' was serialised, not 'b'
  Resources c;
  CHECK_FALSE(parse_ptxas_resources(log, "c", c));
}

TEST_CASE("the compile cache returns the same cubin and survives a damaged entry", "[compile]") {
  TempCache cache;
  CompileResult first = compile(tiny("sm_90a", 3));
  REQUIRE(first.ok);
  CHECK_FALSE(first.cache_hit);
  CompileResult second = compile(tiny("sm_90a", 3));
  CHECK(second.cache_hit);
  CHECK(second.cubin == first.cubin);
  CHECK(second.res.registers == first.res.registers);
  // Another define is another entry.
  CHECK_FALSE(compile(tiny("sm_90a", 4)).cache_hit);
  // A truncated cubin is detected and compiled again.
  std::string key = tiny("sm_90a", 3).key();
  auto cubin = cache.dir / key.substr(0, 2) / (key + ".cubin");
  REQUIRE(std::filesystem::exists(cubin));
  std::filesystem::resize_file(cubin, 10);
  CompileResult third = compile(tiny("sm_90a", 3));
  CHECK_FALSE(third.cache_hit);
  CHECK(third.cubin == first.cubin);
  // Compile errors are cached too (they are deterministic).
  CompileRequest bad = tiny("sm_90a");
  bad.source += "\n#error broken\n";
  CHECK_FALSE(compile(bad).cache_hit);
  CompileResult bad2 = compile(bad);
  CHECK(bad2.cache_hit);
  CHECK_FALSE(bad2.ok);
}

TEST_CASE("a user's kernel is compiled again when a header it includes changes, never served from the cache",
          "[compile]") {
  TempCache cache;
  const std::filesystem::path d = cache.dir / "kernel";
  std::filesystem::create_directories(d);
  // The example's spec, its kernel including a header of its own.
  const std::string ex = evotune_test::source_dir() + "/examples/transpose/";
  std::filesystem::copy_file(ex + "spec.toml", d / "spec.toml");
  std::filesystem::copy_file(ex + "reference.cu", d / "reference.cu");
  std::ofstream(d / "kernel.cu") << "#include \"tile.cuh\"\n" << read_file(ex + "kernel.cu");
  std::ofstream(d / "tile.cuh") << "#define TILE_NOTE 1\n";
  auto build = [&] {
    KernelSpec spec = load_kernel((d / "spec.toml").string());
    Problem p = spec.parse_problem("M=100,N=70", Dtype::fp32);
    return compile_config(spec, spec.default_config(), p, DeviceTraits::for_arch(90), "sm_90");
  };
  CompileResult first = build();
  INFO(first.log);
  REQUIRE(first.ok);
  CHECK(build().cache_hit);
  std::ofstream(d / "tile.cuh") << "this is not C++\n";
  CompileResult edited = build();
  CHECK_FALSE(edited.cache_hit);
  CHECK_FALSE(edited.ok);
  CHECK(edited.log.find("tile.cuh") != std::string::npos);
}

TEST_CASE("architecture names parse", "[compile]") {
  CHECK(parse_arch("sm_90a") == std::make_pair(90, true));
  CHECK(parse_arch("sm_80") == std::make_pair(80, false));
  CHECK(parse_arch("90") == std::make_pair(90, false));
  CHECK(arch_for(90, true) == "sm_90a");
  CHECK(arch_for(80, true) == "sm_80");
  CHECK_THROWS(parse_arch("sm_x"));
  CHECK_THROWS(parse_arch("hopper"));
}

TEST_CASE("the support kernels compile", "[compile]") {
  TempCache cache;
  CompileRequest r;
  r.source_name = kSupportKernelsName;
  r.source = support_kernels_source();
  r.entry = "evotune_compare";
  r.arch = "sm_80";
  CompileResult res = compile(r);
  INFO(res.log);
  CHECK(res.ok);
}

// A sample of every built-in template's valid configs compiles for sm_80 and
// sm_90a (the seeds' PTXAS gate, in CI): the default and a few random ones,
// plus the reference. EVOTUNE_COMPILE_SAMPLES sets how many random configs.
TEST_CASE("a sample of every template's configs compiles for sm_80 and sm_90a", "[compile][templates]") {
  TempCache cache;
  int samples = 2;
  if (const char* s = std::getenv("EVOTUNE_COMPILE_SAMPLES")) samples = std::atoi(s);
  for (const std::string& name : builtin_kernel_names()) {
    KernelSpec spec = load_kernel(name);
    for (int cc : {80, 90}) {
      if (cc < spec.min_cc || (spec.max_cc && cc > spec.max_cc)) continue;
      std::string arch = arch_for(cc, spec.arch_specific);
      DeviceTraits dev = DeviceTraits::for_arch(cc);
      for (Dtype dt : spec.dtypes) {
        Problem p = spec.parse_problem(spec.example, dt);
        SearchSpace space(spec, {p}, dev);
        const auto* valid = space.enumerate_valid();
        REQUIRE(valid != nullptr);
        REQUIRE(valid->size() >= 1000);  // a space worth searching
        std::vector<Config> pick;
        if (space.valid(spec.default_config())) pick.push_back(spec.default_config());
        std::mt19937_64 rng(cc * 7 + static_cast<int>(dt));
        for (int i = 0; i < samples; ++i) pick.push_back((*valid)[rng() % valid->size()]);
        for (const Config& c : pick) {
          CompileResult res = compile_config(spec, c, p, dev, arch);
          INFO(name << " " << arch << " " << to_string(dt) << " " << c.canonical() << "\n" << res.log);
          CHECK(res.ok);
          if (c == spec.default_config()) CHECK(res.res.spill_bytes() == 0);
        }
        CompileRequest ref;
        ref.source_name = spec.reference.source_name;
        ref.source = spec.reference.source_text;
        ref.entry = spec.reference.entry;
        ref.arch = arch;
        ref.headers = spec.headers;
        ref.defines = spec.compile_defines(spec.default_config(), p, dev);
        CompileResult rr = compile(ref);
        INFO(name << " reference " << arch << "\n" << rr.log);
        CHECK(rr.ok);
      }
    }
  }
}

TEST_CASE("the compile service runs NVRTC in child processes and cuts off a compile that takes too long",
          "[compile][isolation]") {
  TempCache cache;
  CompileService service(evotune_test::binary(), 2, 3.0);
  CompileResult ok = service.compile(tiny("sm_90a", 5));
  INFO(ok.log);
  REQUIRE(ok.ok);
  CHECK(ok.res.smem_static == 1024);
  CHECK(ok.cubin == compile(tiny("sm_90a", 5)).cubin);  // the same cubin as in-process
  CHECK(service.compile(tiny("sm_90a", 5)).cache_hit);  // cache consulted before any process

  // 2^18 inlined multiply-adds, generated by halving templates, keep the
  // compiler busy far past 3 s.
  CompileRequest slow;
  slow.source_name = "slow.cu";
  slow.entry = "slow";
  slow.arch = "sm_90a";
  slow.source = R"(
template <int N> struct Steps {
  __device__ __forceinline__ static float run(float a, const float* x) {
    return Steps<N - N / 2>::run(Steps<N / 2>::run(a, x), x + (N & 15));
  }
};
template <> struct Steps<1> {
  __device__ __forceinline__ static float run(float a, const float* x) { return a * 1.0001f + x[0]; }
};
extern "C" __global__ void slow(float* x) { x[threadIdx.x] = Steps<(1 << 18)>::run(x[threadIdx.x], x); })";
  auto t0 = std::chrono::steady_clock::now();
  CompileResult cut = service.compile(slow);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK_FALSE(cut.ok);
  CHECK(cut.log.find("did not finish") != std::string::npos);
  CHECK(s < 10);
  CHECK_FALSE(service.compile(slow).cache_hit);  // a cut-off compile is not cached as a result
  // The pool recovers: the next compile works.
  CHECK(service.compile(tiny("sm_80", 6)).ok);
}

TEST_CASE("a compiler process outlives the thread that started it", "[compile][isolation]") {
  TempCache cache;
  CompileCache::global().set_enabled(false);
  CompileService service(evotune_test::binary(), 1, 60.0);
  CompileResult first;
  std::thread([&] { first = service.compile(tiny("sm_90a", 7)); }).join();
  REQUIRE(first.ok);
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past the child's parent check
  CompileResult second = service.compile(tiny("sm_90a", 8));
  INFO(second.log);
  CHECK(second.ok);
  CHECK(service.spawns() == 1);  // the same process served both
}

namespace {

// cuobjdump -sass of a cubin; empty when cuobjdump is not on PATH or fails
// (it runs nvdisasm, which must be on PATH too).
std::string sass_of(const std::string& cubin, const std::filesystem::path& dir) {
  if (std::system("cuobjdump --version >/dev/null 2>&1") != 0) return {};
  const auto bin = dir / "k.cubin", txt = dir / "k.sass";
  std::ofstream(bin, std::ios::binary) << cubin;
  const std::string cmd = "cuobjdump -sass '" + bin.string() + "' > '" + txt.string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) return {};
  std::ifstream in(txt);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// What makes the Hopper GEMM fast, read off its machine code: HGMMA (wgmma)
// for the math, UTMALDG (TMA) for the loads, and, in a cluster, stage
// releases to the peer CTA without a GPU-wide fence in front (a cluster-scope
// release put MEMBAR.ALL.GPU before each one and cost a third of the speed).
TEST_CASE(
    "sdpa_fwd_sm90's SASS: both GEMMs in HGMMA, P·V with P from registers, Q, K and V by TMA, the unit read at CTA "
    "scope",
    "[compile][sass]") {
  TempCache cache;
  KernelSpec spec = load_kernel("sdpa_fwd_sm90");
  Problem p = spec.parse_problem("B=4,H=16,S=4096,D=128", Dtype::fp16);
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();
  SearchSpace space(spec, {p}, dev);
  REQUIRE(space.valid(c));
  CompileResult res = compile_config(spec, c, p, dev, arch_for(90, spec.arch_specific));
  INFO(res.log);
  REQUIRE(res.ok);
  CHECK(res.res.spill_bytes() == 0);
  const std::string sass = sass_of(res.cubin, cache.dir);
  if (sass.empty()) {
    WARN("cuobjdump (with nvdisasm) not found or failed: SASS not checked");
    return;
  }
  // Q·Kᵀ: 64 x BLOCK_N(128) from shared-memory descriptors; P·V: 64 x D(128),
  // A in registers, V transposed (MN-major) through its descriptor.
  CHECK(sass.find("HGMMA.64x128x16.F32 R") != std::string::npos);
  CHECK(sass.find(".tnspB") != std::string::npos);
  CHECK(sass.find("UTMALDG.2D") != std::string::npos);  // Q
  CHECK(sass.find("UTMALDG.3D") != std::string::npos);  // K and V
  // The unit the producer hands over is read at CTA scope (L1): a volatile,
  // system-scope read went to L2 at every unit's start while the consumers
  // waited (causal 16,32,512,64: 88 -> 74 us on an H100 when it went).
  CHECK(sass.find("LDG.E.STRONG.SM") != std::string::npos);
  CHECK(sass.find("STRONG.SYS") == std::string::npos);
}

// The search proposes a spec's `starts` right after the default: each that
// applies to an anchor problem compiles without spills, a stack frame or
// serialised wgmma (a kernel change that broke one would leave the search's
// first proposals rejected, and nothing else would say so).
TEST_CASE("the attention templates' search starts compile clean where they apply", "[compile]") {
  TempCache cache;
  DeviceTraits dev = DeviceTraits::for_arch(90);
  const std::pair<const char*, std::vector<const char*>> cases[] = {
      {"sdpa_fwd_sm90", {"B=4,H=16,S=4096,D=64", "B=4,H=16,S=4096,D=128,CAUSAL=1", "B=8,H=32,HKV=8,S=1,SKV=8192,D=128"}},
      {"sdpa_fp8_sm90", {"B=4,H=16,S=4096,D=128", "B=4,H=16,S=4096,D=128,VT=1,CAUSAL=1", "B=2,H=8,S=2048,D=64"}},
  };
  for (const auto& [kernel, problems] : cases) {
    KernelSpec spec = load_kernel(kernel);
    const std::string arch = arch_for(90, spec.arch_specific);
    int compiled = 0;
    for (const char* text : problems) {
      Problem p = spec.parse_problem(text, Dtype::bf16);
      SearchSpace space(spec, {p}, dev);
      for (const Config& start : spec.starts) {
        if (!space.valid(start)) continue;
        INFO(kernel << " " << text << ": " << start.canonical());
        CompileResult res = compile_config(spec, start, p, dev, arch);
        INFO(res.log);
        REQUIRE(res.ok);
        CHECK(res.res.spill_bytes() == 0);
        CHECK(res.res.stack_frame == 0);
        CHECK(res.res.wgmma_serialized == 0);
        ++compiled;
      }
    }
    // Most apply to both long problems, the packed-heads decode start to the
    // decode one only, a few (a 4-way split of 128-key tiles, one warpgroup
    // for short sequences) to none of these.
    INFO(kernel);
    CHECK(compiled >= static_cast<int>(spec.starts.size()));
  }
}

// tools/timeline.py builds the Hopper templates with EVOTUNE_SM90_TIMELINE
// defined (per-CTA time stamps): that build compiles and carries the stamps'
// tables, which the product build does not (it is left without them, its
// machine code unchanged).
TEST_CASE("the Hopper templates compile with the timeline build option, and without it carry no stamps",
          "[compile]") {
  TempCache cache;
  DeviceTraits dev = DeviceTraits::for_arch(90);
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"gemm_sm90", "M=8192,N=1024,K=8192", "BLOCK_N=256,PERSISTENT=1"},
      {"sdpa_fwd_sm90", "B=2,H=8,S=2048,D=64", "CONSUMER_WG=2,BLOCK_N=128,PERSISTENT=1,UNIT_OVERLAP=1,O_TMA=1"},
      {"sdpa_fp8_sm90", "B=4,H=16,S=4096,D=128", "CONSUMER_WG=2,BLOCK_N=256,OVERLAP=0,PERSISTENT=1,V_PACK=1"},
  };
  for (const auto& [kernel, problem, config] : cases) {
    INFO(kernel);
    KernelSpec spec = load_kernel(kernel);
    Problem p = spec.parse_problem(problem, Dtype::bf16);
    Config cfg = spec.default_config();
    for (const auto& [k, v] : Config::parse(config).values) cfg.values[k] = v;
    REQUIRE(SearchSpace(spec, {p}, dev).valid(cfg));
    const std::string arch = arch_for(90, spec.arch_specific);
    CompileResult product = compile_config(spec, cfg, p, dev, arch);
    INFO(product.log);
    REQUIRE(product.ok);
    CHECK(product.cubin.find("evotune_timeline") == std::string::npos);
    spec.defines.emplace_back("EVOTUNE_SM90_TIMELINE", Expr::constant(Value(int64_t{1})));
    CompileResult stamped = compile_config(spec, cfg, p, dev, arch);
    INFO(stamped.log);
    REQUIRE(stamped.ok);
    CHECK(stamped.cubin.find("evotune_timeline_clk") != std::string::npos);
  }
}

// The FP8 build of the same kernel: e4m3 wgmma (k32) for both GEMMs, Q and
// K by TMA in the 64-byte (D = 64) or 128-byte swizzle, V by one TMA copy per
// tile for the transposer; every head dim compiles without spills, the
// transposer within the producer's 56 registers.
TEST_CASE("ptxas's serialised wgmma is reported from a real compile, and the sm_90a templates gate on it",
          "[compile]") {
  TempCache cache;
  KernelSpec spec = load_kernel("sdpa_fwd_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Problem p = spec.parse_problem("B=4,H=16,S=4096,D=128", Dtype::fp16);
  // Two consumer warpgroups with Q in registers and a one-warp producer (no
  // setmaxnreg) at head dim 128: ptxas 13.0 runs out of registers for the
  // wgmma pipeline ("(C7512) ... insufficient register resources for the
  // function") and spills; the default config is pipelined. The spec's
  // register model rules the first out (ptxas gives it 168 registers a
  // thread); the gate is what holds where a model admits such a config.
  Config serial = spec.default_config();
  for (const auto& [k, v] : Config::parse("BLOCK_N=64,CONSUMER_WG=2,L2_HEADS=4,PRODUCER=0,Q_IN_REGS=1,STAGES=3").values)
    serial.values[k] = v;
  CHECK_FALSE(SearchSpace(spec, {p}, dev).valid(serial));
  REQUIRE(SearchSpace(spec, {p}, dev).valid(spec.default_config()));
  const std::string arch = arch_for(90, spec.arch_specific);
  CompileResult bad = compile_config(spec, serial, p, dev, arch);
  INFO(bad.log);
  REQUIRE(bad.ok);
  CHECK(bad.res.wgmma_serialized == 7512);
  CompileResult good = compile_config(spec, spec.default_config(), p, dev, arch);
  REQUIRE(good.ok);
  CHECK(good.res.wgmma_serialized == 0);
  for (const char* name : {"gemm_sm90", "sdpa_fwd_sm90", "sdpa_fp8_sm90"}) {
    INFO(name);
    CHECK_FALSE(load_kernel(name).gates.allow_serialized_wgmma);
  }
}

TEST_CASE("sdpa_fp8_sm90's SASS: both GEMMs in e4m3 QGMMA, no spills at D = 64, 128, 256", "[compile][sass]") {
  TempCache cache;
  KernelSpec spec = load_kernel("sdpa_fp8_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  for (const char* shape : {"B=2,H=8,S=512,D=64", "B=4,H=16,S=4096,D=128", "B=2,H=8,S=1024,D=256"}) {
    INFO(shape);
    Problem p = spec.parse_problem(shape, Dtype::bf16);
    Config c = spec.default_config();
    if (p.at("D") == 256) {  // two consumer warpgroups' registers hold 64-key tiles at D = 256
      c.values["BLOCK_N"] = 64;
    }
    SearchSpace space(spec, {p}, dev);
    REQUIRE(space.valid(c));
    CompileResult res = compile_config(spec, c, p, dev, arch_for(90, spec.arch_specific));
    INFO(res.log);
    REQUIRE(res.ok);
    CHECK(res.res.spill_bytes() == 0);
    const std::string sass = sass_of(res.cubin, cache.dir);
    if (sass.empty()) {
      WARN("cuobjdump (with nvdisasm) not found or failed: SASS not checked");
      continue;
    }
    CHECK(sass.find("QGMMA.64x") != std::string::npos);  // wgmma on 8-bit operands (16-bit ones are HGMMA)
    CHECK(sass.find("x32.F32.E4M3.E4M3") != std::string::npos);
    CHECK(sass.find("UTMALDG.2D") != std::string::npos);  // Q
    CHECK(sass.find("UTMALDG.3D") != std::string::npos);  // K and V
  }
}

TEST_CASE("gemm_sm90's SASS: HGMMA, TMA loads, and no GPU-wide fence before a cluster arrival", "[compile][sass]") {
  TempCache cache;
  KernelSpec spec = load_kernel("gemm_sm90");
  Problem p = spec.parse_problem("M=8192,N=1024,K=8192", Dtype::bf16);
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();
  c.values["CLUSTER_N"] = 2;
  c.values["PRODUCER"] = 1;
  SearchSpace space(spec, {p}, dev);
  REQUIRE(space.valid(c));
  CompileResult res = compile_config(spec, c, p, dev, arch_for(90, spec.arch_specific));
  INFO(res.log);
  REQUIRE(res.ok);
  const std::string sass = sass_of(res.cubin, cache.dir);
  if (sass.empty()) {
    WARN("cuobjdump (with nvdisasm) not found or failed: SASS not checked");
    return;
  }
  CHECK(sass.find("HGMMA.64x256x16.F32.BF16") != std::string::npos);
  CHECK(sass.find("UTMALDG.2D.MULTICAST") != std::string::npos);
  // Remote arrivals (SYNCS.ARRIVE...RED) and the instructions just before them.
  std::vector<std::string> lines;
  std::istringstream in(sass);
  for (std::string l; std::getline(in, l);)
    if (l.find("*/ ") != std::string::npos && l.find(';') != std::string::npos) lines.push_back(l);
  int remote = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("SYNCS.ARRIVE.TRANS64.RED") == std::string::npos) continue;
    ++remote;
    for (size_t j = i >= 4 ? i - 4 : 0; j < i; ++j) {
      INFO(lines[j] << "\n" << lines[i]);
      CHECK(lines[j].find("MEMBAR.ALL.GPU") == std::string::npos);
    }
  }
  CHECK(remote >= 1);
}

TEST_CASE("an entry point the source does not define is a compile error that says so first", "[compile]") {
  CompileRequest r;
  r.source = "extern \"C\" __global__ void present(float* y) { y[0] = 1.0f; }\n";
  r.source_name = "k.cu";
  r.entry = "absent";
  r.arch = "sm_80";
  CompileResult res = compile(r);
  INFO(res.log);
  CHECK_FALSE(res.ok);
  CHECK(res.log.rfind("error: entry point 'absent' not found in the compiled code", 0) == 0);
}

TEST_CASE("gemm_sm90 SKINNY: a CUDA-core grid over 16-row, 32*columns-per-lane blocks (x K slices), for M <= 16 only",
          "[compile][plan]") {
  TempCache cache;
  KernelSpec spec = load_kernel("gemm_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();
  c.values["SKINNY"] = 208;  // 2 columns per lane, 8 warps
  c.values["SWIZZLE"] = 1;

  // Decode-sized rows against a vocabulary-sized odd N.
  Problem p = spec.parse_problem("M=16,N=50257,K=4096", Dtype::bf16);
  REQUIRE(SearchSpace(spec, {p}, dev).valid(c));
  LaunchPlan l = Planner(spec, dev).launch(c, p, 0);
  CHECK(l.dims.grid == std::array<int64_t, 3>{(50257 + 63) / 64, 1, 1});
  CHECK(l.dims.block == std::array<int64_t, 3>{256, 1, 1});
  CHECK(l.dims.cluster == std::array<int64_t, 3>{1, 1, 1});
  CHECK(l.dims.smem == 16 * 16 * 8 * 4 + 16 * 64 * 4 + 16);  // A's chunk, the sums, a flag
  // Split K: one more grid dimension, a counter per tile and a partial C per slice.
  Config split = c;
  split.values["SPLIT_K"] = 8;
  const Problem gemv = spec.parse_problem("M=1,N=4096,K=4096", Dtype::bf16);
  REQUIRE(SearchSpace(spec, {gemv}, dev).valid(split));
  LaunchPlan ls = Planner(spec, dev).launch(split, gemv, 0);
  CHECK(ls.dims.grid == std::array<int64_t, 3>{4096 / 64, 1, 8});
  CHECK(scratch_count(ls, "counters") == 4096 / 64);
  CHECK(scratch_count(ls, "workspace") == 8 * 4096);
  CHECK(scratch_count(l, "counters") == 1);
  // Not where the tiles alone fill the GPU (786 tiles at 16 x 50257).
  CHECK_FALSE(SearchSpace(spec, {p}, dev).valid(split));
  // A GEMV keeps one row's accumulators (GEMM_SK_ROWS, a define per problem); 16 rows at most.
  auto sk_rows = [&](const Config& x, const Problem& q) {
    for (const auto& [name, value] : spec.compile_defines(x, q, dev))
      if (name == "GEMM_SK_ROWS") return value;
    return std::string("absent");
  };
  CHECK(sk_rows(split, gemv) == "1");
  CHECK(sk_rows(c, p) == "16");
  CHECK(sk_rows(c, spec.parse_problem("M=1000,N=777,K=520", Dtype::bf16)) == "16");
  // A check shape with more rows: more CTAs along y, one per 16 rows.
  LaunchPlan tall = Planner(spec, dev).launch(c, spec.parse_problem("M=1000,N=777,K=520", Dtype::bf16), 0);
  CHECK(tall.dims.grid == std::array<int64_t, 3>{(777 + 63) / 64, (1000 + 15) / 16, 1});

  // The vector path (8 columns per lane by 16-byte loads): 256 columns per
  // CTA, only where B's rows are 16-byte aligned, and with 16 warps 4 rows of
  // A per CTA (more CTAs along y), with 8 warps 16.
  Config vec = split;
  vec.values["SKINNY"] = 816;
  REQUIRE(SearchSpace(spec, {gemv}, dev).valid(vec));
  LaunchPlan lv = Planner(spec, dev).launch(vec, gemv, 0);
  CHECK(lv.dims.grid == std::array<int64_t, 3>{4096 / 256, 1, 8});
  CHECK(lv.dims.block == std::array<int64_t, 3>{512, 1, 1});
  CHECK(sk_rows(vec, gemv) == "1");
  const Problem rows16 = spec.parse_problem("M=16,N=4096,K=4096", Dtype::bf16);
  CHECK(sk_rows(vec, rows16) == "4");
  CHECK(Planner(spec, dev).launch(vec, rows16, 0).dims.grid == std::array<int64_t, 3>{4096 / 256, 4, 8});
  Config vec8 = vec;
  vec8.values["SKINNY"] = 808;
  CHECK(sk_rows(vec8, rows16) == "16");
  CHECK_FALSE(SearchSpace(spec, {spec.parse_problem("M=1,N=4097,K=4096", Dtype::bf16)}, dev).valid(vec));

  // Not for more rows, and only with the tile parameters at their one value.
  CHECK_FALSE(SearchSpace(spec, {spec.parse_problem("M=17,N=4096,K=4096", Dtype::bf16)}, dev).valid(c));
  Config other = c;
  other.values["STAGES"] = 3;
  CHECK_FALSE(SearchSpace(spec, {p}, dev).valid(other));
  // The search still finds the valid configs of such a problem (the space is
  // enumerated: one parameter, not three, multiplies its size).
  SearchSpace space(spec, {p}, dev);
  const std::vector<Config>* all = space.enumerate_valid();
  REQUIRE(all);
  CHECK(std::count_if(all->begin(), all->end(), [](const Config& x) { return x.values.at("SKINNY") > 0; }) ==
        7 + 2);  // every value unsplit; 4 columns per lane (393 tiles) also in 2 K slices

  // Every value within the registers, the largest CTAs included.
  for (int64_t v : spec.find_param("SKINNY")->values) {
    if (v == 0) continue;
    Config sk = c;
    sk.values["SKINNY"] = v;
    CompileResult res = compile_config(spec, sk, p, dev, arch_for(90, spec.arch_specific));
    INFO(sk.canonical() << "\n" << res.log);
    REQUIRE(res.ok);
    CHECK(res.res.spill_bytes() == 0);
    CHECK(res.res.stack_frame == 0);
  }
}

TEST_CASE("an input's scale is evaluated per problem: sdpa_fp8's check shapes with all-zero tensors", "[plan]") {
  KernelSpec spec = load_kernel("sdpa_fp8");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  const Problem run = spec.parse_problem("B=2,H=8,S=512,D=64", Dtype::bf16);
  auto scales = [&](const Problem& p) {
    std::map<std::string, double> out;
    for (const BufferPlan& b : Planner(spec, dev).problem_setup(p, false, 1).buffers) out[b.name] = b.scale;
    return out;
  };
  // The run's own problem: every input drawn (V past e4m3's range).
  std::map<std::string, double> plain = scales(run);
  CHECK(plain.at("Q") == 16);
  CHECK(plain.at("K") == 64);
  CHECK(plain.at("V") == 500);
  // Among its check shapes, one with Q all zero and one with K and V all zero.
  int zero_q = 0, zero_kv = 0;
  for (const Problem& cs : spec.check_problems({run})) {
    std::map<std::string, double> s = scales(cs);
    INFO(cs.canonical());
    CHECK(cs.at("D") == 64);  // inherited from the run
    if (cs.at("ZEROS") == 1) {
      ++zero_q;
      CHECK(s.at("Q") == 0);
      CHECK(s.at("K") == 64);
    } else if (cs.at("ZEROS") == 6) {
      ++zero_kv;
      CHECK(s.at("Q") == 16);
      CHECK(s.at("K") == 0);
      CHECK(s.at("V") == 0);
    } else {
      CHECK(s == plain);
    }
  }
  CHECK(zero_q == 1);
  CHECK(zero_kv == 1);
}

// VT = 1 (V stored transposed): K comes through a 5-D view whose box puts the
// tile's keys in the order the kernel's mask and P packing assume (column
// 8j + 2c + e of the accumulators holds key 16(j/2) + 4c + 2(j%2) + e), Vᵀ in
// 128-key boxes; VT = 0 keeps plain (column, key, head) maps. Derived here from
// the planned maps, so a spec edit that breaks the order fails on the CPU.
TEST_CASE("sdpa_fp8_sm90 VT=1: K's 5-D view lands keys in P's fragment order, Vᵀ by 128-key boxes", "[plan]") {
  KernelSpec spec = load_kernel("sdpa_fp8_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();
  Problem vt = spec.parse_problem("B=2,H=8,HKV=2,S=333,SKV=528,D=128,VT=1", Dtype::bf16);
  REQUIRE(SearchSpace(spec, {vt}, dev).valid(c));
  const LaunchPlan l = Planner(spec, dev).launch(c, vt, 0);
  const TensorMapPlan* k = tmap_over(l, "K");
  REQUIRE(k);
  REQUIRE(k->dims.size() == 5);
  CHECK(k->dims == std::vector<uint64_t>{128, 2, 4, 2, 2 * 2 * 528 / 16});
  const uint64_t row = 128;  // bytes of a K row (D e4m3)
  REQUIRE(k->strides_bytes.size() == 4);
  // Box order is smem order: row r of the tile = lo1 + 2 mid + 8 lo2 + 16 hi.
  std::vector<int> key_of_row;
  for (uint32_t hi = 0; hi < k->box[4]; ++hi)
    for (uint32_t lo2 = 0; lo2 < k->box[3]; ++lo2)
      for (uint32_t mid = 0; mid < k->box[2]; ++mid)
        for (uint32_t lo1 = 0; lo1 < k->box[1]; ++lo1)
          key_of_row.push_back(static_cast<int>((lo1 * k->strides_bytes[0] + mid * k->strides_bytes[1] +
                                                 lo2 * k->strides_bytes[2] + hi * k->strides_bytes[3]) / row));
  REQUIRE(key_of_row.size() == 128);  // BLOCK_N keys
  for (int j = 0; j < 16; ++j)
    for (int cc = 0; cc < 4; ++cc)
      for (int e = 0; e < 2; ++e) {
        INFO("accumulator column " << 8 * j + 2 * cc + e);
        CHECK(key_of_row[8 * j + 2 * cc + e] == 16 * (j / 2) + 4 * cc + 2 * (j % 2) + e);
      }
  const TensorMapPlan* v = tmap_over(l, "V");
  REQUIRE(v);
  CHECK(v->dims == std::vector<uint64_t>{528, 128, 2 * 2});
  CHECK(v->box == std::vector<uint32_t>{128, 128, 1});
  CHECK(v->swizzle == 128);
  // VT = 0: K's plain map (two unit dims), V unswizzled whole tiles for the transposer.
  Problem plain = spec.parse_problem("B=2,H=8,HKV=2,S=333,SKV=517,D=128", Dtype::bf16);
  const LaunchPlan lp = Planner(spec, dev).launch(c, plain, 0);
  CHECK(tmap_over(lp, "K")->dims == std::vector<uint64_t>{128, 517, 4, 1, 1});
  CHECK(tmap_over(lp, "K")->box == std::vector<uint32_t>{128, 128, 1, 1, 1});
  CHECK(tmap_over(lp, "V")->swizzle == 0);
  // A VT problem's keys must come in 16s; its check shapes that spell no VT run with it.
  CHECK_THROWS(spec.parse_problem("B=1,H=2,S=77,D=64,VT=1", Dtype::bf16));
  int with_vt = 0;
  for (const Problem& cs : spec.check_problems({vt})) {
    INFO(cs.canonical());
    if (cs.at("VT") == 1) {
      ++with_vt;
      const int64_t skv = cs.at("SKV") > 0 ? cs.at("SKV") : cs.at("S");
      CHECK(skv % 16 == 0);
    }
  }
  CHECK(with_vt == 4);
}

TEST_CASE("sdpa_fp8 DESCALE=1: per-head descale factors drawn around 1 (an input's offset) for kernel and reference",
          "[compile][plan]") {
  TempCache cache;
  KernelSpec spec = load_kernel("sdpa_fp8");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  auto buffers = [&](const Problem& p) {
    std::map<std::string, BufferPlan> out;
    for (const BufferPlan& b : Planner(spec, dev).problem_setup(p, false, 1).buffers) out[b.name] = b;
    return out;
  };
  // One factor per batch and key/value head for each of Q, K, V, uniform in [0.5, 1.5].
  const Problem per_head = spec.parse_problem("B=2,H=8,HKV=2,S=512,D=64,DESCALE=1", Dtype::bf16);
  std::map<std::string, BufferPlan> b = buffers(per_head);
  for (const char* name : {"q_descales", "k_descales", "v_descales"}) {
    INFO(name);
    CHECK(b.at(name).count == 2 * 2);
    CHECK(b.at(name).elem == ElemType::f32);
    CHECK(b.at(name).init == InitKind::uniform);
    CHECK(b.at(name).offset == 1.0);
    CHECK(b.at(name).scale == 0.5);
  }
  CHECK(b.at("Q").offset == 0.0);  // the tensors themselves stay centred
  // Per tensor only (the default): a placeholder the kernel never reads.
  CHECK(buffers(spec.parse_problem("B=2,H=8,HKV=2,S=512,D=64", Dtype::bf16)).at("q_descales").count == 1);
  // The check shapes inherit it, and both kernel and reference compile with it.
  for (const Problem& cs : spec.check_problems({per_head})) CHECK(cs.at("DESCALE") == 1);
  CompileResult res = compile_config(spec, spec.default_config(), per_head, dev, arch_for(90, spec.arch_specific));
  INFO(res.log);
  REQUIRE(res.ok);
  CHECK(res.res.spill_bytes() == 0);
}

// A stored-transposed operand of gemm_sm90 (TB=1: B as N rows of K; TA=1: A
// as K rows of M), and what its plan must show.
struct TransposedOperand {
  const char* tensor;          // "A" or "B"
  const char* packed;          // its padded scratch copy
  const char* aligned;         // a problem whose transposed rows are aligned
  const char* as_stored;       // the same problem without the option
  std::vector<uint64_t> dims;  // the tensor map over it: dims, row bytes, box
  uint64_t row_bytes;
  std::vector<uint32_t> box;
  const char* cluster;         // a cluster dimension that splits the box's rows
  std::vector<uint32_t> cluster_box;
  const char* odd;             // a problem whose transposed rows are misaligned
  std::vector<uint64_t> packed_dims;
  uint64_t packed_row_bytes;
  const char* skinny;          // a decode-sized problem (no SKINNY for it)
};

TEST_CASE("gemm_sm90 TB=1 and TA=1: an operand stored transposed is read by TMA along its rows, packed where they "
          "are misaligned",
          "[compile][plan]") {
  TempCache cache;
  KernelSpec spec = load_kernel("gemm_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();  // BLOCK_M = 128, BLOCK_N = 256, BLOCK_K = 64, no cluster
  c.values["SWIZZLE"] = 1;           // one row of tiles below
  const std::vector<TransposedOperand> cases = {
      // x @ W.T with a vocabulary-sized odd N: W's rows (K = 4096) are aligned,
      // so B comes by TMA, boxes of 64 k by the tile's 256 n rows (split by a
      // cluster along M); odd K: N rows of 2056 packed.
      {"B", "b_packed", "M=256,N=50257,K=4096,TB=1", "M=256,N=50257,K=4096", {4096, 50257}, 4096 * 2, {64, 256},
       "CLUSTER_M", {64, 128}, "M=777,N=1333,K=2049,TB=1", {2049, 1333}, 2056 * 2, "M=16,N=50257,K=4096,TB=1"},
      // A column-major (K rows of M): aligned M, so A comes by TMA, boxes of 64
      // m by the tile's 64 k rows (split by a cluster along N), odd K
      // notwithstanding; odd M: K rows of 784 packed.
      {"A", "a_packed", "M=4096,N=4096,K=4095,TA=1", "M=4096,N=4096,K=4095", {4096, 4095}, 4096 * 2, {64, 64},
       "CLUSTER_N", {64, 32}, "M=777,N=1333,K=2049,TA=1", {777, 2049}, 784 * 2, "M=16,N=4096,K=4096,TA=1"},
  };
  for (const TransposedOperand& t : cases) {
    INFO(t.tensor << " stored transposed");
    Problem aligned = spec.parse_problem(t.aligned, Dtype::bf16);
    REQUIRE(SearchSpace(spec, {aligned}, dev).valid(c));
    const LaunchPlan l = Planner(spec, dev).launch(c, aligned, 0);
    const TensorMapPlan* tm = tmap_over(l, t.tensor);
    REQUIRE(tm);
    CHECK(tm->enabled);
    CHECK(tm->dims == t.dims);
    CHECK(tm->strides_bytes == std::vector<uint64_t>{t.row_bytes});
    CHECK(tm->box == t.box);
    // As stored, the operand's odd rows rule TMA out.
    const LaunchPlan ls = Planner(spec, dev).launch(c, spec.parse_problem(t.as_stored, Dtype::bf16), 0);
    CHECK_FALSE(tmap_over(ls, t.tensor)->enabled);
    Config cl = c;
    cl.values[t.cluster] = 2;
    REQUIRE(SearchSpace(spec, {aligned}, dev).valid(cl));
    const LaunchPlan lc = Planner(spec, dev).launch(cl, aligned, 0);
    CHECK(tmap_over(lc, t.tensor)->box == t.cluster_box);

    Config packed = c;
    packed.values["PACK"] = 1;
    Problem odd = spec.parse_problem(t.odd, Dtype::bf16);
    REQUIRE(SearchSpace(spec, {odd}, dev).valid(packed));
    LaunchPlan lp = Planner(spec, dev).launch(packed, odd, 0);
    const TensorMapPlan* pm = tmap_over(lp, t.packed);
    REQUIRE(pm);
    CHECK(pm->enabled);
    CHECK(pm->dims == t.packed_dims);
    CHECK(pm->strides_bytes == std::vector<uint64_t>{t.packed_row_bytes});
    CHECK(scratch_count(lp, t.packed) == static_cast<int64_t>(t.packed_dims[1] * t.packed_row_bytes / 2));
    // Aligned rows (the other operand's too): nothing to pack.
    CHECK_FALSE(SearchSpace(spec, {aligned}, dev).valid(packed));
    // The CUDA-core path reads both operands as stored (its config is valid without the option).
    Config sk = c;
    sk.values["SKINNY"] = 208;
    const std::string skinny = t.skinny;
    CHECK_FALSE(SearchSpace(spec, {spec.parse_problem(skinny, Dtype::bf16)}, dev).valid(sk));
    CHECK(SearchSpace(spec, {spec.parse_problem(skinny.substr(0, skinny.rfind(',')), Dtype::bf16)}, dev).valid(sk));

    // The default tile, the cluster and the thread-copy path compile without spills.
    for (const auto& [cfg, p] : {std::pair{c, aligned}, std::pair{cl, aligned}, std::pair{c, odd}}) {
      CompileResult res = compile_config(spec, cfg, p, dev, arch_for(90, spec.arch_specific));
      INFO(cfg.canonical() << " " << p.canonical() << "\n" << res.log);
      REQUIRE(res.ok);
      CHECK(res.res.spill_bytes() == 0);
      CHECK(res.res.stack_frame == 0);
    }
  }
  // Both stored transposed.
  const Problem both = spec.parse_problem("M=1000,N=3001,K=520,TA=1,TB=1", Dtype::fp16);
  CompileResult res = compile_config(spec, c, both, dev, arch_for(90, spec.arch_specific));
  INFO(res.log);
  REQUIRE(res.ok);
  CHECK(res.res.spill_bytes() == 0);
}

TEST_CASE("a problem recorded before the kernel gained an optional dimension evaluates with its default",
          "[plan][spec]") {
  KernelSpec spec = load_kernel("gemm_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Problem old;  // as a run stored before TB and TA existed
  old.dtype = Dtype::bf16;
  old.dims = {{"M", 777}, {"N", 1333}, {"K", 2049}};
  Config c = spec.default_config();
  c.values["SWIZZLE"] = 1;
  CHECK(SearchSpace(spec, {old}, dev).valid(c));
  const auto defines = spec.compile_defines(c, old, dev);
  using Define = std::pair<std::string, std::string>;
  CHECK(std::count(defines.begin(), defines.end(), Define{"GEMM_TB", "0"}) == 1);
  CHECK(std::count(defines.begin(), defines.end(), Define{"GEMM_TA", "0"}) == 1);
  // The same plan as the problem with its defaults filled in.
  Problem filled = old;
  spec.check_problem(filled);
  CHECK(filled.canonical() == "M=777,N=1333,K=2049,TA=0,TB=0");
  const LaunchPlan a = Planner(spec, dev).launch(c, old, 0), b = Planner(spec, dev).launch(c, filled, 0);
  CHECK(a.dims.grid == b.dims.grid);
  CHECK(a.dims.smem == b.dims.smem);
  CHECK(tmap_over(a, "A")->dims == tmap_over(b, "A")->dims);
}

TEST_CASE("gemm TB=1 and TA=1: an operand stored transposed compiles for sm_80 and sm_90 without spills, at the "
          "tile shapes' corners",
          "[compile]") {
  TempCache cache;
  KernelSpec spec = load_kernel("gemm");
  for (int cc : {80, 90}) {
    DeviceTraits dev = DeviceTraits::for_arch(cc);
    for (const char* text : {"M=1000,N=777,K=520,TB=1", "M=1000,N=777,K=520,TA=1", "M=1000,N=777,K=520,TA=1,TB=1"}) {
      const Problem p = spec.parse_problem(text, Dtype::bf16);
      const auto defines = spec.compile_defines(spec.default_config(), p, dev);
      using Define = std::pair<std::string, std::string>;
      CHECK(std::count(defines.begin(), defines.end(), Define{"GEMM_TB", std::to_string(p.at("TB"))}) == 1);
      CHECK(std::count(defines.begin(), defines.end(), Define{"GEMM_TA", std::to_string(p.at("TA"))}) == 1);
      // The smallest and largest operand tiles with the fewest and most threads copying them.
      for (const auto& [bm, bn, bk, wm, wn] : {std::tuple{32, 64, 64, 1, 2}, std::tuple{256, 128, 16, 4, 2},
                                               std::tuple{64, 128, 32, 2, 2}, std::tuple{128, 64, 64, 4, 1}}) {
        Config c = spec.default_config();
        c.values["BLOCK_M"] = bm;
        c.values["BLOCK_N"] = bn;
        c.values["BLOCK_K"] = bk;
        c.values["WARPS_M"] = wm;
        c.values["WARPS_N"] = wn;
        c.values["STAGES"] = 4;
        c.values["SWIZZLE"] = 1;
        INFO(cc << " " << text << " " << c.canonical());
        REQUIRE(SearchSpace(spec, {p}, dev).valid(c));
        CompileResult res = compile_config(spec, c, p, dev, arch_for(cc, spec.arch_specific));
        INFO(res.log);
        REQUIRE(res.ok);
        CHECK(res.res.spill_bytes() == 0);
      }
    }
  }
}

TEST_CASE("gemm_sm90 PACK=1: misaligned operands are packed into padded scratch copies that TMA reads",
          "[compile][plan]") {
  TempCache cache;
  KernelSpec spec = load_kernel("gemm_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();
  c.values["PACK"] = 1;

  // Odd K and odd N: both operands packed; rows padded to 2056 and 1336
  // elements, the maps keeping the true column counts.
  Problem odd = spec.parse_problem("M=777,N=1333,K=2049", Dtype::bf16);
  REQUIRE(SearchSpace(spec, {odd}, dev).valid(c));
  LaunchPlan l = Planner(spec, dev).launch(c, odd, 0);
  const TensorMapPlan* ta = tmap_over(l, "a_packed");
  const TensorMapPlan* tb = tmap_over(l, "b_packed");
  REQUIRE(ta);
  REQUIRE(tb);
  CHECK(ta->enabled);
  CHECK(ta->dims == std::vector<uint64_t>{2049, 777});
  CHECK(ta->strides_bytes == std::vector<uint64_t>{2056 * 2});
  CHECK(tb->enabled);
  CHECK(tb->dims == std::vector<uint64_t>{1333, 2049});
  CHECK(tb->strides_bytes == std::vector<uint64_t>{1336 * 2});
  CHECK(scratch_count(l, "a_packed") == 777 * 2056);
  CHECK(scratch_count(l, "b_packed") == 2049 * 1336);

  // Only N misaligned: A stays where it is.
  Problem odd_n = spec.parse_problem("M=512,N=1001,K=1024", Dtype::bf16);
  LaunchPlan ln = Planner(spec, dev).launch(c, odd_n, 0);
  CHECK_FALSE(tmap_over(ln, "a_packed")->enabled);
  CHECK(tmap_over(ln, "b_packed")->enabled);
  CHECK(scratch_count(ln, "a_packed") == 1);

  // Aligned problems have no PACK=1 configs (it would change nothing).
  CHECK_FALSE(SearchSpace(spec, {spec.parse_problem("M=512,N=1024,K=1024", Dtype::bf16)}, dev).valid(c));

  // The packing phase costs the consumers no registers: the default tile
  // (two consumer warpgroups at 168 registers) still compiles without spills.
  CompileResult res = compile_config(spec, c, odd, dev, arch_for(90, spec.arch_specific));
  INFO(res.log);
  REQUIRE(res.ok);
  CHECK(res.res.spill_bytes() == 0);
  CHECK(res.res.stack_frame == 0);
}

TEST_CASE("gemm_sm90 PACK=2: B with misaligned rows comes by TMA in aligned windows of every 8th row",
          "[compile][plan]") {
  TempCache cache;
  KernelSpec spec = load_kernel("gemm_sm90");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = spec.default_config();
  c.values["PACK"] = 2;
  c.values["PRODUCER"] = 1;
  c.values["STAGES"] = 2;
  c.values["SWIZZLE"] = 1;  // one row of tiles
  // The enabled tensor map over `buffer` (B has one per path).
  auto enabled_over = [](const LaunchPlan& l, const std::string& buffer) -> const TensorMapPlan* {
    for (const ArgPlan& a : l.args)
      if (a.kind == ArgPlan::Kind::tmap && a.tmap.buffer == buffer && a.tmap.enabled) return &a.tmap;
    return nullptr;
  };

  // A vocabulary-sized N: B seen as K/8 rows of 8N elements (16-byte aligned
  // rows); unswizzled boxes of 72 columns by BLOCK_K/8 rows; nothing packed.
  Problem vocab = spec.parse_problem("M=16,N=50257,K=1032", Dtype::bf16);
  REQUIRE(SearchSpace(spec, {vocab}, dev).valid(c));
  LaunchPlan l = Planner(spec, dev).launch(c, vocab, 0);
  const TensorMapPlan* b = enabled_over(l, "B");
  REQUIRE(b);
  CHECK(b->dims == std::vector<uint64_t>{8 * 50257, 1032 / 8});
  CHECK(b->strides_bytes == std::vector<uint64_t>{8 * 50257 * 2});
  CHECK(b->box == std::vector<uint32_t>{72, 64 / 8});
  CHECK(b->swizzle == 0);
  CHECK_FALSE(tmap_over(l, "a_packed")->enabled);
  CHECK_FALSE(tmap_over(l, "b_packed")->enabled);
  // Shared memory: the stages, EPILOGUE=1's staging, two raw k-tiles of
  // windows (4 x 64 columns x 8 residues x 8 rows x 144 bytes) and their
  // barriers, the barrier area, the alignment slack.
  CHECK(l.dims.smem == 1024 + 2 * (128 + 256) * 64 * 2 + 2 * 8192 + 2 * 4 * 8 * 8 * 144 + 64 + 256);

  // Only where it applies: B's rows misaligned, A's aligned, both row-major,
  // no multicast of B, a producer warpgroup not cut to 24 registers.
  for (const char* other : {"M=16,N=50256,K=1032", "M=16,N=50257,K=1031", "M=16,N=50257,K=1032,TB=1",
                            "M=16,N=50257,K=1032,TA=1"}) {
    INFO(other);
    CHECK_FALSE(SearchSpace(spec, {spec.parse_problem(other, Dtype::bf16)}, dev).valid(c));
  }
  const Problem tall = spec.parse_problem("M=4096,N=50257,K=1032", Dtype::bf16);
  for (const auto& [knob, value] : std::vector<std::pair<std::string, int64_t>>{
           {"CLUSTER_M", 2}, {"PRODUCER", 0}, {"REG_SPLIT", 1}}) {
    Config other = c;
    other.values["SWIZZLE"] = 8;
    other.values["BLOCK_N"] = 128;
    other.values["STAGES"] = 4;
    other.values[knob] = value;
    INFO(knob << "=" << value);
    CHECK_FALSE(SearchSpace(spec, {tall}, dev).valid(other));
    other.values["PACK"] = 1;  // the same config packing B instead is valid
    CHECK(SearchSpace(spec, {tall}, dev).valid(other));
  }

  // On a check shape where it does not apply, B's plain map.
  LaunchPlan la = Planner(spec, dev).launch(c, spec.parse_problem("M=300,N=520,K=1000", Dtype::bf16), 0);
  const TensorMapPlan* ba = enabled_over(la, "B");
  REQUIRE(ba);
  CHECK(ba->dims == std::vector<uint64_t>{520, 1000});

  // The spec's starts with PACK=2 are valid here and compile without spills
  // or a stack frame.
  int starts = 0;
  for (const Config& start : spec.starts) {
    if (start.values.at("PACK") != 2) continue;
    Config cfg = start;
    cfg.values["SWIZZLE"] = 1;
    INFO(cfg.canonical());
    REQUIRE(SearchSpace(spec, {vocab}, dev).valid(cfg));
    CompileResult res = compile_config(spec, cfg, vocab, dev, arch_for(90, spec.arch_specific));
    INFO(res.log);
    REQUIRE(res.ok);
    CHECK(res.res.spill_bytes() == 0);
    CHECK(res.res.stack_frame == 0);
    ++starts;
  }
  CHECK(starts == 3);
}
