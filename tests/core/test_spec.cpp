#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/spec.hpp"
#include "core/strings.hpp"
#include "kernel_templates/registry.hpp"
#include "tests/catch.hpp"
#include "tests/spec_error.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;

namespace {

const char* kSpec = R"toml(
[kernel]
name = "toy"
description = "a toy"
source = "k.cu"
entry = "toy"

[problem]
dims = ["M", "N"]
defaults = { T = 0 }
dtypes = ["fp16", "bf16"]
constraints = ["M >= 1", "N >= 1", "T == 0 || T == 1"]
example = "M=1024,N=512"
check_shapes = ["M=33,N=17"]

[defines]
TRANSPOSED = "T"

[[param]]
name = "TILE"
values = [16, 32, 64]
default = 32

[[param]]
name = "WARPS"
values = [1, 2, 4]

[lets]
threads = "32 * WARPS"
smem_bytes = "TILE * TILE * dtype_bytes"

[space]
constraints = ["threads <= TILE * 4", "TILE <= N"]

[launch]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
block = ["threads"]
smem = "smem_bytes"

[[arg]]
name = "X"
type = "elem*"
count = "M*N"

[[arg]]
name = "Y"
type = "elem*"
count = "M*N"
role = "out"

[[arg]]
name = "M"
type = "i32"
value = "M"

[[arg]]
name = "scale"
type = "f32"
value = "1.0/sqrt(N)"

[reference]
source = "r.cu"
entry = "toy_ref"
grid = ["cdiv(M*N, 256)"]
block = ["256"]
args = ["X", "Y", "M"]

[tolerance]
max_abs = "0.01 * sqrt(N)"
atol = 0.001
[tolerance.bf16]
max_abs = 0.5

[gates]
max_registers = 128
max_spill_bytes = 0
)toml";

KernelSpec parse(const std::string& text) {
  return parse_spec(text, "test.toml", [](const std::string& f) { return "// " + f; });
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

using evotune_test::has;
using evotune_test::spec_error;

void rejects(const std::string& text, const std::string& fragment) {
  std::string why = spec_error([&] { parse(text); });
  INFO(why);
  CHECK(has(why, fragment));
}

const std::string kSpace = "constraints = [\"threads <= TILE * 4\", \"TILE <= N\"]";

KernelSpec with_constraints(const std::string& more) {
  return parse(replace(kSpec, kSpace, "constraints = [\"threads <= TILE * 4\", \"TILE <= N\", " + more + "]"));
}

}  // namespace

TEST_CASE("a spec parses into its parts", "[spec]") {
  KernelSpec s = parse(kSpec);
  CHECK(s.name == "toy");
  CHECK(s.source_text == "// k.cu");
  CHECK(s.reference.source_text == "// r.cu");
  CHECK(s.params.size() == 2);
  CHECK(s.params[0].default_value == 32);
  CHECK(s.params[1].default_value == 1);  // first value when no default
  CHECK(s.args.size() == 4);
  CHECK(s.args[1].role == ArgRole::out);
  CHECK(s.space_size() == 9);
  CHECK(s.default_config().canonical() == "TILE=32,WARPS=1");
}

TEST_CASE("problems parse by position or by name, with defaults", "[spec]") {
  KernelSpec s = parse(kSpec);
  Problem p = s.parse_problem("1024,512", Dtype::fp16);
  CHECK(p.canonical() == "M=1024,N=512,T=0");
  Problem q = s.parse_problem("N=512, M=1024, T=1", Dtype::bf16);
  CHECK(q.canonical() == "M=1024,N=512,T=1");
  CHECK(s.parse_problem("1024,512,1", Dtype::fp16).at("T") == 1);
  CHECK_THROWS_AS(s.parse_problem("1024", Dtype::fp16), UsageError);
  CHECK_THROWS_AS(s.parse_problem("1024,x", Dtype::fp16), UsageError);
  CHECK_THROWS_AS(s.parse_problem("1024,0", Dtype::fp16), UsageError);
  CHECK_THROWS_AS(s.parse_problem("M=1,Q=2", Dtype::fp16), UsageError);
  CHECK_THROWS_AS(s.parse_problem("M=1,N=2,T=3", Dtype::fp16), UsageError);  // problem constraint
  CHECK_THROWS_AS(s.parse_problem("1024,512", Dtype::fp32), UsageError);     // dtype not accepted
}

