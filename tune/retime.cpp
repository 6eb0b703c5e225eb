#include <algorithm>
#include <limits>
#include <map>

#include "core/stats.hpp"
#include "tune/elites.hpp"
#include "tune/search.hpp"

namespace evotune {

namespace {

// Per elite, the geomean over problems of the median re-timed p50; an elite
// that failed every re-timing has none.
std::vector<std::pair<int64_t, double>> final_times(const TunePlan& plan, const std::vector<Trial>& elites,
                                                    const std::map<int64_t, std::vector<std::vector<double>>>& p50s) {
  std::vector<std::pair<int64_t, double>> finals;
  for (const Trial& e : elites) {
    auto it = p50s.find(e.id);
    if (it == p50s.end()) continue;
    std::vector<double> med;
    for (size_t p = 0; p < plan.problems.size(); ++p) {
      std::vector<double> v = it->second[p];
      // The search's own measurement is one sample more, unless the
      // re-timing ran sustained: the search timed at other clocks.
      if (plan.options.retime_ms <= 0) v.push_back(e.per_problem[p].p50_us);
      med.push_back(median(v));
    }
    finals.emplace_back(e.id, geomean(med));
  }
  return finals;
}

}  // namespace

void retime_elites(const TunePlan& plan, GpuPool& gpu, RunRecorder& recorder, Store& store, Progress& progress) {
  const TuneOptions& o = plan.options;
  std::vector<Trial> elites = recorder.population().elites();
  if (o.retime_rounds <= 0 || elites.size() < 2) return;
  std::vector<EvalRequest> requests;
  for (const Trial& e : elites) {
    Staged s = gpu.stage_now(e.config);
    if (s.finished) return;  // an elite must pass the gates again
    requests.push_back(std::move(s.job.request));
  }
  progress.retime_started(elites.size(), o);
  const Limits limits = limits_for(plan, recorder.population().best());
  const double sustained_s = 3e-3 * o.retime_ms * static_cast<double>(plan.problems.size());
  std::vector<RetimeSample> samples;
  std::map<int64_t, std::vector<std::vector<double>>> p50s;  // trial → problem → rounds
  for (int round = 1; round <= o.retime_rounds; ++round) {
    for (size_t i = 0; i < elites.size(); ++i) {
      EvalRequest& req = requests[i];
      req.abort_us.assign(plan.all_problems.size(), 0.0);
      if (o.retime_ms > 0) req.sustained = {o.retime_ms, o.retime_ms, std::max(o.timing.max_samples, 2000)};
      EvalReply rep = gpu.remeasure(req, limits.timeout_s + sustained_s);
      if (rep.status != TrialStatus::ok) continue;  // a flaky elite keeps its search-time result
      auto& v = p50s[elites[i].id];
      v.resize(plan.problems.size());
      for (size_t p = 0; p < plan.problems.size() && p < rep.per_problem.size(); ++p) {
        v[p].push_back(rep.per_problem[p].p50_us);
        samples.push_back({round, elites[i].id, static_cast<int>(p), rep.per_problem[p].p50_us});
      }
    }
    progress.retime_round(round, o.retime_rounds);
  }
  const std::vector<std::pair<int64_t, double>> finals = final_times(plan, elites, p50s);
  // An elite that failed every re-timing keeps its search-time result; after
  // a sustained re-timing that result (boost clocks) is not comparable, so it
  // ranks after every re-timed one.
  auto final_of = [&](const Trial& t) {
    for (const auto& [id, us] : finals)
      if (id == t.id) return us;
    return o.retime_ms > 0 ? std::numeric_limits<double>::infinity() : t.fitness;
  };
  std::stable_sort(elites.begin(), elites.end(),
                   [&](const Trial& a, const Trial& b) { return final_of(a) < final_of(b); });
  std::vector<int64_t> order;
  for (const Trial& e : elites) order.push_back(e.id);
  store.record_retime(recorder.run().id, samples, finals, order);
}

}  // namespace evotune
