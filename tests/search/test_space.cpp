#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/spec.hpp"
#include "kernel_templates/registry.hpp"
#include "search/space.hpp"
#include "tests/catch.hpp"
#include "tests/spec_error.hpp"

using namespace evotune;

namespace {

// BLOCK must be a multiple of 16 per warp, fit the problem (N), and its
// pipeline must fit 1 KiB (smem, via [lets] and dtype_bytes).
const char* kSpaceSpec = R"toml(
[kernel]
name = "toy"
source = "toy.cu"
entry = "toy"

[problem]
dims = ["N"]
dtypes = ["fp16", "fp32"]

[[param]]
name = "BLOCK"
values = [16, 32, 64, 128, 256]
default = 64

[[param]]
name = "WARPS"
values = [1, 2, 4, 8]
default = 2

[[param]]
name = "STAGES"
values = [1, 2, 3, 4]
default = 2

[lets]
smem = "BLOCK * STAGES * dtype_bytes"

[space]
constraints = ["BLOCK % (16*WARPS) == 0", "BLOCK <= N", "smem <= 1024"]

[launch]
grid = ["cdiv(N, BLOCK)"]
block = ["32*WARPS"]

[[arg]]
name = "out"
type = "f32*"
count = "N"
role = "out"

[reference]
source = "ref.cu"
entry = "ref"
grid = ["1"]
block = ["1"]
)toml";

KernelSpec toy_spec() {
  return parse_spec(kSpaceSpec, "toy.toml", [](const std::string&) { return std::string("// source"); });
}

Config make_config(int64_t block, int64_t warps, int64_t stages) {
  Config c;
  c.values = {{"BLOCK", block}, {"WARPS", warps}, {"STAGES", stages}};
  return c;
}

// The spec's constraints written out in C++, for every problem.
bool brute_force_valid(int64_t block, int64_t warps, int64_t stages, const std::vector<int64_t>& ns, int bytes) {
  for (int64_t n : ns)
    if (block % (16 * warps) != 0 || block > n || block * stages * bytes > 1024) return false;
  return true;
}

}  // namespace

TEST_CASE("enumeration equals a brute-force count of valid configs", "[search]") {
  KernelSpec spec = toy_spec();
  struct Case {
    std::vector<int64_t> ns;
    Dtype dtype;
  };
  for (const Case& cs : {Case{{256}, Dtype::fp16}, Case{{128, 64}, Dtype::fp16}, Case{{256}, Dtype::fp32}}) {
    std::vector<Problem> problems;
    for (int64_t n : cs.ns) problems.push_back(spec.parse_problem("N=" + std::to_string(n), cs.dtype));
    SearchSpace space(spec, problems, DeviceTraits{});
    int bytes = dtype_bytes(cs.dtype);

    std::set<Config> expected;
    for (int64_t b : spec.params[0].values)
      for (int64_t w : spec.params[1].values)
        for (int64_t s : spec.params[2].values)
          if (brute_force_valid(b, w, s, cs.ns, bytes)) expected.insert(make_config(b, w, s));
    REQUIRE(!expected.empty());
    REQUIRE(expected.size() < 80);  // the constraints do reject something

    const std::vector<Config>* all = space.enumerate_valid();
    REQUIRE(all != nullptr);
    CHECK(all->size() == expected.size());
    CHECK(std::set<Config>(all->begin(), all->end()) == expected);
    // Walk order: value indices ascend lexicographically, last parameter fastest.
    std::vector<size_t> previous;
    for (const Config& c : *all) {
      CHECK(space.valid(c));
      std::vector<size_t> idx;
      for (size_t i = 0; i < space.params().size(); ++i) idx.push_back(space.value_index(c, i));
      if (!previous.empty()) CHECK(previous < idx);
      previous = idx;
    }
  }
}

TEST_CASE("a constraint on a dimension is checked against every problem", "[search]") {
  KernelSpec spec = toy_spec();
  Problem big = spec.parse_problem("N=256", Dtype::fp16);
  Problem small = spec.parse_problem("N=64", Dtype::fp16);
  Config c = make_config(128, 2, 2);
  SearchSpace one(spec, {big}, DeviceTraits{});
  SearchSpace two(spec, {big, small}, DeviceTraits{});
  CHECK(one.valid(c));
  REQUIRE_FALSE(two.valid(c));
  std::string reason = *two.invalid_reason(c);
  CHECK(reason.find("BLOCK <= N") != std::string::npos);
  CHECK(reason.find("N=64") != std::string::npos);
  // The two-problem space is exactly the configs valid on both.
  SearchSpace only_small(spec, {small}, DeviceTraits{});
  size_t both = 0;
  for (const Config& x : *one.enumerate_valid()) both += only_small.valid(x);
  CHECK(two.enumerate_valid()->size() == both);
  CHECK(two.enumerate_valid()->size() < one.enumerate_valid()->size());
}