TEST_CASE("constraints see params, dims and lets, for every problem", "[spec]") {
  KernelSpec s = parse(kSpec);
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Problem big = s.parse_problem("1024,512", Dtype::fp16);
  Problem narrow = s.parse_problem("1024,16", Dtype::fp16);
  Config c = Config::parse("TILE=32,WARPS=4");  // threads 128 <= 128
  CHECK_FALSE(s.invalid_reason(c, {big}, dev));
  CHECK(s.invalid_reason(c, {big, narrow}, dev));                         // TILE <= N fails on the second
  CHECK(s.invalid_reason(Config::parse("TILE=16,WARPS=4"), {big}, dev));  // threads 128 > 64
  CHECK(s.invalid_reason(Config::parse("TILE=48,WARPS=1"), {big}, dev));  // not a listed value
  CHECK(s.invalid_reason(Config::parse("TILE=32"), {big}, dev));          // missing parameter
  CHECK(s.invalid_reason(Config::parse("TILE=32,WARPS=1,X=1"), {big}, dev));
}

TEST_CASE("launch geometry, defines, tolerances and gates evaluate", "[spec]") {
  KernelSpec s = parse(kSpec);
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Problem p = s.parse_problem("100,70,1", Dtype::bf16);
  Config c = Config::parse("TILE=32,WARPS=2");
  LaunchDims d = s.launch_dims(c, p, dev);
  CHECK(d.grid == std::array<int64_t, 3>{3, 4, 1});
  CHECK(d.block == std::array<int64_t, 3>{64, 1, 1});
  CHECK(d.smem == 32 * 32 * 2);
  auto defs = s.compile_defines(c, p, dev);
  auto has = [&](const std::string& k, const std::string& v) {
    return std::find(defs.begin(), defs.end(), std::make_pair(k, v)) != defs.end();
  };
  CHECK(has("TILE", "32"));
  CHECK(has("TRANSPOSED", "1"));
  CHECK(has("EVOTUNE_DTYPE_BF16", "1"));
  Tolerances t = s.tolerances(p);
  CHECK(t.max_abs == Approx(0.5));  // the bf16 override
  CHECK(t.atol == Approx(0.001));   // inherited
  Tolerances t16 = s.tolerances(s.parse_problem("100,64", Dtype::fp16));
  CHECK(t16.max_abs == Approx(0.08));
  Resources r;
  r.registers = 200;
  CHECK(s.gate_reason(r, c, p, dev));
  r.registers = 100;
  CHECK_FALSE(s.gate_reason(r, c, p, dev));
  r.spill_stores = 4;
  CHECK(s.gate_reason(r, c, p, dev));
  CHECK(s.check_shape(0, p).canonical() == "M=33,N=17,T=1");
}

TEST_CASE("a kernel whose wgmma ptxas serialised passes unless the spec's gate rejects it, with the reason",
          "[spec]") {
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Config c = Config::parse("TILE=32,WARPS=2");
  Resources r;
  r.registers = 100;
  r.wgmma_serialized = 7512;
  KernelSpec allowing = parse(kSpec);  // the gate's default
  CHECK(allowing.gates.allow_serialized_wgmma);
  Problem p = allowing.parse_problem("100,70,1", Dtype::bf16);
  CHECK_FALSE(allowing.gate_reason(r, c, p, dev));
  KernelSpec s = parse(replace(kSpec, "max_spill_bytes = 0", "max_spill_bytes = 0\nallow_serialized_wgmma = false"));
  CHECK_FALSE(s.gates.allow_serialized_wgmma);
  auto why = s.gate_reason(r, c, p, dev);
  REQUIRE(why);
  CHECK(why->find("C7512") != std::string::npos);
  CHECK(why->find("insufficient register resources for the function") != std::string::npos);
  r.wgmma_serialized = 7599;  // an advisory this evotune does not know: its number alone
  why = s.gate_reason(r, c, p, dev);
  REQUIRE(why);
  CHECK(why->find("C7599)") != std::string::npos);
  r.wgmma_serialized = 0;
  CHECK_FALSE(s.gate_reason(r, c, p, dev));
  std::string bad = spec_error(
      [&] { parse(replace(kSpec, "max_spill_bytes = 0", "max_spill_bytes = 0\nallow_serialized_wgmma = \"no\"")); });
  CHECK(bad.find("allow_serialized_wgmma") != std::string::npos);
  CHECK(bad.find("true or false") != std::string::npos);
}

