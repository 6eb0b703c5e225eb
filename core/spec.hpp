// A tunable kernel's spec: what the tuner needs to know to compile, launch,
// verify and time it. Built-in templates and user kernels use the same TOML
// format (docs/SPEC_FORMAT.md); built-ins are embedded in the binary.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/expr.hpp"
#include "core/types.hpp"

namespace evotune {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> values;  // ordered: mutation moves to a neighbour
  int64_t default_value = 0;
  std::string help;
};

enum class ScalarType { i32, i64, u32, f32 };
enum class ArgRole { in, out, scratch };
enum class InitKind { normal, uniform, zero, ones };

std::string to_string(ScalarType t);
std::string to_string(ArgRole r);
std::string to_string(InitKind k);

// A TMA tensor map (sm_90) over one of the buffers, passed by value as a
// 128-byte `const __grid_constant__` parameter. Dims, strides and box are in
// elements, innermost first; strides list dims 1..rank-1.
struct TensorMapSpec {
  std::string tensor;  // the buffer [[arg]] it describes
  std::vector<Expr> dims, strides, box;
  Expr swizzle;          // bytes: 0, 32, 64, 128
  Expr l2_promotion;     // bytes: 0, 64, 128, 256
  Expr enabled;          // false: an all-zero map (the kernel must not use it)
  bool oob_nan = false;  // out-of-bounds elements read as NaN instead of zero
};

struct ArgSpec {
  std::string name;
  bool is_buffer = true;
  bool is_tmap = false;
  TensorMapSpec tmap;
  ElemType elem = ElemType::elem;       // buffers
  ScalarType scalar = ScalarType::i32;  // scalars
  Expr count;                           // buffers: number of elements
  Expr value;                           // scalars
  ArgRole role = ArgRole::in;
  InitKind init = InitKind::normal;
  // Stddev (normal) or half-range (uniform), per problem: a number, or an
  // expression over the dims (0: an all-zero tensor, e.g. on a check shape).
  Expr init_scale = Expr::constant(Value(1.0));
  // Added to every normal or uniform value (uniform around it: positive
  // factors such as per-head descales); a number or an expression.
  Expr init_offset = Expr::constant(Value(0.0));
};

struct LaunchSpec {
  std::array<Expr, 3> grid;
  std::array<Expr, 3> block;
  Expr smem;                    // dynamic shared memory bytes
  std::array<Expr, 3> cluster;  // empty when the kernel uses no clusters
  bool has_cluster() const { return !cluster[0].empty(); }
};

struct ReferenceSpec {
  std::string source_name;
  std::string source_text;
  std::string entry;
  LaunchSpec launch;
  std::vector<std::string> args;  // names of the kernel's args, in the reference's order
};

struct ToleranceSpec {
  Expr max_abs, mean_abs, atol, rtol, max_bad_frac;
};

struct GateSpec {
  Expr max_registers, max_smem, max_spill_bytes, max_stack;
  // false: a kernel whose wgmma ptxas serialised is rejected (Resources::wgmma_serialized).
  bool allow_serialized_wgmma = true;
  // compute-sanitizer tools the winners must pass (those that work on the
  // kernel: racecheck does not model every asynchronous copy).
  std::vector<std::string> sanitize = {"memcheck"};
};

// The compute-sanitizer tools a spec may name in [gates] sanitize.
const std::vector<std::string>& sanitizer_tools();

// [[baseline]]: a vendor library's kernel for the same problem, measured after
// the search on the same GPU with the same timing method as the candidates
// (tune/baselines.hpp). Each library takes named buffers or strings and
// expressions over the problem's dims and [lets] (evaluated with the default
// config); the template's own reference kernel is always a baseline too.
struct BaselineSpec {
  std::string name;  // unique in the spec; "reference" is the reference kernel's
  std::string library;
  std::map<std::string, std::string> strings;  // buffer names (of [[arg]] buffers), other strings
  std::map<std::string, Expr> values;
};

