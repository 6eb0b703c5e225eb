#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/app.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/device_info.hpp"
#include "kernel_templates/registry.hpp"
#include "search/space.hpp"

namespace evotune {

namespace {

struct KernelSummary {
  std::string name, description, dims, dtypes, runs_here;
  long long valid = -1;
  double total = 0;
};

// The device the listing is about: the first GPU, else sm_90 as a stand-in.
DeviceTraits listing_traits(std::optional<DeviceInfo>& gpu) {
  DeviceQuery q = query_devices();
  if (!q.devices.empty()) {
    gpu = q.devices[0];
    DeviceTraits d;
    d.cc = gpu->cc;
    d.num_sms = gpu->num_sms;
    return d;
  }
  return DeviceTraits::for_arch(90);
}

std::string runs_on(const KernelSpec& s, const std::optional<DeviceInfo>& gpu) {
  if (!gpu) return "no GPU here";
  bool ok = gpu->cc >= s.min_cc && (s.max_cc == 0 || gpu->cc <= s.max_cc);
  return ok ? "yes" : strfmt("no (needs cc %d%s)", s.min_cc, s.max_cc ? strfmt("..%d", s.max_cc).c_str() : "+");
}

KernelSummary summarize(const KernelSpec& s, const DeviceTraits& dev, const std::optional<DeviceInfo>& gpu) {
  KernelSummary k;
  k.name = s.name;
  k.description = s.description;
  k.dims = join(s.dims, ",");
  std::vector<std::string> dts;
  for (Dtype d : s.dtypes) dts.push_back(to_string(d));
  k.dtypes = join(dts, ",");
  k.runs_here = runs_on(s, gpu);
  k.total = s.space_size();
  if (!s.example.empty()) {
    SearchSpace space(s, {s.parse_problem(s.example, s.dtypes.front())}, dev);
    if (const auto* all = space.enumerate_valid()) k.valid = static_cast<long long>(all->size());
  }
  return k;
}

// The fastest template of a family (names starting with `family`) that runs
// on this GPU: the one needing the newest architecture (arch-specific
// templates such as sdpa_fwd_sm90 are written for the tensor cores they
// need). Empty without a GPU or when none runs.
std::string fastest_here(const std::string& family, const std::optional<DeviceInfo>& gpu) {
  std::string best;
  int best_cc = -1;
  for (const auto& n : builtin_kernel_names()) {
    if (!starts_with(n, family)) continue;
    KernelSpec s = load_kernel(n);
    if (runs_on(s, gpu) == "yes" && s.min_cc > best_cc) {
      best = n;
      best_cc = s.min_cc;
    }
  }
  return best;
}

std::string expr_list(const std::vector<Expr>& es) {
  std::vector<std::string> t;
  for (const auto& e : es) t.push_back(e.text());
  return join(t, "\n    ");
}

// " name=expr" for each expression that is set, on one line.
void print_set_exprs(std::ostream& out, std::initializer_list<std::pair<const char*, const Expr*>> named) {
  for (const auto& [n, e] : named)
    if (!e->empty()) out << " " << n << "=" << e->text();
}

// The spec's identity, problem and where it runs.
void describe_header(const KernelSpec& s, const KernelSummary& k, const DeviceTraits& dev, std::ostream& out) {
  out << s.name << ": " << s.description << "\n";
  out << "  source       " << s.source_name << " (entry " << s.entry << "), reference " << s.reference.source_name
      << " (entry " << s.reference.entry << ")\n";
  out << "  origin       " << s.origin << "\n";
  if (!s.headers.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, text] : s.headers) names.push_back(name);
    out << "  headers      " << join(names, ", ") << "\n";
  }
  out << "  dims         " << k.dims;
  for (const auto& [n, v] : s.dim_defaults) out << ", " << n << " (default " << v << ")";
  out << "\n  dtypes       " << k.dtypes << "\n";
  out << "  GPUs         compute capability " << s.min_cc << (s.max_cc ? strfmt("..%d", s.max_cc) : "+")
      << (s.arch_specific ? " (arch-specific sm_XXa)" : "") << "; runs here: " << k.runs_here << "\n";
  if (!s.example.empty())
    out << "  space        " << strfmt("%.0f", k.total) << " configs, "
        << (k.valid >= 0 ? std::to_string(k.valid) : "?") << " valid for " << s.example << " on sm_" << dev.cc << "\n";
  if (!s.problem_constraints.empty()) out << "  accepts      " << expr_list(s.problem_constraints) << "\n";
  if (!s.check_shapes.empty()) out << "  check shapes " << join(s.check_shapes, "; ") << "\n";
}

// The tunables, their constraints and the derived values.
void describe_space(const KernelSpec& s, std::ostream& out) {
  out << "\nparameters:\n";
  Table t({"name", "values", "default", "help"});
  for (const auto& p : s.params) {
    std::vector<std::string> vals;
    for (auto v : p.values) vals.push_back(std::to_string(v));
    t.add({p.name, join(vals, ","), std::to_string(p.default_value), p.help});
  }
  t.print(out);
  if (!s.constraints.empty()) out << "\nconstraints:\n    " << expr_list(s.constraints) << "\n";
  if (!s.lets.empty()) {
    out << "\nderived values:\n";
    for (const auto& [n, e] : s.lets) out << "    " << n << " = " << e.text() << "\n";
  }
}