TEST_CASE("malformed specs are rejected with the place of the error", "[spec]") {
  auto rejects = [](const std::string& text, const std::string& fragment) {
    try {
      parse(text);
      FAIL("expected a SpecError mentioning " << fragment);
    } catch (const SpecError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(fragment) != std::string::npos);
    }
  };
  rejects("not toml [", "test.toml:");
  rejects(replace(kSpec, "entry = \"toy\"\n", ""), "entry");
  rejects(replace(kSpec, "block = [\"threads\"]", "blok = [\"threads\"]"), "unknown key 'blok'");
  rejects(replace(kSpec, "\"threads <= TILE * 4\"", "\"threads <= TILEE * 4\""), "unknown name 'TILEE'");
  rejects(replace(kSpec, "values = [16, 32, 64]", "values = [16, 32, 32]"), "twice");
  rejects(replace(kSpec, "default = 32", "default = 48"), "not one of its values");
  rejects(replace(kSpec, "role = \"out\"", "role = \"in\""), "out");
  rejects(replace(kSpec, "type = \"f32\"", "type = \"f31\""), "unknown type");
  rejects(replace(kSpec, "args = [\"X\", \"Y\", \"M\"]", "args = [\"X\", \"Z\"]"), "'Z'");
  rejects(replace(kSpec, "smem = \"smem_bytes\"", "smem = \"smem_bytes +\""), "smem");
  rejects(replace(kSpec, "check_shapes = [\"M=33,N=17\"]", "check_shapes = [\"Q=3\"]"), "check_shapes");
  const std::string space = "constraints = [\"threads <= TILE * 4\", \"TILE <= N\"]";
  rejects(replace(kSpec, space, space + "\nstarts = [\"TILES=64\"]"), "no parameter TILES");
  rejects(replace(kSpec, space, space + "\nstarts = [\"TILE=48\"]"), "TILE=48 is not one of");
  rejects(replace(kSpec, space, space + "\nstarts = [\"TILE\"]"), "starts");
}

TEST_CASE("start configs parse with the defaults filled in", "[spec]") {
  const std::string space = "constraints = [\"threads <= TILE * 4\", \"TILE <= N\"]";
  KernelSpec s = parse(replace(kSpec, space, space + "\nstarts = [\"TILE=64\", \"WARPS=4,TILE=16\"]"));
  REQUIRE(s.starts.size() == 2);
  CHECK(s.starts[0].canonical() == "TILE=64,WARPS=1");
  CHECK(s.starts[1].canonical() == "TILE=16,WARPS=4");
  CHECK(parse(kSpec).starts.empty());
}

TEST_CASE("lets that refer to themselves are an error at load, not a hang", "[spec]") {
  std::string why = spec_error([&] {
    parse(replace(kSpec, "threads = \"32 * WARPS\"", "threads = \"smem_bytes2\"\nsmem_bytes2 = \"threads\""));
  });
  CHECK(has(why, "test.toml: [lets].smem_bytes2: the lets form a cycle: smem_bytes2 -> threads -> smem_bytes2"));
  why = spec_error([&] { parse(replace(kSpec, "threads = \"32 * WARPS\"", "threads = \"1 + threads\"")); });
  CHECK(has(why, "threads -> threads"));
  why = spec_error([&] {
    parse(
        replace(kSpec, "threads = \"32 * WARPS\"", "threads = \"a + 32 * WARPS\"\na = \"b\"\nb = \"TILE + threads\""));
  });
  CHECK(has(why, "a -> b -> threads -> a"));
}

