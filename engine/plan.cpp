#include "engine/plan.hpp"

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

namespace {

template <typename E>
E enum_from(const nlohmann::json& j) {
  return static_cast<E>(j.get<int>());
}

}  // namespace

void to_json(nlohmann::json& j, const BufferPlan& b) {
  j = {{"name", b.name},
       {"elem", static_cast<int>(b.elem)},
       {"count", b.count},
       {"role", static_cast<int>(b.role)},
       {"init", static_cast<int>(b.init)},
       {"scale", b.scale},
       {"offset", b.offset},
       {"salt", b.salt}};
}
void from_json(const nlohmann::json& j, BufferPlan& b) {
  b.name = j.at("name");
  b.elem = enum_from<ElemType>(j.at("elem"));
  b.count = j.at("count");
  b.role = enum_from<ArgRole>(j.at("role"));
  b.init = enum_from<InitKind>(j.at("init"));
  b.scale = j.at("scale");
  b.offset = j.value("offset", 0.0);  // absent before offsets existed
  b.salt = j.at("salt");
}

void to_json(nlohmann::json& j, const TensorMapPlan& t) {
  j = {{"buffer", t.buffer},   {"elem", static_cast<int>(t.elem)},
       {"dims", t.dims},       {"strides", t.strides_bytes},
       {"box", t.box},         {"swizzle", t.swizzle},
       {"l2", t.l2_promotion}, {"oob_nan", t.oob_nan},
       {"enabled", t.enabled}};
}
void from_json(const nlohmann::json& j, TensorMapPlan& t) {
  t.buffer = j.at("buffer");
  t.elem = enum_from<ElemType>(j.at("elem"));
  t.dims = j.at("dims").get<std::vector<uint64_t>>();
  t.strides_bytes = j.at("strides").get<std::vector<uint64_t>>();
  t.box = j.at("box").get<std::vector<uint32_t>>();
  t.swizzle = j.at("swizzle");
  t.l2_promotion = j.at("l2");
  t.oob_nan = j.at("oob_nan");
  t.enabled = j.at("enabled");
}

void to_json(nlohmann::json& j, const ArgPlan& a) {
  j = {{"kind", static_cast<int>(a.kind)}, {"buffer", a.buffer}, {"scratch", a.scratch},
       {"type", static_cast<int>(a.type)}, {"i", a.i},           {"f", a.f}};
  if (a.kind == ArgPlan::Kind::tmap) j["tmap"] = a.tmap;
}
void from_json(const nlohmann::json& j, ArgPlan& a) {
  a.kind = enum_from<ArgPlan::Kind>(j.at("kind"));
  if (a.kind == ArgPlan::Kind::tmap) a.tmap = j.at("tmap");
  a.buffer = j.at("buffer");
  a.scratch = j.at("scratch");
  a.type = enum_from<ScalarType>(j.at("type"));
  a.i = j.at("i");
  a.f = j.at("f");
}

void to_json(nlohmann::json& j, const ScratchPlan& s) {
  j = {{"name", s.name}, {"elem", static_cast<int>(s.elem)}, {"count", s.count}, {"init", static_cast<int>(s.init)}};
}
void from_json(const nlohmann::json& j, ScratchPlan& s) {
  s.name = j.value("name", std::string());
  s.elem = enum_from<ElemType>(j.at("elem"));
  s.count = j.at("count");
  s.init = enum_from<InitKind>(j.at("init"));
}

void to_json(nlohmann::json& j, const LaunchDims& d) {
  j = {{"grid", d.grid}, {"block", d.block}, {"cluster", d.cluster}, {"smem", d.smem}};
}
void from_json(const nlohmann::json& j, LaunchDims& d) {
  d.grid = j.at("grid");
  d.block = j.at("block");
  d.cluster = j.at("cluster");
  d.smem = j.at("smem");
}

void to_json(nlohmann::json& j, const LaunchPlan& l) {
  j = {{"cubin", l.cubin}, {"entry", l.entry}, {"dims", l.dims}, {"args", l.args}, {"scratch", l.scratch}};
}
void from_json(const nlohmann::json& j, LaunchPlan& l) {
  l.cubin = j.at("cubin");
  l.entry = j.at("entry");
  l.dims = j.at("dims");
  l.args = j.at("args").get<std::vector<ArgPlan>>();
  l.scratch = j.at("scratch").get<std::vector<ScratchPlan>>();
}

void to_json(nlohmann::json& j, const Tolerances& t) {
  j = {{"max_abs", t.max_abs},
       {"mean_abs", t.mean_abs},
       {"atol", t.atol},
       {"rtol", t.rtol},
       {"max_bad_frac", t.max_bad_frac}};
}
void from_json(const nlohmann::json& j, Tolerances& t) {
  t.max_abs = j.at("max_abs");
  t.mean_abs = j.at("mean_abs");
  t.atol = j.at("atol");
  t.rtol = j.at("rtol");
  t.max_bad_frac = j.at("max_bad_frac");
}

