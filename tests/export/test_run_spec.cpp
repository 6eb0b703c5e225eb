// A run's spec (stored, or loaded again by its kernel reference) and
// export_run, which reads a run's winner, correct trials and default config
// from the store for every export format.
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "export/export.hpp"
#include "export/run_spec.hpp"
#include "kernel_templates/registry.hpp"
#include "store/store.hpp"
#include "tests/catch.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;

namespace {

using evotune_test::TempDir;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A run of a built-in as the tuner records it (what the writers read).
RunInfo builtin_run(const KernelSpec& spec, const std::string& shape) {
  RunInfo r;
  r.kernel = spec.name;
  r.spec_origin = "builtin";
  r.spec_hash = spec.content_hash();
  r.spec_text = spec.spec_text;
  r.problems = {spec.parse_problem(shape, Dtype::bf16)};
  r.dtype = "bf16";
  r.device.cc = 90;
  r.device.arch = "sm_90";
  r.created_at = "2026-11-21T10:00:00Z";
  return r;
}

// A database with one run of the built-in gemm, no trials yet.
struct GemmRun {
  TempDir dir;
  KernelSpec gemm = load_kernel("gemm");
  Store s = Store::open(dir.db());
  RunInfo r = builtin_run(gemm, "512,512,512");
  GemmRun() { r.id = s.create_run(r); }
};

Trial measured(const Config& c, double p50) {
  Trial t;
  t.config = c;
  t.status = TrialStatus::ok;
  Measurement m;
  m.p50_us = m.p90_us = m.min_us = m.mean_us = p50;
  m.samples = 10;
  t.per_problem = {m};
  t.fitness = p50;
  return t;
}

}  // namespace

TEST_CASE("kernel_ref names a built-in by name and a user's kernel by its spec path", "[export]") {
  RunInfo r;
  r.kernel = "gemm";
  r.spec_origin = "builtin";
  CHECK(r.kernel_ref() == "gemm");
  r.kernel = "my-kernel";
  r.spec_origin = "/home/me/kernels/spec.toml";
  CHECK(r.kernel_ref() == "/home/me/kernels/spec.toml");
}

TEST_CASE("a run's spec: as stored, and loaded again with its sources", "[export]") {
  KernelSpec gemm = load_kernel("gemm");
  RunInfo r = builtin_run(gemm, "512,512,512");
  KernelSpec stored = stored_run_spec(r);
  CHECK(stored.name == "gemm");
  CHECK(stored.params.size() == gemm.params.size());
  CHECK(stored.source_text.empty());  // the store keeps no sources
  KernelSpec loaded = load_run_spec(r);
  CHECK_FALSE(loaded.source_text.empty());
  CHECK(loaded.content_hash() == r.spec_hash);

  TempDir dir;
  std::ofstream(dir.file("spec.toml")) << gemm.spec_text;
  std::ofstream(dir.file("kernel.cu")) << "// a user's kernel\n";
  std::ofstream(dir.file("reference.cu")) << "// its reference\n";
  r.spec_origin = dir.file("spec.toml");
  CHECK(load_run_spec(r).source_text == "// a user's kernel\n");
  r.spec_origin = dir.file("gone.toml");
  CHECK_THROWS_AS(load_run_spec(r), UsageError);
}

TEST_CASE("export_run reads the winner, the correct trials and the default from the store", "[export]") {
  GemmRun db;
  const KernelSpec& gemm = db.gemm;
  Store& s = db.s;
  RunInfo& r = db.r;
  Trial def = measured(gemm.default_config(), 20);
  s.record_trial(r.id, def, {0});
  s.set_default_trial(r.id, def.id);
  Config faster = gemm.default_config();
  faster.values["STAGES"] += 1;
  Trial best = measured(faster, 10);
  s.record_trial(r.id, best, {0, def.id});
  Trial failed = measured(Config::parse("BLOCK_M=1"), 0);
  failed.status = TrialStatus::compile_error;
  s.record_trial(r.id, failed, {best.id, def.id});
  r = *s.run(r.id);

  std::string h = export_run(s, r, ExportFormat::header);
  CHECK(contains(h, "// Winner:    trial " + std::to_string(best.id) + " "));
  CHECK(contains(h, " 2 correct\n"));
  CHECK(contains(h, "2.00x over the default config (20.000 us)"));
  nlohmann::json j = nlohmann::json::parse(export_run(s, r, ExportFormat::json));
  CHECK(j["winner"]["trial_id"] == best.id);
  CHECK(j["default"]["trial_id"] == def.id);
  CHECK(j["run"]["ok_trials"] == 2);
  nlohmann::json d = nlohmann::json::parse(export_run(s, r, ExportFormat::dataset));
  CHECK(d["trials"].size() == 3);
  CHECK(d["source"] == "run " + std::to_string(r.id) + " of " + db.dir.db() + ", " + r.created_at);

  std::string report = report_markdown(s, r);
  CHECK(contains(report, "# evotune report: run " + std::to_string(r.id) + ", gemm"));
  CHECK(contains(report, "| trials | 3 (compile_error 1, ok 2) |"));
  CHECK(contains(report, "| elite #1 | " + std::to_string(best.seq) + " |"));
  CHECK(contains(report, "## Failed trials by status"));
  // With a plot stem: the same Markdown linking its two plots; the elites'
  // plot carries the default config and the winner's speedup over it.
  Report rep = make_report(s, r, "summary");
  CHECK(rep.markdown.substr(0, report.size() / 2) == report.substr(0, report.size() / 2));
  REQUIRE(rep.plots.size() == 2);
  CHECK(rep.plots[0].first == "summary-convergence.svg");
  CHECK(rep.plots[1].first == "summary-elites.svg");
  CHECK(contains(rep.markdown, "(summary-convergence.svg)"));
  CHECK(contains(rep.plots[1].second, ">default config<"));
  CHECK(contains(rep.plots[1].second, "10.00 µs · 2.00x<"));
  CHECK(contains(report, "| compile_error | 1 | " + std::to_string(failed.seq) + " |"));

  r.compile_only = true;
  try {
    export_run(s, r, ExportFormat::header);
    FAIL("a compile-only run has no measured winner to export");
  } catch (const UsageError& e) {
    CHECK(contains(e.what(), "(it was compile-only)"));
  }
}

TEST_CASE("export_run refuses a run with nothing to export", "[export]") {
  GemmRun db;
  CHECK_THROWS_AS(export_run(db.s, db.r, ExportFormat::dataset), UsageError);
  CHECK_THROWS_AS(export_run(db.s, db.r, ExportFormat::header), UsageError);
  CHECK_THROWS_AS(export_run(db.s, db.r, ExportFormat::launch), UsageError);
}