// What a [[baseline]] library takes.
struct BaselineLibrary {
  std::string name;
  std::vector<std::string> buffers, strings, values;  // all required
  std::string help;
  std::vector<std::string> optional_values;  // 0 where left out
};
const std::vector<BaselineLibrary>& baseline_libraries();
const BaselineLibrary* find_baseline_library(const std::string& name);

// Evaluated geometry of one launch.
struct LaunchDims {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  std::array<int64_t, 3> cluster{1, 1, 1};
  int64_t smem = 0;
};

// The compute capabilities (× 10) a spec may name: the architectures NVRTC targets.
constexpr int kMinComputeCapability = 50;
constexpr int kMaxComputeCapability = 200;

// What the device (or the architecture named for compile-only) offers to
// launch expressions: `cc`, `num_sms`.
struct DeviceTraits {
  int cc = 90;  // compute capability × 10
  int num_sms = 132;
  static DeviceTraits for_arch(int cc);
};

// What a spec value must be, checked wherever it is evaluated.
enum class ValueRule {
  any,
  positive_int,   // grid, block, cluster, buffer counts, tensor map extents
  nonneg_int,     // dynamic shared memory, gates
  number,         // input offsets: any finite number
  nonneg_number,  // tolerances, flops, bytes
  fraction,       // max_bad_frac: 0 to 1
};

// One expression of a spec and where it is written.
struct ExprSite {
  std::string where;  // "[launch].grid[0]", "[[arg]] X count"
  const Expr* expr = nullptr;
  ValueRule rule = ValueRule::any;
  // false: evaluated per problem with no config, so it must read no parameter.
  bool needs_config = true;
  // A constraint or a let: evaluated only where its turn comes (a guard
  // before it may keep it from being evaluated at all).
  bool guarded = false;
};

struct Tolerances {
  double max_abs = 0, mean_abs = 0, atol = 0, rtol = 0, max_bad_frac = 0;
};

struct KernelSpec {
  // [kernel]
  std::string name, description;
  std::string origin;       // "builtin" or the spec file's path
  std::string source_name;  // file name, for compiler messages
  std::string source_text;
  std::string entry;
  int min_cc = 70;
  int max_cc = 0;                                            // 0: none
  bool arch_specific = false;                                // needs sm_XXa (wgmma, setmaxnreg)
  std::vector<std::string> options;                          // extra NVRTC options
  std::vector<std::string> include_dirs;                     // absolute
  std::vector<std::pair<std::string, std::string>> headers;  // include name → text (built-ins)

  // [problem]
  std::vector<std::string> dims;
  std::map<std::string, int64_t> dim_defaults;
  std::vector<Dtype> dtypes;
  std::vector<Expr> problem_constraints;
  std::string example;
  Expr flops, bytes;
  std::vector<std::string> check_shapes;

  std::vector<std::pair<std::string, Expr>> defines;
  std::vector<ParamSpec> params;
  std::map<std::string, Expr> lets;
  std::vector<Expr> constraints;
  // [space] starts: configs the evo search tries right after the default
  // (the template author's known-good points; each a full config, left-out
  // parameters at their defaults). Those invalid for a run are skipped.
  std::vector<Config> starts;
  LaunchSpec launch;
  std::vector<ArgSpec> args;
  ReferenceSpec reference;
  std::map<std::string, ToleranceSpec> tolerance;  // "" = default, else per dtype
  GateSpec gates;
  std::vector<BaselineSpec> baselines;

  std::string spec_text;

  // Hash of everything that defines the kernel's behaviour.
  std::string content_hash() const;
  const ParamSpec* find_param(const std::string& name) const;
  Config default_config() const;
  // Total size of the cartesian product of parameter values.
  double space_size() const;

  // Parses "2,8,512,64" or "B=2,H=8,S=512,D=64"; fills optional dims; checks
  // the problem constraints and dtype. Throws UsageError (SpecError when a
  // problem constraint cannot be evaluated).
  Problem parse_problem(const std::string& text, Dtype dtype) const;
  // Fills defaults and checks a problem; throws UsageError, or SpecError.
  void check_problem(Problem& p) const;
  // A check shape (verified on every trial) completed from a run's problem.
  Problem check_shape(size_t i, const Problem& base) const;
  // The check shapes completed from the run's problems: those the kernel
  // accepts, each once, none equal to a run problem.
  std::vector<Problem> check_problems(const std::vector<Problem>& run) const;