TEST_CASE("validity rejects foreign values, unknown and missing parameters", "[search]") {
  KernelSpec spec = toy_spec();
  SearchSpace space(spec, {spec.parse_problem("N=256", Dtype::fp16)}, DeviceTraits{});
  CHECK(space.valid(make_config(64, 2, 2)));
  CHECK_FALSE(space.valid(make_config(48, 1, 1)));  // 48 is a multiple of 16 but not a listed value
  Config extra = make_config(64, 2, 2);
  extra.values["UNROLL"] = 1;
  CHECK(space.invalid_reason(extra)->find("unknown parameter UNROLL") != std::string::npos);
  Config missing = make_config(64, 2, 2);
  missing.values.erase("STAGES");
  CHECK(space.invalid_reason(missing)->find("STAGES") != std::string::npos);
  CHECK(space.value_index(make_config(64, 8, 3), 0) == 2);
  CHECK(space.value_index(make_config(64, 8, 3), 1) == 3);
  CHECK_THROWS_AS(space.value_index(make_config(48, 1, 1), 0), UsageError);
}

TEST_CASE("enumerate_valid respects its limit and caches", "[search]") {
  KernelSpec spec = toy_spec();
  SearchSpace space(spec, {spec.parse_problem("N=256", Dtype::fp16)}, DeviceTraits{});
  CHECK(space.total_size() == 80);
  CHECK(space.enumerate_valid(79) == nullptr);
  const std::vector<Config>* first = space.enumerate_valid(80);
  REQUIRE(first != nullptr);
  CHECK(space.enumerate_valid() == first);
}

TEST_CASE("random_config draws uniformly from the whole product", "[search]") {
  KernelSpec spec = toy_spec();
  SearchSpace space(spec, {spec.parse_problem("N=64", Dtype::fp16)}, DeviceTraits{});
  std::mt19937_64 rng(7);
  const int draws = 8000;
  std::map<std::string, std::map<int64_t, int>> per_value;
  std::set<Config> distinct;
  int invalid = 0;
  for (int i = 0; i < draws; ++i) {
    Config c = space.random_config(rng);
    distinct.insert(c);
    invalid += !space.valid(c);
    for (const auto& [name, v] : c.values) per_value[name][v]++;
  }
  // Valid or not: the whole product, every config (80, each expected 100 times).
  CHECK(distinct.size() == 80);
  CHECK(invalid > 0);
  for (const ParamSpec& p : space.params()) {
    REQUIRE(per_value[p.name].size() == p.values.size());
    double expected = static_cast<double>(draws) / static_cast<double>(p.values.size());
    for (int64_t v : p.values) {
      CHECK(per_value[p.name][v] > 0.85 * expected);
      CHECK(per_value[p.name][v] < 1.15 * expected);
    }
  }
}