TEST_CASE("built-in kernels load and unknown names are a usage error", "[spec]") {
  auto names = builtin_kernel_names();
  REQUIRE(names.size() >= 2);
  for (const auto& n : names) {
    KernelSpec s = load_kernel(n);
    CHECK(s.name == n);
    CHECK_FALSE(s.source_text.empty());
    CHECK_FALSE(s.reference.source_text.empty());
    CHECK_FALSE(s.headers.empty());  // evotune_ptx.cuh
    CHECK_FALSE(s.check_shapes.empty());
  }
  CHECK_THROWS_AS(load_kernel("no_such_kernel"), UsageError);
}

TEST_CASE("a spec file on disk resolves its sources next to it", "[spec]") {
  auto dir = std::filesystem::temp_directory_path() / "evotune_spec_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "spec.toml") << kSpec;
  std::ofstream(dir / "k.cu") << "// kernel";
  std::ofstream(dir / "r.cu") << "// ref";
  KernelSpec s = load_kernel((dir / "spec.toml").string());
  CHECK(s.source_text == "// kernel");
  CHECK(s.origin == (dir / "spec.toml").string());
  std::filesystem::remove(dir / "r.cu");
  CHECK_THROWS_AS(load_kernel((dir / "spec.toml").string()), SpecError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a spec file's own headers are read with it, transitively, and are part of its identity", "[spec]") {
  evotune_test::TempDir t;
  const auto& d = t.path;
  std::filesystem::create_directories(d / "inc" / "sub");
  std::ofstream(d / "spec.toml") << replace(kSpec, "entry = \"toy\"\n", "entry = \"toy\"\nincludes = [\"inc\"]\n");
  // Found next to the source, in an include folder, next to the header that
  // includes it; a system header and a built-in helper left alone.
  std::ofstream(d / "k.cu") << "#include <cuda_fp16.h>\n#  include \"a.cuh\"\n#include \"evotune_ptx.cuh\"\n"
                               "// #include \"commented.cuh\"\n";
  std::ofstream(d / "inc" / "a.cuh") << "#include \"sub/b.cuh\"\n#define A 1\n";
  // <name> from the include folders, not the includer's own (where "name" would be found first).
  std::ofstream(d / "inc" / "sub" / "b.cuh") << "#include <c.cuh>\n#define B 2\n";
  std::ofstream(d / "inc" / "sub" / "c.cuh") << "#define C 6\n";
  std::ofstream(d / "inc" / "c.cuh") << "#define C 5\n";
  std::ofstream(d / "r.cu") << "#include \"r.cuh\"\n";
  std::ofstream(d / "r.cuh") << "#define R 3\n";
  std::ofstream(d / "commented.cuh") << "#define C 4\n";
  const std::string spec = (d / "spec.toml").string();
  auto header = [](const KernelSpec& s, const std::string& name) -> std::string {
    for (const auto& [n, text] : s.headers)
      if (n == name) return text;
    return "(absent)";
  };
  KernelSpec s = load_kernel(spec);
  CHECK(header(s, "a.cuh") == "#include \"sub/b.cuh\"\n#define A 1\n");
  CHECK(header(s, "sub/b.cuh") == "#include <c.cuh>\n#define B 2\n");
  CHECK(header(s, "c.cuh") == "#define C 5\n");
  CHECK(header(s, "r.cuh") == "#define R 3\n");
  CHECK(header(s, "evotune_ptx.cuh") == embedded_file("kernel_templates/common/evotune_ptx.cuh"));
  CHECK(header(s, "commented.cuh") == "(absent)");
  CHECK(header(s, "cuda_fp16.h") == "(absent)");
  // An edited header is another kernel.
  const std::string before = s.content_hash();
  std::ofstream(d / "inc" / "sub" / "b.cuh") << "#define B 3\n";
  CHECK(load_kernel(spec).content_hash() != before);
  // A file of the user's own takes the place of a built-in helper of its name.
  std::ofstream(d / "evotune_ptx.cuh") << "// mine\n";
  KernelSpec mine = load_kernel(spec);
  CHECK(header(mine, "evotune_ptx.cuh") == "// mine\n");
  size_t copies = 0;
  for (const auto& [n, text] : mine.headers) copies += n == "evotune_ptx.cuh";
  CHECK(copies == 1);
}

TEST_CASE("numbers in shapes, check shapes and configs are decimal, never octal", "[spec]") {
  CHECK(parse_int("0") == 0);
  CHECK(parse_int("-3") == -3);
  CHECK(parse_int("512") == 512);
  CHECK(parse_int("9223372036854775807") == INT64_MAX);
  CHECK(parse_int("-9223372036854775808") == INT64_MIN);
  for (const char* text :
       {"0512", "010", "08", "00", "-007", "0x10", "+5", "", "-", " 1", "1 ", "9223372036854775808", "1e3", "12abc"}) {
    INFO(text);
    CHECK_FALSE(parse_int(text));
  }
  KernelSpec s = parse(kSpec);
  CHECK(s.parse_problem("1024,512", Dtype::fp16).at("N") == 512);
  for (const char* shape : {"1024,0512", "1024,0x200", "M=1024,N=0512", "M=1024,N=0x200"}) {
    INFO(shape);
    try {
      s.parse_problem(shape, Dtype::fp16);
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("decimal") != std::string::npos);
    }
  }
  CHECK_THROWS_AS(Config::parse("TILE=010"), UsageError);
  CHECK_THROWS_AS(Config::parse("TILE=0x20"), UsageError);
  CHECK(Config::parse("TILE=32").at("TILE") == 32);
  CHECK_THROWS_AS(parse(replace(kSpec, "check_shapes = [\"M=33,N=17\"]", "check_shapes = [\"M=033,N=17\"]")),
                  SpecError);
  const std::string space = "constraints = [\"threads <= TILE * 4\", \"TILE <= N\"]";
  CHECK_THROWS_AS(parse(replace(kSpec, space, space + "\nstarts = [\"TILE=064\"]")), SpecError);
  // In expressions too: a leading zero is refused, 0x hex is read as hex.
  CHECK_THROWS_AS(parse(replace(kSpec, "\"TILE <= N\"", "\"TILE <= 0512\"")), SpecError);
  CHECK(parse(replace(kSpec, "\"TILE <= N\"", "\"TILE <= 0x200\"")).constraints[1].text() == "TILE <= 0x200");
}