// The launch geometry and the kernel's arguments.
void describe_launch(const KernelSpec& s, std::ostream& out) {
  auto dims = [&](const std::array<Expr, 3>& d) {
    for (int i = 0; i < 3; ++i) out << (i ? ", " : "") << (d[i].empty() ? "1" : d[i].text());
  };
  out << "\nlaunch: grid (";
  dims(s.launch.grid);
  out << "), block (";
  dims(s.launch.block);
  out << "), dynamic smem " << (s.launch.smem.empty() ? "0" : s.launch.smem.text()) << "\n";
  out << "\narguments:\n";
  for (const auto& a : s.args) {
    if (a.is_tmap)
      out << "    " << a.name << ": TMA tensor map over " << a.tmap.tensor << "\n";
    else if (a.is_buffer)
      out << "    " << a.name << ": " << to_string(a.elem) << "* [" << a.count.text() << "] " << to_string(a.role)
          << (a.role == ArgRole::in ? ", init " + to_string(a.init) : "") << "\n";
    else
      out << "    " << a.name << ": " << to_string(a.scalar) << " = " << a.value.text() << "\n";
  }
}

// What a trial must pass: the tolerances per dtype and the resource gates.
void describe_gates(const KernelSpec& s, std::ostream& out) {
  out << "\ntolerances:\n";
  for (const auto& [dt, tol] : s.tolerance) {
    out << "    " << (dt.empty() ? "default" : dt) << ":";
    print_set_exprs(out, {{"max_abs", &tol.max_abs},
                          {"mean_abs", &tol.mean_abs},
                          {"atol", &tol.atol},
                          {"rtol", &tol.rtol},
                          {"max_bad_frac", &tol.max_bad_frac}});
    out << "\n";
  }
  out << "\nresource gates:";
  print_set_exprs(out, {{"max_registers", &s.gates.max_registers},
                        {"max_smem", &s.gates.max_smem},
                        {"max_spill_bytes", &s.gates.max_spill_bytes},
                        {"max_stack", &s.gates.max_stack}});
  if (!s.gates.allow_serialized_wgmma) out << " allow_serialized_wgmma=false";
  out << "\n";
}

void describe(const KernelSpec& s, const DeviceTraits& dev, const std::optional<DeviceInfo>& gpu, std::ostream& out) {
  describe_header(s, summarize(s, dev, gpu), dev, out);
  describe_space(s, out);
  describe_launch(s, out);
  describe_gates(s, out);
}

nlohmann::json describe_json(const KernelSpec& s, const DeviceTraits& dev, const std::optional<DeviceInfo>& gpu) {
  KernelSummary k = summarize(s, dev, gpu);
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : s.params)
    params.push_back({{"name", p.name}, {"values", p.values}, {"default", p.default_value}, {"help", p.help}});
  std::vector<std::string> cons;
  for (const auto& c : s.constraints) cons.push_back(c.text());
  return {{"name", s.name},      {"description", s.description},  {"dims", s.dims},           {"dtypes", k.dtypes},
          {"min_cc", s.min_cc},  {"runs_here", k.runs_here},      {"valid_configs", k.valid}, {"params", params},
          {"constraints", cons}, {"check_shapes", s.check_shapes}};
}

// Every built-in: a table (with which template of each family is fastest
// here), or a JSON array.
void list_kernels(const DeviceTraits& dev, const std::optional<DeviceInfo>& gpu, bool json) {
  std::vector<KernelSummary> all;
  for (const auto& n : builtin_kernel_names()) all.push_back(summarize(load_kernel(n), dev, gpu));
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& k : all)
      j.push_back({{"name", k.name},
                   {"description", k.description},
                   {"dims", k.dims},
                   {"dtypes", k.dtypes},
                   {"valid_configs", k.valid},
                   {"runs_here", k.runs_here}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  Table t({"kernel", "dims", "dtypes", "valid configs", gpu ? "runs on " + gpu->name : "runs here", "description"});
  for (const auto& k : all)
    t.add({k.name, k.dims, k.dtypes, k.valid >= 0 ? std::to_string(k.valid) : "?", k.runs_here, k.description});
  t.print(std::cout);
  if (gpu) {
    const std::string attn = fastest_here("sdpa_fwd", gpu), fp8 = fastest_here("sdpa_fp8", gpu),
                      gemm = fastest_here("gemm", gpu);
    if (!attn.empty() || !gemm.empty())
      std::cout << "\nfastest on " << gpu->name << ": attention " << (attn.empty() ? "none" : attn)
                << ", FP8 attention " << (fp8.empty() ? "none" : fp8) << ", GEMM " << (gemm.empty() ? "none" : gemm)
                << "\n";
  } else {
    std::cout << "\nattention: sdpa_fwd_sm90 on Hopper (sm_90), sdpa_fwd elsewhere; FP8 attention: sdpa_fp8_sm90 on "
                 "Hopper, sdpa_fp8 on sm_89 (Ada); GEMM: gemm_sm90 on Hopper, gemm elsewhere\n";
  }
  std::cout << "\n`evotune kernels NAME` describes one; a spec file path works wherever a kernel is named.\n";
}

}  // namespace

void add_kernels_command(CLI::App& app, Context& ctx) {
  auto name = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("kernels", "List the built-in kernels, or describe one (a name or a spec file)");
  cmd->add_option("name", *name, "kernel to describe: a built-in name or a spec file path");
  cmd->add_flag("--json", ctx.json, "machine-readable output");
  cmd->callback([&ctx, name] {
    ctx.action = [&ctx, name] {
      std::optional<DeviceInfo> gpu;
      DeviceTraits dev = listing_traits(gpu);
      if (name->empty()) {
        list_kernels(dev, gpu, ctx.json);
      } else {
        KernelSpec s = load_kernel(*name);
        if (ctx.json)
          std::cout << describe_json(s, dev, gpu).dump(2) << "\n";
        else
          describe(s, dev, gpu, std::cout);
      }
      return kExitOk;
    };
  });
}

}  // namespace evotune
