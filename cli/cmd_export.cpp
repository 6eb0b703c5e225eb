#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <utility>
#include <vector>

#include "cli/app.hpp"
#include "core/error.hpp"
#include "export/export.hpp"
#include "store/store.hpp"

namespace evotune {

namespace fs = std::filesystem;

namespace {

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

// The formats `export --format` takes, in the order --help lists them.
const std::vector<std::pair<std::string, ExportFormat>> kFormats = {{"header", ExportFormat::header},
                                                                    {"json", ExportFormat::json},
                                                                    {"dataset", ExportFormat::dataset},
                                                                    {"launch", ExportFormat::launch}};

ExportFormat format_named(const std::string& name) {
  for (const auto& [n, f] : kFormats)
    if (n == name) return f;
  throw UsageError("unknown export format " + name);
}

RunInfo require_run(const Store& s, long long id, const std::string& db_path) {
  auto r = s.run(id);
  if (!r) throw UsageError("no run " + std::to_string(id) + " in " + db_path);
  return *r;
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
        ->check(CLI::IsMember(kFormats));
    cmd->callback([&ctx, run, out, format] {
      ctx.action = [&ctx, run, out, format] {
        long long id = parse_run_ref(*run, ctx.db_path);
        Store s = Store::open(ctx.db_path, Store::Mode::read_only);
        write_output(*out, export_run(s, require_run(s, id, ctx.db_path), format_named(*format)));
        return kExitOk;
      };
    });
  }
  {
    auto run = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand(
        "report",
        "Write a Markdown report of a run (top line vs the default, convergence, the parameters that mattered, "
        "failures by status) and, with -o, its plots as SVG beside it");
    cmd->add_option("run", *run, "run id, or 'last'")->required();
    cmd->add_option("-o,--output", *out,
                    "Markdown file to write, e.g. reports/summary.md; its plots go beside it as "
                    "summary-convergence.svg and summary-elites.svg (default: the Markdown alone to standard output)");
    cmd->footer("\nExample: evotune report last -o reports/summary.md");
    cmd->callback([&ctx, run, out] {
      ctx.action = [&ctx, run, out] {
        long long id = parse_run_ref(*run, ctx.db_path);
        Store s = Store::open(ctx.db_path, Store::Mode::read_only);
        const RunInfo r = require_run(s, id, ctx.db_path);
        if (out->empty() || *out == "-") {
          write_output(*out, report_markdown(s, r));
          return kExitOk;
        }
        const fs::path md(*out);
        if (md.has_parent_path()) fs::create_directories(md.parent_path());
        Report rep = make_report(s, r, md.stem().string());
        for (const auto& [name, text] : rep.plots) write_output((md.parent_path() / name).string(), text);
        write_output(*out, rep.markdown);
        return kExitOk;
      };
    });
  }
}

}  // namespace evotune