TEST_CASE("a constraint that cannot be evaluated is a spec error, never an invalid config", "[spec]") {
  KernelSpec s = with_constraints("\"N % (TILE - 16) == 0\"");
  DeviceTraits dev = DeviceTraits::for_arch(90);
  Problem p = s.parse_problem("1024,512", Dtype::fp16);
  std::string why = spec_error([&] { s.invalid_reason(Config::parse("TILE=16,WARPS=1"), {p}, dev); });
  CHECK(has(why, "test.toml: [space].constraints[2] \"N % (TILE - 16) == 0\""));
  CHECK(has(why, "on M=1024,N=512,T=0 fp16, config TILE=16,WARPS=1"));
  CHECK(has(why, "modulo by zero in \"N % (TILE - 16)\""));
  CHECK(has(why, "with N=512, TILE=16"));
  CHECK_FALSE(s.invalid_reason(Config::parse("TILE=32,WARPS=1"), {p}, dev));
  // A constraint that is false rejects the config, wherever it stands.
  CHECK(s.invalid_reason(Config::parse("TILE=16,WARPS=4"), {p}, dev));
}

TEST_CASE("a let or a double that cannot be evaluated names the let, the expression and the values", "[spec]") {
  KernelSpec s =
      parse(replace(replace(kSpec, "threads = \"32 * WARPS\"", "threads = \"32 * WARPS\"\nroot = \"sqrt(N - 600)\""),
                    kSpace, "constraints = [\"threads <= TILE * 4\", \"TILE <= N\", \"root < 100\"]"));
  DeviceTraits dev = DeviceTraits::for_arch(90);
  const Config c = s.default_config();
  std::string why = spec_error([&] { s.invalid_reason(c, {s.parse_problem("1024,512", Dtype::fp16)}, dev); });
  CHECK(has(why, "[space].constraints[2] \"root < 100\""));
  CHECK(has(why, "[lets] root: sqrt() of a negative number (-88) in \"sqrt(N - 600)\" with N=512"));
  CHECK_FALSE(s.invalid_reason(c, {s.parse_problem("1024,700", Dtype::fp16)}, dev));
}