// The walk prunes a constraint as soon as the parameters it reads (directly or
// through [lets]) are set; on the built-in specs, whose constraints read lets
// of lets, it must find exactly the configs that checking each member of the
// whole product finds.
TEST_CASE("enumerate_valid's pruned walk equals filtering the whole product", "[search]") {
  for (const auto& [kernel, problem] : std::vector<std::pair<std::string, std::string>>{
           {"gemm", "M=1000,N=777,K=520"}, {"sdpa_fwd", "B=2,H=8,S=2048,D=64"}}) {
    INFO(kernel);
    KernelSpec spec = load_kernel(kernel);
    SearchSpace space(spec, {spec.parse_problem(problem, Dtype::fp16)}, DeviceTraits{90, 132});
    REQUIRE(space.total_size() <= 400'000);
    std::vector<Config> expected;
    const auto& ps = space.params();
    std::vector<size_t> index(ps.size(), 0);
    for (;;) {
      Config c;
      for (size_t i = 0; i < ps.size(); ++i) c.values[ps[i].name] = ps[i].values[index[i]];
      if (space.valid(c)) expected.push_back(c);
      size_t d = ps.size();
      while (d > 0 && ++index[d - 1] == ps[d - 1].values.size()) index[--d] = 0;
      if (d == 0) break;
    }
    REQUIRE(expected.size() > 100);
    REQUIRE(expected.size() < space.total_size() / 4);  // the constraints prune a lot
    const std::vector<Config>* walked = space.enumerate_valid();
    REQUIRE(walked != nullptr);
    CHECK(*walked == expected);  // same configs, same order
  }
}

namespace {

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

KernelSpec toy_with(const std::string& from, const std::string& to) {
  return parse_spec(replace(kSpaceSpec, from, to), "toy.toml", [](const std::string&) { return std::string("//"); });
}

using evotune_test::has;
using evotune_test::spec_error;

}  // namespace

TEST_CASE("an expression that cannot be evaluated is a spec error, never a config left out", "[search]") {
  const std::string last = "\"smem <= 1024\"";
  // It fails on the default config: the space refuses to be made.
  KernelSpec now = toy_with(last, last + ", \"N % (BLOCK - 64) == 0\"");
  Problem p = now.parse_problem("N=256", Dtype::fp16);
  std::string why = spec_error([&] { SearchSpace(now, {p}, DeviceTraits{}); });
  CHECK(has(why, "toy.toml: [space].constraints[3] \"N % (BLOCK - 64) == 0\" on N=256 fp16"));
  CHECK(has(why, "config BLOCK=64,STAGES=2,WARPS=2: modulo by zero"));
  // It fails only where two parameters leave their defaults: the enumeration
  // reports it instead of dropping those configs, and reports it again.
  KernelSpec later = toy_with(last, last + ", \"STAGES == 2 || WARPS == 2 || N / (BLOCK - 64) > 0\"");
  SearchSpace space(later, {p}, DeviceTraits{});
  why = spec_error([&] { space.enumerate_valid(); });
  CHECK(has(why, "[space].constraints[3]"));
  CHECK(has(why, "division by zero in \"N / (BLOCK - 64)\""));
  CHECK(has(why, "BLOCK=64"));
  CHECK_THROWS_AS(space.enumerate_valid(), SpecError);
  CHECK_THROWS_AS(space.valid(make_config(64, 1, 1)), SpecError);
  CHECK(space.valid(make_config(64, 2, 2)));
  CHECK_FALSE(space.valid(make_config(64, 8, 1)));  // another constraint rejects it: no error
}

TEST_CASE("making the space evaluates counts and geometry on the problems and their check shapes", "[search]") {
  const Problem big = toy_spec().parse_problem("N=256", Dtype::fp16);
  // An out buffer's count, negative on the check shape only.
  KernelSpec counted = toy_with("count = \"N\"", "count = \"N - 100\"");
  CHECK_NOTHROW(SearchSpace(counted, {big}, DeviceTraits{}));
  KernelSpec checked =
      parse_spec(replace(replace(kSpaceSpec, "count = \"N\"", "count = \"N - 100\""), "dtypes = [\"fp16\", \"fp32\"]",
                         "dtypes = [\"fp16\", \"fp32\"]\ncheck_shapes = [\"N=33\"]"),
                 "toy.toml", [](const std::string&) { return std::string("//"); });
  std::string why = spec_error([&] { SearchSpace(checked, {big}, DeviceTraits{}); });
  CHECK(has(why, "[[arg]] out count \"N - 100\" on N=33 fp16: must be a positive integer, is -67"));
  // The kernel's grid for the default config; the reference's block.
  KernelSpec grid = toy_with("grid = [\"cdiv(N, BLOCK)\"]", "grid = [\"cdiv(N, BLOCK) - 4\"]");
  why = spec_error([&] { SearchSpace(grid, {big}, DeviceTraits{}); });
  CHECK(has(why, "[launch].grid[0]"));
  CHECK(has(why, "config BLOCK=64,STAGES=2,WARPS=2: must be a positive integer, is 0"));
  KernelSpec ref = toy_with("block = [\"1\"]", "block = [\"N / 512\"]");
  why = spec_error([&] { SearchSpace(ref, {big}, DeviceTraits{}); });
  CHECK(has(why, "[reference].block[0] \"N / 512\" on N=256 fp16: must be a positive integer, is 0"));
  CHECK_NOTHROW(SearchSpace(ref, {ref.parse_problem("N=1024", Dtype::fp16)}, DeviceTraits{}));
}
