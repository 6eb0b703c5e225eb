#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>
#include "cli/app.hpp"
#include "cli/table.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compiler.hpp"
#include "engine/device_info.hpp"
#include "engine/plan.hpp"
#include "kernel_templates/registry.hpp"
#include "store/dataset.hpp"
#include "store/export.hpp"
#include "store/store.hpp"

namespace evotune {

namespace {

// The spec exactly as the run used it (stored in the database); sources are
// not needed to export or report.
KernelSpec stored_spec(const RunInfo& r) {
  return parse_spec(r.spec_text, r.spec_origin, [](const std::string&) { return std::string(); });
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) throw UsageError("cannot write " + path);
  f << text;
  if (!f) throw UsageError("writing " + path + " failed");
  std::cerr << "wrote " << path << "\n";
}

std::string report_markdown(const Store& s, const RunInfo& r) {
  KernelSpec spec = stored_spec(r);
  std::vector<Trial> trials = s.trials(r.id);
  std::vector<Trial> elites = s.elites(r.id);
  std::optional<Trial> def = r.default_trial_id ? s.trial(*r.default_trial_id) : std::nullopt;
  std::ostringstream md;
  md << "# evotune report: run " << r.id << ", " << r.kernel << "\n\n";
  md << "| | |\n|---|---|\n";
  md << "| device | "
     << (r.compile_only ? r.device.arch + " (compile only)"
                        : r.device.name + " (" + r.device.arch + ", " + std::to_string(r.device.num_sms) + " SMs)")
     << " |\n";
  md << "| software | CUDA driver " << cuda_version_string(r.device.driver_version) << ", runtime "
     << cuda_version_string(r.device.runtime_version) << ", NVRTC " << r.device.nvrtc_version << ", evotune "
     << r.evotune_version << " |\n";
  std::vector<std::string> probs;
  for (const auto& p : r.problems) probs.push_back(p.canonical());
  md << "| problems | " << join(probs, "; ") << " (" << r.dtype << ") |\n";
  md << "| search | " << r.strategy << ", seed " << r.seed << ", budget " << r.budget << ", elites " << r.elites_k
     << " |\n";
  std::map<std::string, int> counts;
  for (const auto& t : trials) ++counts[to_string(t.status)];
  std::vector<std::string> parts;
  for (const auto& [k, v] : counts) parts.push_back(k + " " + std::to_string(v));
  md << "| trials | " << trials.size() << " (" << join(parts, ", ") << ") |\n";
  md << "| time | "
     << strfmt(
            "%.1f s wall; compile %.1f s over %d threads (%d cache hits); verify %.1f s; bench %.1f s; GPU waiting on "
            "compiles %.1f s",
            r.stats.wall_s, r.stats.compile_busy_s, r.stats.compile_threads, r.stats.cache_hits, r.stats.verify_s,
            r.stats.bench_s, r.stats.gpu_idle_s)
     << " |\n";
  md << "| started | " << r.created_at << ", status " << r.status << " |\n\n";

  md << "## Top line\n\n";
  md << "| variant | trial |";
  for (size_t i = 0; i < r.problems.size(); ++i)
    md << " p50 µs" << (r.problems.size() > 1 ? " [" + std::to_string(i) + "]" : "") << " |";
  md << " TFLOP/s | vs default | max abs err | mean abs err | regs | smem | config |\n|---|---|";
  for (size_t i = 0; i < r.problems.size(); ++i) md << "---|";
  md << "---|---|---|---|---|---|---|\n";
  auto row = [&](const std::string& name, const Trial& t) {
    md << "| " << name << " | " << t.seq << " |";
    for (size_t i = 0; i < r.problems.size(); ++i)
      md << " " << (i < t.per_problem.size() ? fmt_us(t.per_problem[i].p50_us) : "-") << " |";
    std::vector<double> tf;
    for (size_t i = 0; i < r.problems.size() && i < t.per_problem.size(); ++i) {
      double fl = spec.flops_of(r.problems[i]);
      if (fl > 0 && t.per_problem[i].p50_us > 0) tf.push_back(fl / (t.per_problem[i].p50_us * 1e-6) / 1e12);
    }
    double sp = 0;
    if (def && def->ok()) {
      std::vector<double> rs;
      for (size_t i = 0; i < t.per_problem.size() && i < def->per_problem.size(); ++i)
        rs.push_back(def->per_problem[i].p50_us / t.per_problem[i].p50_us);
      sp = geomean(rs);
    }
    double mx = 0, mean = 0;
    for (const auto& m : t.per_problem) mx = std::max(mx, m.err.max_abs), mean = std::max(mean, m.err.mean_abs);
    md << " " << (tf.empty() ? "-" : strfmt("%.1f", geomean(tf))) << " | " << fmt_ratio(sp) << " | " << fmt_sci(mx)
       << " | " << fmt_sci(mean) << " | " << t.res.registers << " | " << fmt_kib(t.res.smem_total()) << " | `"
       << t.config.canonical() << "` |\n";
  };
  if (def && def->ok()) row("default config", *def);
  int rank = 0;
  for (const auto& e : elites) row("elite #" + std::to_string(++rank), e);
  if (elites.empty()) md << "\nNo trial passed every gate.\n";

  md << "\n## Convergence\n\nBest p50 (geometric mean over problems) after N trials:\n\n| trials | best µs "
        "|\n|---|---|\n";
  double best = 0;
  size_t next = 1;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].ok() && (best == 0 || trials[i].fitness < best)) best = trials[i].fitness;
    if (i + 1 == next || i + 1 == trials.size()) {
      md << "| " << i + 1 << " | " << fmt_us(best) << " |\n";
      while (next <= i + 1) next *= 2;
    }
  }

  std::vector<const Trial*> failed;
  for (const auto& t : trials)
    if (!t.ok()) failed.push_back(&t);
  if (!failed.empty()) {
    md << "\n## Failed trials\n\n| trial | status | error | config |\n|---|---|---|---|\n";
    for (const Trial* t : failed) {
      std::string e = t->error;
      for (char& c : e)
        if (c == '\n' || c == '|') c = ' ';
      if (e.size() > 160) e = e.substr(0, 157) + "...";
      md << "| " << t->seq << " | " << to_string(t->status) << " | " << e << " | `" << t->config.canonical() << "` |\n";
    }
  }
  return md.str();
}