TEST_CASE("a problem constraint that cannot be evaluated is a spec error, not a rejected problem", "[spec]") {
  KernelSpec s = parse(replace(kSpec, "\"M >= 1\"", "\"M / (N - 512) != 7\""));
  CHECK(s.parse_problem("1024,64", Dtype::fp16).at("N") == 64);
  std::string why = spec_error([&] { s.parse_problem("1024,512", Dtype::fp16); });
  CHECK(has(why, "[problem].constraints[0] \"M / (N - 512) != 7\" on M=1024,N=512,T=0 fp16"));
  CHECK(has(why, "division by zero"));
}

TEST_CASE("a let may not shadow a parameter, a dimension or a built-in", "[spec]") {
  for (const std::string name : {"TILE", "M", "T", "cc", "num_sms", "dtype_bytes", "is_bf16"}) {
    INFO(name);
    rejects(replace(kSpec, "threads = \"32 * WARPS\"", "threads = \"32 * WARPS\"\n" + name + " = \"1\""),
            "[lets]." + name + ": shadows a");
  }
  rejects(replace(kSpec, "name = \"WARPS\"", "name = \"cc\""), "cc is the name of a built-in");
  rejects(replace(kSpec, "dims = [\"M\", \"N\"]", "dims = [\"M\", \"N\", \"num_sms\"]"),
          "num_sms is the name of a built-in");
  rejects(replace(kSpec, "dims = [\"M\", \"N\"]", "dims = [\"M\", \"N\", \"M\"]"), "M is listed twice");
  rejects(replace(kSpec, "defaults = { T = 0 }", "defaults = { T = 0, TILE = 1 }"), "cannot share its name");
}

