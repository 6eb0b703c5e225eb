// export_run: a run's export in one format, read from the store.
#include "export/export.hpp"

#include "core/error.hpp"
#include "export/run_spec.hpp"
#include "store/dataset.hpp"

namespace evotune {

std::string export_run(const Store& s, const RunInfo& run, ExportFormat format) {
  const std::string id = std::to_string(run.id);
  if (format == ExportFormat::dataset) {
    std::vector<Trial> all = s.trials(run.id);
    if (all.empty()) throw UsageError("run " + id + " has no trials");
    return write_dataset(run, all, "run " + id + " of " + s.path() + ", " + run.created_at);
  }
  std::vector<Trial> elites = s.elites(run.id);
  if (elites.empty() || run.compile_only)
    throw UsageError("run " + id + " has no measured winner to export" +
                     (run.compile_only ? " (it was compile-only)" : ""));
  if (format == ExportFormat::launch) return export_launch(run, elites.front());
  KernelSpec spec = stored_run_spec(run);
  ExportInput in;
  in.run = &run;
  in.spec = &spec;
  in.winner = &elites.front();
  in.ok_trials = s.trials(run.id, TrialStatus::ok);
  if (run.default_trial_id) in.default_trial = s.trial(*run.default_trial_id);
  in.baselines = s.baselines(run.id);
  return format == ExportFormat::json ? export_json(in) : export_header(in);
}

}  // namespace evotune