std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

// The winner compiled for the run's architecture, with everything a launcher
// outside evotune needs per problem: geometry and each argument's plan.
std::string export_launch(const RunInfo& r, const Trial& winner) {
  KernelSpec spec = load_kernel(r.spec_origin == "builtin" ? r.kernel : r.spec_origin);
  if (spec.content_hash() != r.spec_hash)
    throw UsageError("kernel " + r.kernel + " changed since run " + std::to_string(r.id) +
                     "; a launch export needs the kernel as it was tuned");
  DeviceTraits dev;
  dev.cc = r.device.cc;
  dev.num_sms = r.device.num_sms > 0 ? r.device.num_sms : DeviceTraits::for_arch(dev.cc).num_sms;
  Planner planner(spec, dev);
  nlohmann::json j = {{"format", "evotune-launch"},
                      {"version", 1},
                      {"kernel", r.kernel},
                      {"entry", spec.entry},
                      {"run", r.id},
                      {"trial", winner.id},
                      {"config", winner.config},
                      {"dtype", r.dtype},
                      {"arch", r.device.arch},
                      {"device", r.device.name},
                      {"fitness_us", winner.fitness}};
  std::map<std::string, int> cubin_of;
  nlohmann::json cubins = nlohmann::json::array(), problems = nlohmann::json::array();
  for (const Problem& p : r.problems) {
    auto defines = spec.compile_defines(winner.config, p, dev);
    std::string key;
    for (const auto& [k, v] : defines) key += k + "=" + v + ";";
    if (!cubin_of.count(key)) {
      CompileRequest req;
      req.source_name = spec.source_name;
      req.source = spec.source_text;
      req.entry = spec.entry;
      req.arch = r.device.arch;
      req.options = spec.options;
      req.include_dirs = spec.include_dirs;
      req.headers = spec.headers;
      req.defines = defines;
      CompileResult c = compile(req);
      if (!c.ok) throw EngineError("the winner no longer compiles:\n" + c.log);
      cubin_of[key] = static_cast<int>(cubins.size());
      cubins.push_back(base64(c.cubin));
    }
    LaunchPlan l = planner.launch(winner.config, p, cubin_of[key]);
    Scope scope(spec, &p, &winner.config, dev);
    nlohmann::json args = nlohmann::json::array();
    for (size_t i = 0; i < spec.args.size(); ++i) {
      const ArgSpec& a = spec.args[i];
      const ArgPlan& ap = l.args[i];
      nlohmann::json x = {{"name", a.name}};
      if (ap.kind == ArgPlan::Kind::tmap) {
        x.update({{"kind", "tmap"},
                  {"tensor", ap.tmap.buffer},
                  {"elem", to_string(ap.tmap.elem)},
                  {"dims", ap.tmap.dims},
                  {"strides_bytes", ap.tmap.strides_bytes},
                  {"box", ap.tmap.box},
                  {"swizzle", ap.tmap.swizzle},
                  {"l2_promotion", ap.tmap.l2_promotion},
                  {"oob_nan", ap.tmap.oob_nan},
                  {"enabled", ap.tmap.enabled}});
      } else if (ap.kind == ArgPlan::Kind::scalar) {
        x.update({{"kind", "scalar"}, {"type", to_string(ap.type)}});
        if (ap.type == ScalarType::f32)
          x["value"] = ap.f;
        else
          x["value"] = ap.i;
      } else {
        x.update({{"kind", ap.kind == ArgPlan::Kind::scratch ? "scratch" : "buffer"},
                  {"elem", to_string(resolve_elem(a.elem, p.dtype))},
                  {"count", scope.eval(a.count).as_int()},
                  {"role", to_string(a.role)},
                  {"init", to_string(a.init)},
                  {"scale", a.init_scale}});
      }
      args.push_back(x);
    }
    nlohmann::json dims = nlohmann::json::object();
    for (const auto& [k, v] : p.dims) dims[k] = v;
    problems.push_back({{"problem", p.canonical()},
                        {"dims", dims},
                        {"cubin", l.cubin},
                        {"grid", l.dims.grid},
                        {"block", l.dims.block},
                        {"cluster", l.dims.cluster},
                        {"smem", l.dims.smem},
                        {"args", args}});
  }
  j["cubins"] = cubins;
  j["problems"] = problems;
  return j.dump(1) + "\n";
}

}  // namespace