void to_json(nlohmann::json& j, const ProblemSetup& p) {
  j = {{"label", p.label},     {"buffers", p.buffers}, {"reference", p.reference},
       {"outputs", p.outputs}, {"tol", p.tol},         {"timed", p.timed}};
}
void from_json(const nlohmann::json& j, ProblemSetup& p) {
  p.label = j.at("label");
  p.buffers = j.at("buffers").get<std::vector<BufferPlan>>();
  p.reference = j.at("reference");
  p.outputs = j.at("outputs").get<std::vector<std::string>>();
  p.tol = j.at("tol");
  p.timed = j.at("timed");
}

void to_json(nlohmann::json& j, const TimingOptions& t) {
  j = {{"sustain_ms", t.sustain_ms},   {"warmup_ms", t.warmup_ms},     {"warmup_busy_ms", t.warmup_busy_ms},
       {"busy_gap_ms", t.busy_gap_ms}, {"min_samples", t.min_samples}, {"max_samples", t.max_samples},
       {"target_ms", t.target_ms},     {"flush_l2", t.flush_l2},       {"flush_bytes_factor", t.flush_bytes_factor}};
}
void from_json(const nlohmann::json& j, TimingOptions& t) {
  t.sustain_ms = j.value("sustain_ms", 0.0);  // absent in runs recorded before it existed
  t.warmup_ms = j.at("warmup_ms");
  t.warmup_busy_ms = j.at("warmup_busy_ms");
  t.busy_gap_ms = j.at("busy_gap_ms");
  t.min_samples = j.at("min_samples");
  t.max_samples = j.at("max_samples");
  t.target_ms = j.at("target_ms");
  t.flush_l2 = j.at("flush_l2");
  t.flush_bytes_factor = j.at("flush_bytes_factor");
}

void to_json(nlohmann::json& j, const SustainedTiming& t) {
  j = {{"warmup_ms", t.warmup_ms}, {"target_ms", t.target_ms}, {"max_samples", t.max_samples}};
}
void from_json(const nlohmann::json& j, SustainedTiming& t) {
  t.warmup_ms = j.at("warmup_ms");
  t.target_ms = j.at("target_ms");
  t.max_samples = j.at("max_samples");
}

void to_json(nlohmann::json& j, const EvalReply& r) {
  j = {{"status", to_string(r.status)}, {"error", r.error},       {"per_problem", r.per_problem},
       {"verify_ms", r.verify_ms},      {"bench_ms", r.bench_ms}, {"restart", r.worker_must_restart}};
}
void from_json(const nlohmann::json& j, EvalReply& r) {
  r.status = parse_status(j.at("status"));
  r.error = j.at("error");
  r.per_problem = j.at("per_problem").get<std::vector<Measurement>>();
  r.verify_ms = j.at("verify_ms");
  r.bench_ms = j.at("bench_ms");
  r.worker_must_restart = j.at("restart");
}

void to_json(nlohmann::json& j, const BaselineRequest& b) {
  j = {{"problem", b.problem}, {"name", b.name},     {"library", b.library},
       {"buffers", b.buffers}, {"values", b.values}, {"sustained", b.sustained}};
}
void from_json(const nlohmann::json& j, BaselineRequest& b) {
  b.problem = j.at("problem");
  b.name = j.at("name");
  b.library = j.at("library");
  b.buffers = j.at("buffers").get<std::map<std::string, std::string>>();
  b.values = j.at("values").get<std::map<std::string, int64_t>>();
  b.sustained = j.at("sustained").get<SustainedTiming>();
}

// ------------------------------------------------------------ Planner

ArgPlan Planner::scalar_arg(const ArgSpec& a, const Scope& scope) const {
  ArgPlan p;
  p.kind = ArgPlan::Kind::scalar;
  p.type = a.scalar;
  Value v = scope.eval(a.value);
  if (a.scalar == ScalarType::f32) {
    p.f = v.as_double();
  } else {
    p.i = v.as_int();
    if (a.scalar == ScalarType::i32 && (p.i < INT32_MIN || p.i > INT32_MAX))
      throw SpecError("[[arg]] " + a.name + " = " + std::to_string(p.i) + " does not fit i32");
    if (a.scalar == ScalarType::u32 && (p.i < 0 || p.i > UINT32_MAX))
      throw SpecError("[[arg]] " + a.name + " = " + std::to_string(p.i) + " does not fit u32");
  }
  return p;
}