TEST_CASE("spec values are validated at load", "[spec]") {
  rejects(replace(kSpec, "dtypes = [\"fp16\", \"bf16\"]", "dtypes = []"), "'dtypes' must name at least one dtype");
  rejects(replace(kSpec, "dtypes = [\"fp16\", \"bf16\"]", "dtypes = [\"fp16\", \"fp16\"]"), "fp16 is listed twice");
  const std::string entry = "entry = \"toy\"\n";
  rejects(replace(kSpec, entry, entry + "min_cc = 90\nmax_cc = 80\n"), "max_cc 80 is below min_cc 90");
  rejects(replace(kSpec, entry, entry + "min_cc = 7\n"), "min_cc = 7 is not a compute capability");
  rejects(replace(kSpec, entry, entry + "min_cc = 100000000000\n"), "min_cc = 100000000000");
  rejects(replace(kSpec, entry, entry + "max_cc = -1\n"), "max_cc = -1");
  CHECK(parse(replace(kSpec, entry, entry + "min_cc = 80\nmax_cc = 0\n")).max_cc == 0);
  rejects(replace(kSpec, "max_registers = 128", "max_registers = -1"),
          "[gates].max_registers \"-1\": must be an integer >= 0, is -1");
  rejects(replace(kSpec, "max_registers = 128", "max_registers = \"2.5\""), "[gates].max_registers");
  rejects(replace(kSpec, "atol = 0.001", "atol = -0.001"), "[tolerance].atol");
  rejects(replace(kSpec, "atol = 0.001", "atol = nan"), "finite number");
  rejects(replace(kSpec, "atol = 0.001", "atol = -inf"), "finite number");
  rejects(replace(kSpec, "atol = 0.001", "max_bad_frac = 1.5"), "[tolerance].max_bad_frac");
  rejects(replace(kSpec, "max_abs = 0.5", "max_abs = -1"), "[tolerance.bf16].max_abs");
  rejects(replace(kSpec, "block = [\"threads\"]", "block = [\"0\"]"), "[launch].block[0]");
  rejects(replace(kSpec, "\"cdiv(M, TILE)\"]", "\"-1\"]"), "[launch].grid[1]");
  rejects(replace(kSpec, "smem = \"smem_bytes\"", "smem = \"-1\""), "[launch].smem");
  rejects(replace(kSpec, "smem = \"smem_bytes\"", "smem = \"smem_bytes\"\ncluster = [\"0\"]"), "[launch].cluster[0]");
  rejects(replace(kSpec, "block = [\"256\"]", "block = [\"1.5\"]"), "[reference].block[0]");
  const std::string y = "count = \"M*N\"\nrole = \"out\"";
  rejects(replace(kSpec, y, "count = \"0\"\nrole = \"out\""), "[[arg]] Y count \"0\": must be a positive integer");
  rejects(replace(kSpec, y, "count = -4\nrole = \"out\""), "[[arg]] Y count");
  rejects(replace(kSpec, "name = \"X\"\ntype = \"elem*\"", "name = \"X\"\ntype = \"elem*\"\nscale = -1.0"), "scale");
  // An input's scale may be an expression of the dims (0: all zeros), never of a parameter.
  rejects(replace(kSpec, "name = \"X\"\ntype = \"elem*\"", "name = \"X\"\ntype = \"elem*\"\nscale = \"1 - 2\""),
          "[[arg]] X scale \"1 - 2\"");
  rejects(replace(kSpec, "name = \"X\"\ntype = \"elem*\"", "name = \"X\"\ntype = \"elem*\"\nscale = \"TILE\""),
          "reads parameter TILE");
  // So may its offset, any finite number.
  const std::string x_arg = "name = \"X\"\ntype = \"elem*\"";
  rejects(replace(kSpec, x_arg, x_arg + "\noffset = \"1e308 * 1e308\""), "[[arg]] X offset \"1e308 * 1e308\"");
  rejects(replace(kSpec, x_arg, x_arg + "\noffset = \"TILE\""), "reads parameter TILE");
  // Evaluated per problem, before any config: a parameter there, even
  // through a let, cannot have a value.
  rejects(replace(kSpec, "max_abs = \"0.01 * sqrt(N)\"", "max_abs = \"0.01 * TILE\""), "reads parameter TILE");
  rejects(replace(kSpec, y, "count = \"M*TILE\"\nrole = \"out\""), "reads parameter TILE");
  rejects(replace(kSpec, "grid = [\"cdiv(M*N, 256)\"]", "grid = [\"cdiv(M*N, threads)\"]"), "reads parameter WARPS");
  rejects(replace(kSpec, "\"M >= 1\"", "\"M >= TILE\""), "reads parameter TILE");
  // Every expression, gates and tolerances included, names only what exists.
  rejects(replace(kSpec, "max_registers = 128", "max_registers = \"REGS\""), "unknown name 'REGS'");
  rejects(replace(kSpec, "atol = 0.001", "atol = \"TOL\""), "unknown name 'TOL'");
}