void add_export_commands(CLI::App& app, Context& ctx) {
  {
    auto run = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("header");
    auto* cmd = app.add_subcommand("export", "Write a run's winner as a header to compile into your program (or JSON)");
    cmd->footer(
        "\nThe header #defines the winning parameters (the names the template reads), so\n"
        "  #include \"best.h\"\n  #include \"kernel_templates/sdpa_fwd/kernel.cu\"\n"
        "compiles the tuned kernel; it also holds them as constexpr values, launch-geometry\n"
        "helpers and provenance (GPU, versions, latency and errors per problem).");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("-o,--output", *out, "file to write (default: standard output)");
    cmd->add_option("-f,--format", *format,
                    "header; json; dataset (every trial, for `run --replay`); launch (the winner's cubin with its "
                    "launch geometry and arguments per problem, for launchers outside evotune)")
        ->check(CLI::IsMember({"header", "json", "dataset", "launch"}));
    cmd->callback([&ctx, run, out, format] {
      ctx.action = [&ctx, run, out, format] {
        long long id = parse_run_ref(*run, ctx.db_path);
        Store s = Store::open(ctx.db_path, Store::Mode::read_only);
        auto r = s.run(id);
        if (!r) throw UsageError("no run " + std::to_string(id) + " in " + ctx.db_path);
        if (*format == "dataset") {
          std::vector<Trial> all = s.trials(id);
          if (all.empty()) throw UsageError("run " + std::to_string(id) + " has no trials");
          write_output(
              *out, write_dataset(*r, all, "run " + std::to_string(id) + " of " + ctx.db_path + ", " + r->created_at));
          return kExitOk;
        }
        std::vector<Trial> ok = s.trials(id, TrialStatus::ok);
        std::vector<Trial> elites = s.elites(id);
        if (elites.empty() || r->compile_only)
          throw UsageError("run " + std::to_string(id) + " has no measured winner to export" +
                           (r->compile_only ? " (it was compile-only)" : ""));
        if (*format == "launch") {
          write_output(*out, export_launch(*r, elites.front()));
          return kExitOk;
        }
        KernelSpec spec = stored_spec(*r);
        ExportInput in;
        in.run = &*r;
        in.spec = &spec;
        in.winner = &elites.front();
        in.ok_trials = ok;
        if (r->default_trial_id) in.default_trial = s.trial(*r->default_trial_id);
        write_output(*out, *format == "json" ? export_json(in) : export_header(in));
        return kExitOk;
      };
    });
  }
  {
    auto run = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("report",
                                   "Write a Markdown report of a run: top line vs the default, convergence, failures");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("-o,--output", *out, "file to write (default: standard output)");
    cmd->callback([&ctx, run, out] {
      ctx.action = [&ctx, run, out] {
        long long id = parse_run_ref(*run, ctx.db_path);
        Store s = Store::open(ctx.db_path, Store::Mode::read_only);
        auto r = s.run(id);
        if (!r) throw UsageError("no run " + std::to_string(id) + " in " + ctx.db_path);
        write_output(*out, report_markdown(s, *r));
        return kExitOk;
      };
    });
  }
}

}  // namespace evotune