ArgPlan Planner::tmap_arg(const ArgSpec& a, const Scope& scope, Dtype dtype) const {
  ArgPlan p;
  p.kind = ArgPlan::Kind::tmap;
  TensorMapPlan& t = p.tmap;
  t.buffer = a.tmap.tensor;
  for (const auto& b : spec_.args)
    if (b.name == a.tmap.tensor) t.elem = resolve_elem(b.elem, dtype);
  size_t bytes = static_cast<size_t>(elem_bytes(t.elem, dtype));
  auto positive = [&](const Expr& e, const char* what) {
    int64_t v = scope.eval(e).as_int();
    if (v < 1) throw SpecError("[[arg]] " + a.name + ": " + what + " " + e.text() + " = " + std::to_string(v) + " < 1");
    return v;
  };
  for (const auto& e : a.tmap.dims) t.dims.push_back(static_cast<uint64_t>(positive(e, "dim")));
  for (const auto& e : a.tmap.strides) t.strides_bytes.push_back(static_cast<uint64_t>(positive(e, "stride")) * bytes);
  for (const auto& e : a.tmap.box) t.box.push_back(static_cast<uint32_t>(positive(e, "box")));
  if (!a.tmap.swizzle.empty()) t.swizzle = static_cast<int>(scope.eval(a.tmap.swizzle).as_int());
  if (!a.tmap.l2_promotion.empty()) t.l2_promotion = static_cast<int>(scope.eval(a.tmap.l2_promotion).as_int());
  if (!a.tmap.enabled.empty()) t.enabled = scope.eval(a.tmap.enabled).truthy();
  t.oob_nan = a.tmap.oob_nan;
  return p;
}

ProblemSetup Planner::problem_setup(const Problem& p, bool timed, int reference_cubin) const {
  ProblemSetup s;
  s.label = p.canonical() + " " + to_string(p.dtype);
  s.timed = timed;
  s.tol = spec_.tolerances(p);
  Scope scope(spec_, &p, nullptr, dev_);
  uint64_t salt = 1;
  for (const auto& a : spec_.args) {
    ++salt;
    if (!a.is_buffer || a.role == ArgRole::scratch) continue;  // scalars, tensor maps, scratch: per launch
    BufferPlan b;
    b.name = a.name;
    b.elem = resolve_elem(a.elem, p.dtype);
    b.count = scope.eval(a.count, ValueRule::positive_int, "[[arg]] " + a.name + " count").as_int();
    b.role = a.role;
    b.init = a.init;
    b.scale = scope.eval(a.init_scale, ValueRule::nonneg_number, "[[arg]] " + a.name + " scale").as_double();
    b.offset = scope.eval(a.init_offset, ValueRule::number, "[[arg]] " + a.name + " offset").as_double();
    b.salt = salt;
    s.buffers.push_back(b);
    if (a.role == ArgRole::out) {
      s.outputs.push_back(a.name);
      BufferPlan ref = b;
      ref.name = a.name + ".ref";
      ref.elem = ElemType::f32;
      ref.init = InitKind::zero;
      s.buffers.push_back(ref);
    }
  }
  s.reference.cubin = reference_cubin;
  s.reference.entry = spec_.reference.entry;
  s.reference.dims = spec_.reference_launch_dims(p, dev_);
  for (const auto& name : spec_.reference.args) {
    const ArgSpec* a = nullptr;
    for (const auto& x : spec_.args)
      if (x.name == name) a = &x;
    if (!a->is_buffer) {
      s.reference.args.push_back(scalar_arg(*a, scope));
    } else if (a->role == ArgRole::scratch) {
      throw SpecError("[reference].args: the reference cannot take scratch buffer " + name);
    } else {
      ArgPlan ap;
      ap.kind = ArgPlan::Kind::buffer;
      ap.buffer = a->role == ArgRole::out ? name + ".ref" : name;
      s.reference.args.push_back(ap);
    }
  }
  return s;
}

LaunchPlan Planner::launch(const Config& c, const Problem& p, int cubin) const {
  LaunchPlan l;
  l.cubin = cubin;
  l.entry = spec_.entry;
  l.dims = spec_.launch_dims(c, p, dev_);
  Scope scope(spec_, &p, &c, dev_);
  for (const auto& a : spec_.args) {
    if (a.is_tmap) {
      l.args.push_back(tmap_arg(a, scope, p.dtype));
    } else if (!a.is_buffer) {
      l.args.push_back(scalar_arg(a, scope));
    } else if (a.role == ArgRole::scratch) {
      ScratchPlan sp;
      sp.name = a.name;
      sp.elem = resolve_elem(a.elem, p.dtype);
      sp.count = scope.eval(a.count, ValueRule::positive_int, "[[arg]] " + a.name + " count").as_int();
      sp.init = a.init;
      ArgPlan ap;
      ap.kind = ArgPlan::Kind::scratch;
      ap.scratch = static_cast<int>(l.scratch.size());
      l.scratch.push_back(sp);
      l.args.push_back(ap);
    } else {
      ArgPlan ap;
      ap.kind = ArgPlan::Kind::buffer;
      ap.buffer = a.name;
      l.args.push_back(ap);
    }
  }
  return l;
}

}  // namespace evotune