  // nullopt when the config is valid for every problem, else the reason. A
  // config is invalid when any constraint is false; a constraint that cannot
  // be evaluated on a config no constraint rejects is the spec's fault, not
  // the config's: SpecError.
  std::optional<std::string> invalid_reason(const Config& c, const std::vector<Problem>& problems,
                                            const DeviceTraits& dev) const;
  // Problem binding: evaluates, on the run's problems and their check
  // shapes, every expression that needs no config, then every expression for
  // the default config, the [space] starts and each config one parameter
  // away from the default that is valid. Throws SpecError naming the
  // expression, the problem, the config and the values when one cannot be
  // evaluated or breaks its ValueRule.
  void check_binding(const std::vector<Problem>& problems, const DeviceTraits& dev) const;

  // Every expression of the spec with where it is written and its rule.
  std::vector<ExprSite> expr_sites() const;
  // Every name `e` reads, directly or through [lets] (the lets included).
  std::set<std::string> names_used(const Expr& e) const;
  // "builtin:gemm" or the spec file's path, to start a message.
  std::string label() const;

  LaunchDims launch_dims(const Config& c, const Problem& p, const DeviceTraits& dev) const;
  LaunchDims reference_launch_dims(const Problem& p, const DeviceTraits& dev) const;
  // Compile-time macros for NVRTC: params, [defines], the dtype macro.
  std::vector<std::pair<std::string, std::string>> compile_defines(const Config& c, const Problem& p,
                                                                   const DeviceTraits& dev) const;
  // The same for the reference: [defines] that need no tunable, the dtype macro.
  std::vector<std::pair<std::string, std::string>> reference_defines(const Problem& p, const DeviceTraits& dev) const;
  Tolerances tolerances(const Problem& p) const;
  // Resource gate: nullopt when within limits, else the reason.
  std::optional<std::string> gate_reason(const Resources& r, const Config& c, const Problem& p,
                                         const DeviceTraits& dev) const;
  double flops_of(const Problem& p) const;  // 0 when the spec gives none
};

// The names every expression may read besides params, dims and [lets].
const std::vector<std::string>& builtin_names();

// Evaluates names against one kernel, problem, config and device: params,
// dims, [lets] (lazily, with cycle detection) and built-ins (dtype_bytes, cc,
// num_sms).
class Scope {
 public:
  Scope(const KernelSpec& spec, const Problem* problem, const Config* config, const DeviceTraits& dev);
  // Throws ExprError with the values of the names the expression reads.
  Value eval(const Expr& e) const;
  // A spec value: a failure, or a value `rule` refuses, is a SpecError
  // naming `where`, the expression, the problem and the config.
  Value eval(const Expr& e, ValueRule rule, const std::string& where) const;
  // The same for a list entry: where is "key[index]".
  Value eval(const Expr& e, ValueRule rule, std::string_view key, size_t index) const;
  std::optional<Value> lookup(std::string_view name) const;

 private:
  template <typename Where>
  Value eval_at(const Expr& e, ValueRule rule, const Where& where) const;
  std::string values_of(const Expr& e) const;
  std::string context() const;

  const KernelSpec& spec_;
  const Problem* problem_;
  const Config* config_;
  DeviceTraits dev_;
  mutable std::map<std::string, Value, std::less<>> memo_;
  mutable std::vector<std::string> evaluating_;
};

// Loads a spec from a TOML file on disk (sources resolved next to it).
KernelSpec load_spec_file(const std::string& path);
// Parses a spec from text; `read` fetches a file named relative to the spec.
KernelSpec parse_spec(const std::string& text, const std::string& origin,
                      const std::function<std::string(const std::string&)>& read);

}  // namespace evotune
