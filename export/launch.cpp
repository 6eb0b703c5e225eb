// export_launch: the winner's cubins with, per problem, the launch geometry
// and every argument's plan, for launchers outside evotune. The cubins are
// compiled here again from the kernel's sources: the store keeps none.
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "engine/compiler.hpp"
#include "engine/plan.hpp"
#include "export/export.hpp"
#include "export/run_spec.hpp"

namespace evotune {

namespace {

using nlohmann::json;

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

// One argument of the kernel on one problem, as the planner laid it out.
json arg_json(const ArgSpec& a, const ArgPlan& ap, const Problem& p, const Scope& scope) {
  json x = {{"name", a.name}};
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
              {"scale", scope.eval(a.init_scale).as_double()},
              {"offset", scope.eval(a.init_offset).as_double()}});
  }
  return x;
}

// The winner's cubins, base64, compiled once per distinct set of defines.
class WinnerCubins {
 public:
  WinnerCubins(const KernelSpec& spec, std::string arch) : spec_(spec), arch_(std::move(arch)) {}

  // The index of the cubin for these defines, compiled on first sight.
  int index_of(const std::vector<std::pair<std::string, std::string>>& defines) {
    auto [it, fresh] = by_defines_.emplace(defines, static_cast<int>(cubins_.size()));
    if (fresh) {
      CompileResult c = compile(kernel_request(spec_, arch_, defines));
      if (!c.ok) throw EngineError("the winner no longer compiles:\n" + c.log);
      cubins_.push_back(base64(c.cubin));
    }
    return it->second;
  }
  const json& cubins() const { return cubins_; }

 private:
  const KernelSpec& spec_;
  std::string arch_;
  std::map<std::vector<std::pair<std::string, std::string>>, int> by_defines_;
  json cubins_ = json::array();
};

}  // namespace

std::string export_launch(const RunInfo& r, const Trial& winner) {
  KernelSpec spec = load_run_spec(r);
  if (spec.content_hash() != r.spec_hash)
    throw UsageError("kernel " + r.kernel + " changed since run " + std::to_string(r.id) +
                     "; a launch export needs the kernel as it was tuned");
  DeviceTraits dev;
  dev.cc = r.device.cc;
  dev.num_sms = r.device.num_sms > 0 ? r.device.num_sms : DeviceTraits::for_arch(dev.cc).num_sms;
  Planner planner(spec, dev);
  json j = {{"format", "evotune-launch"},
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
  WinnerCubins cubins(spec, r.device.arch);
  json problems = json::array();
  for (const Problem& p : r.problems) {
    LaunchPlan l = planner.launch(winner.config, p, cubins.index_of(spec.compile_defines(winner.config, p, dev)));
    Scope scope(spec, &p, &winner.config, dev);
    json args = json::array();
    for (size_t a = 0; a < spec.args.size(); ++a) args.push_back(arg_json(spec.args[a], l.args[a], p, scope));
    json dims = json::object();
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
  j["cubins"] = cubins.cubins();
  j["problems"] = problems;
  return j.dump(1) + "\n";
}

}  // namespace evotune