TEST_CASE("geometry, tolerances and gates that depend on the problem are checked where evaluated", "[spec]") {
  DeviceTraits dev = DeviceTraits::for_arch(90);
  const Config c = Config::parse("TILE=32,WARPS=1");
  KernelSpec s = parse(replace(kSpec, "\"cdiv(N, TILE)\", ", "\"cdiv(N, TILE) - 2\", "));
  CHECK(s.launch_dims(c, s.parse_problem("100,512", Dtype::fp16), dev).grid[0] == 14);
  std::string why = spec_error([&] { s.launch_dims(c, s.parse_problem("100,64", Dtype::fp16), dev); });
  CHECK(has(why, "[launch].grid[0] \"cdiv(N, TILE) - 2\" on M=100,N=64,T=0 fp16, config TILE=32,WARPS=1"));
  CHECK(has(why, "must be a positive integer, is 0 with N=64, TILE=32"));
  s = parse(replace(kSpec, "block = [\"threads\"]", "block = [\"threads / 3.0\"]"));
  why = spec_error([&] { s.launch_dims(c, s.parse_problem("100,64", Dtype::fp16), dev); });
  CHECK(has(why, "[launch].block[0]"));
  CHECK(has(why, "must be a positive integer, is 10.66"));
  s = parse(replace(kSpec, "max_abs = \"0.01 * sqrt(N)\"", "max_abs = \"0.01 * sqrt(N) - 0.2\""));
  CHECK(s.tolerances(s.parse_problem("100,1024", Dtype::fp16)).max_abs == Approx(0.12));
  why = spec_error([&] { s.tolerances(s.parse_problem("100,64", Dtype::fp16)); });
  CHECK(has(why, "[tolerance].max_abs"));
  CHECK(has(why, "must be a number >= 0"));
  s = parse(replace(kSpec, "max_registers = 128", "max_registers = \"N - 1000\""));
  why = spec_error([&] { s.gate_reason(Resources{}, c, s.parse_problem("100,512", Dtype::fp16), dev); });
  CHECK(has(why, "[gates].max_registers \"N - 1000\""));
  CHECK(has(why, "is -488"));
}

TEST_CASE("a spec's source must be a regular file", "[spec]") {
  evotune_test::TempDir t;
  std::ofstream(t.file("r.cu")) << "// ref";
  std::filesystem::create_directories(t.path / "sub");
  for (const char* source : {"sub", "", "."}) {
    INFO(source);
    std::ofstream(t.file("spec.toml")) << replace(kSpec, "source = \"k.cu\"",
                                                  "source = \"" + std::string(source) + "\"");
    std::string why = spec_error([&] { load_kernel(t.file("spec.toml")); });
    CHECK(has(why, "[kernel].source"));
    CHECK(has(why, "not a regular file"));
  }
}

TEST_CASE("[[baseline]]: a library by name with its keys, buffers must be the kernel's", "[spec]") {
  const std::string lt =
      "\n[[baseline]]\nname = \"cublaslt\"\nlibrary = \"cublaslt\"\na = \"X\"\nb = \"X\"\nc = \"Y\"\n"
      "m = \"N\"\nn = \"1\"\nk = \"N\"\ntop = 4\n";
  KernelSpec s = parse(std::string(kSpec) + lt);
  REQUIRE(s.baselines.size() == 1);
  CHECK(s.baselines[0].library == "cublaslt");
  CHECK(s.baselines[0].strings.at("c") == "Y");
  CHECK(s.baselines[0].values.at("m").text() == "N");
  CHECK(parse(kSpec).baselines.empty());
  // trans_b is cublaslt's one optional key (0 where left out: not in values).
  CHECK(s.baselines[0].values.count("trans_b") == 0);
  KernelSpec t = parse(std::string(kSpec) + replace(lt, "top = 4", "top = 4\ntrans_b = \"1\""));
  CHECK(t.baselines[0].values.at("trans_b").text() == "1");
  rejects(std::string(kSpec) + replace(lt, "library = \"cublaslt\"", "library = \"mkl\""),
          "unknown library 'mkl' (known: cublaslt, torch_sdpa)");
  rejects(std::string(kSpec) + replace(lt, "c = \"Y\"", "c = \"Z\""), "c = 'Z' is not a buffer [[arg]]");
  rejects(std::string(kSpec) + replace(lt, "top = 4\n", ""), "missing key 'top'");
  rejects(std::string(kSpec) + replace(lt, "top = 4", "top = 4\nbackend = \"cudnn\""), "takes no 'backend'");
  rejects(std::string(kSpec) + replace(lt, "name = \"cublaslt\"", "name = \"reference\""), "not 'reference'");
  rejects(std::string(kSpec) + lt + lt, "defined twice");
}
