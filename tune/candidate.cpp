#include "tune/candidate.hpp"

#include <algorithm>
#include <map>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compiler.hpp"

namespace evotune {

namespace {

using Defines = std::vector<std::pair<std::string, std::string>>;

// What one config needs compiled: its cubins and, per problem, which.
struct Compiled {
  std::vector<CompileResult> cubins;
  std::vector<int> problem_cubin;  // per problem (timed + check shapes)
  double compile_ms = 0;
  bool cache_hit = true;
};

std::string defines_key(const Defines& d) {
  std::string k;
  for (const auto& [a, b] : d) k += a + "=" + b + ";";
  return k;
}

// A trial's resources: the worst over its cubins.
Resources worst_resources(const Compiled& cc) {
  Resources out;
  for (const CompileResult& r : cc.cubins) {
    out.registers = std::max(out.registers, r.res.registers);
    out.smem_static = std::max(out.smem_static, r.res.smem_static);
    out.spill_stores = std::max(out.spill_stores, r.res.spill_stores);
    out.spill_loads = std::max(out.spill_loads, r.res.spill_loads);
    out.stack_frame = std::max(out.stack_frame, r.res.stack_frame);
    if (r.res.wgmma_serialized) out.wgmma_serialized = r.res.wgmma_serialized;
  }
  return out;
}

Compiled compile_config(const TunePlan& plan, CompileService& compiler, const Config& cfg,
                        const std::atomic<bool>& stop) {
  Compiled cc;
  std::map<std::string, int> by_key;
  for (const Problem& p : plan.all_problems) {
    if (stop.load()) return cc;
    // A define that cannot be evaluated is the spec's fault (SpecError): it
    // stops the run.
    Defines defs = plan.spec.compile_defines(cfg, p, plan.dev);
    auto [it, fresh] = by_key.emplace(defines_key(defs), static_cast<int>(cc.cubins.size()));
    if (fresh) {
      CompileResult res = compiler.compile(kernel_request(plan.spec, plan.arch, std::move(defs)));
      cc.compile_ms += res.cache_hit ? 0 : res.compile_ms;
      cc.cache_hit = cc.cache_hit && res.cache_hit;
      cc.cubins.push_back(std::move(res));
    }
    cc.problem_cubin.push_back(it->second);
  }
  return cc;
}

}  // namespace

CandidateBuilder::CandidateBuilder(const TunePlan& plan, CompileService& compiler, long long smem_optin)
    : plan_(plan), compiler_(compiler), smem_optin_(smem_optin) {}

Staged CandidateBuilder::stage(const Config& c, const std::atomic<bool>& stop) const {
  const Compiled cc = compile_config(plan_, compiler_, c, stop);
  Staged s;
  Trial& t = s.job.trial;
  t.config = c;
  t.compile_ms = cc.compile_ms;
  t.cache_hit = cc.cache_hit && !cc.cubins.empty();
  t.res = worst_resources(cc);
  auto gated = [&](TrialStatus status, std::string why) {
    t.status = status;
    t.error = std::move(why);
    s.finished = t;
    return s;
  };
  auto failed = std::find_if(cc.cubins.begin(), cc.cubins.end(), [](const CompileResult& r) { return !r.ok; });
  if (failed != cc.cubins.end()) return gated(TrialStatus::compile_error, failed->log);
  if (cc.problem_cubin.size() != plan_.all_problems.size())
    return gated(TrialStatus::compile_error, "compilation was cancelled");
  // Resource gate, per problem (dynamic shared memory can depend on it).
  // Geometry the spec cannot evaluate for this config is the spec's fault
  // (SpecError, exit 2), not the candidate's.
  const Planner planner(plan_.spec, plan_.dev);
  for (size_t i = 0; i < plan_.all_problems.size(); ++i) {
    const Problem& p = plan_.all_problems[i];
    s.job.request.launches.push_back(planner.launch(c, p, cc.problem_cubin[i]));
    Resources r = cc.cubins[static_cast<size_t>(cc.problem_cubin[i])].res;
    r.smem_dynamic = static_cast<int>(s.job.request.launches.back().dims.smem);
    t.res.smem_dynamic = std::max(t.res.smem_dynamic, r.smem_dynamic);
    if (auto why = plan_.spec.gate_reason(r, c, p, plan_.dev)) return gated(TrialStatus::resource_rejected, *why);
    if (smem_optin_ > 0 && r.smem_total() > smem_optin_)
      return gated(TrialStatus::resource_rejected,
                   strfmt("%d bytes of shared memory > %lld the device allows per block", r.smem_total(), smem_optin_));
  }
  // A compile-only run ends here; otherwise on to the GPU.
  if (plan_.backend == Backend::compile_only) {
    s.finished = t;
    return s;
  }
  for (const CompileResult& r : cc.cubins) s.job.request.cubins.push_back(r.cubin);
  return s;
}

ReferenceCubins compile_references(const TunePlan& plan, CompileService& compiler) {
  const KernelSpec& spec = plan.spec;
  ReferenceCubins out;
  std::map<std::string, int> by_key;
  for (const Problem& p : plan.all_problems) {
    Defines defs = spec.reference_defines(p, plan.dev);
    auto [it, fresh] = by_key.emplace(defines_key(defs), static_cast<int>(out.cubins.size()));
    if (fresh) {
      CompileRequest rr = kernel_request(spec, arch_for(plan.dev.cc, spec.arch_specific), std::move(defs));
      rr.source_name = spec.reference.source_name;
      rr.source = spec.reference.source_text;
      rr.entry = spec.reference.entry;
      CompileResult cr = compiler.compile(rr);
      if (!cr.ok) throw SpecError("the reference of kernel " + spec.name + " does not compile:\n" + cr.log);
      out.cubins.push_back(cr.cubin);
    }
    out.of_problem.push_back(it->second);
  }
  return out;
}

}  // namespace evotune
