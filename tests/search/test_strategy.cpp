#include <algorithm>
#include <deque>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/spec.hpp"
#include "search/population.hpp"
#include "search/space.hpp"
#include "search/strategy.hpp"
#include "tests/catch.hpp"
#include "tests/search/synthetic_spec.hpp"

using namespace evotune;
using evotune_test::spec_from;
using evotune_test::spec_text;

namespace {

// 80 configs, 48 valid on N=256; BLOCK=128 and BLOCK=256 die on N=64.
const std::string kSmallSpace = R"toml(
[[param]]
name = "BLOCK"
values = [16, 32, 64, 128, 256]
default = 64

[[param]]
name = "WARPS"
values = [1, 2, 4, 8]
default = 2

[[param]]
name = "STAGES"
values = [1, 2, 3, 4]
default = 2

[space]
constraints = ["BLOCK % (16*WARPS) == 0", "BLOCK <= N", "BLOCK * STAGES * dtype_bytes <= 1024"]
)toml";

// 8000 configs, 3482 valid on M=4096: a GEMM-like space worth evolving.
const std::string kGemmSpace = R"toml(
[[param]]
name = "BLOCK_M"
values = [16, 32, 64, 128, 256]
default = 64

[[param]]
name = "BLOCK_N"
values = [16, 32, 64, 128, 256]
default = 64

[[param]]
name = "BLOCK_K"
values = [16, 32, 64, 128]
default = 32

[[param]]
name = "WARPS"
values = [1, 2, 4, 8]
default = 4

[[param]]
name = "STAGES"
values = [1, 2, 3, 4, 5]
default = 2

[[param]]
name = "UNROLL"
values = [1, 2, 4, 8]
default = 1

[lets]
smem = "(BLOCK_M + BLOCK_N) * BLOCK_K * STAGES * dtype_bytes"

[space]
constraints = [
  "BLOCK_M * BLOCK_N >= 32 * 32 * WARPS",
  "smem <= 160 * 1024",
  "BLOCK_M <= M",
  "UNROLL <= BLOCK_K / 8",
  "BLOCK_M % (16*WARPS) == 0 || BLOCK_N % (16*WARPS) == 0",
]
)toml";

// 8^7 * 4 = 8.4M configs: beyond the enumeration limit, so only draws work.
const std::string kHugeSpace = R"toml(
[[param]]
name = "A"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "B"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "C"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "D"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "E"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "F"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "G"
values = [0, 1, 2, 3, 4, 5, 6, 7]
[[param]]
name = "H"
values = [0, 1, 2, 3]

[space]
constraints = ["A + B + C <= 14", "D != E"]
)toml";

// Valid configs need A + B == 7: children that move A or B alone are rejected.
const std::string kThinSpace = R"toml(
[[param]]
name = "A"
values = [0, 1, 2, 3, 4, 5, 6, 7]
default = 3
[[param]]
name = "B"
values = [0, 1, 2, 3, 4, 5, 6, 7]
default = 4
[[param]]
name = "C"
values = [0, 1, 2, 3, 4, 5, 6, 7]

[space]
constraints = ["A + B == 7"]
)toml";

const std::vector<std::string> kStrategies = {"evo", "random", "exhaustive"};

// A noise-free landscape: 1 + squared distance of value indices from a target.
struct Landscape {
  const SearchSpace* space;
  std::vector<size_t> target;
  double operator()(const Config& c) const {
    double d = 1;
    for (size_t i = 0; i < target.size(); ++i) {
      double delta = static_cast<double>(space->value_index(c, i)) - static_cast<double>(target[i]);
      d += delta * delta;
    }
    return d;
  }
};

// Returns a fitness, or nullopt for a failed trial (compile error).
using Evaluate = std::function<std::optional<double>(const Config&)>;

struct Run {
  std::vector<Config> proposals;
  std::vector<double> best_after;  // best fitness after each observed trial
  bool exhausted = false;          // propose() returned nullopt
};

// Drives a strategy like the tuner: up to `window` proposals in flight,
// observed in proposal order. `after_observe` runs after each observe();
// the run stops early once `enough` says so.
Run drive(Strategy& s, size_t budget, size_t window, const Evaluate& evaluate,
          const std::function<void(const Strategy&)>& after_observe = {},
          const std::function<bool(const Run&)>& enough = {}) {
  Run run;
  std::deque<Config> in_flight;
  double best = 1e300;
  int seq = 0;
  for (;;) {
    while (!run.exhausted && in_flight.size() < window && run.proposals.size() < budget) {
      std::optional<Config> c = s.propose();
      if (!c) {
        run.exhausted = true;
        break;
      }
      run.proposals.push_back(*c);
      in_flight.push_back(*c);
    }
    if (in_flight.empty()) break;
    Trial t;
    t.seq = ++seq;
    t.id = seq;
    t.config = in_flight.front();
    in_flight.pop_front();
    std::optional<double> f = evaluate(t.config);
    if (f) {
      t.status = TrialStatus::ok;
      t.fitness = *f;
      best = std::min(best, *f);
    } else {
      t.status = TrialStatus::compile_error;
    }
    s.observe(t);
    run.best_after.push_back(best);
    if (after_observe) after_observe(s);
    if (enough && enough(run)) break;
  }
  return run;
}

std::vector<std::string> canonicals(const std::vector<Config>& cs) {
  std::vector<std::string> out;
  for (const Config& c : cs) out.push_back(c.canonical());
  return out;
}

// Trials needed until the optimum (fitness 1) was observed, or the budget + 1.
size_t trials_to_optimum(const Run& run) {
  for (size_t i = 0; i < run.best_after.size(); ++i)
    if (run.best_after[i] <= 1.0) return i + 1;
  return run.best_after.size() + 1;
}

std::vector<size_t> indices_of(const SearchSpace& space, const Config& c) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < space.params().size(); ++i) idx.push_back(space.value_index(c, i));
  return idx;
}

// Fails one config in seven, chosen by hash, so failures are reproducible.
Evaluate failing_some(const Landscape& land) {
  return [land](const Config& c) -> std::optional<double> {
    if (c.hash() % 7 == 0) return std::nullopt;
    return land(c);
  };
}

}  // namespace

TEST_CASE("make_strategy knows evo, random and exhaustive", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kSmallSpace));
  SearchSpace space(spec, {spec.parse_problem("N=256", Dtype::fp16)}, DeviceTraits{});
  for (const std::string& name : kStrategies) CHECK(make_strategy(name, space, {})->name() == name);
  try {
    make_strategy("anneal", space, {});
    FAIL("no UsageError");
  } catch (const UsageError& e) {
    std::string what = e.what();
    CHECK(what.find("anneal") != std::string::npos);
    for (const std::string& name : kStrategies) CHECK(what.find(name) != std::string::npos);
  }
}

TEST_CASE("every strategy proposes the default config first", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kSmallSpace));
  SearchSpace space(spec, {spec.parse_problem("N=256", Dtype::fp16)}, DeviceTraits{});
  // On N=32 the default BLOCK=64 breaks "BLOCK <= N".
  SearchSpace narrow(spec, {spec.parse_problem("N=32", Dtype::fp16)}, DeviceTraits{});
  REQUIRE_FALSE(narrow.valid(narrow.default_config()));
  for (const std::string& name : kStrategies) {
    for (uint64_t seed : {1, 2, 3}) {
      StrategyOptions opts;
      opts.seed = seed;
      CHECK(make_strategy(name, space, opts)->propose() == space.default_config());

      auto marked = make_strategy(name, space, opts);
      marked->mark_seen(space.default_config());
      std::optional<Config> first = marked->propose();
      REQUIRE(first);
      CHECK_FALSE(*first == space.default_config());

      std::optional<Config> from_narrow = make_strategy(name, narrow, opts)->propose();
      REQUIRE(from_narrow);
      CHECK(narrow.valid(*from_narrow));
    }
  }
}

TEST_CASE("evo tries the spec's valid start configs right after the default, the baselines ignore them", "[search]") {
  // BLOCK=128 breaks "BLOCK <= N" on N=64; WARPS=8 needs BLOCK >= 128.
  const std::string starts = "\nstarts = [\"BLOCK=32,STAGES=4\", \"BLOCK=128\", \"BLOCK=16,WARPS=1\"]\n";
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kSmallSpace + starts));
  SearchSpace space(spec, {spec.parse_problem("N=64", Dtype::fp16)}, DeviceTraits{});
  REQUIRE(spec.starts.size() == 3);
  REQUIRE_FALSE(space.valid(spec.starts[1]));
  for (uint64_t seed : {1, 2}) {
    StrategyOptions opts;
    opts.seed = seed;
    auto evo = make_strategy("evo", space, opts);
    CHECK(evo->propose() == space.default_config());
    CHECK(evo->propose() == spec.starts[0]);
    CHECK(evo->propose() == spec.starts[2]);  // the invalid one skipped
    // A start already seen (a --config, or a resumed run) is not proposed again.
    auto marked = make_strategy("evo", space, opts);
    marked->mark_seen(spec.starts[0]);
    CHECK(marked->propose() == space.default_config());
    CHECK(marked->propose() == spec.starts[2]);
    for (const std::string name : {"random", "exhaustive"}) {
      auto baseline = make_strategy(name, space, opts);
      baseline->propose();  // the default
      std::optional<Config> second = baseline->propose(), third = baseline->propose();
      REQUIRE((second && third));
      CHECK_FALSE((*second == spec.starts[0] && *third == spec.starts[2]));
    }
  }
}

TEST_CASE("strategies are deterministic for a seed and observations", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["M"])", kGemmSpace));
  SearchSpace space(spec, {spec.parse_problem("M=4096", Dtype::fp16)}, DeviceTraits{});
  Landscape land{&space, {2, 1, 2, 1, 3, 2}};
  REQUIRE(space.valid(Config::parse("BLOCK_M=64,BLOCK_N=32,BLOCK_K=64,WARPS=2,STAGES=4,UNROLL=4")));
  for (const std::string& name : kStrategies) {
    for (size_t window : {1, 5}) {
      StrategyOptions opts;
      opts.seed = 11;
      auto a = make_strategy(name, space, opts);
      auto b = make_strategy(name, space, opts);
      Run ra = drive(*a, 120, window, failing_some(land));
      Run rb = drive(*b, 120, window, failing_some(land));
      REQUIRE(ra.proposals.size() == 120);
      CHECK(canonicals(ra.proposals) == canonicals(rb.proposals));
      CHECK(a->invalid_draws() == b->invalid_draws());
      if (name == "exhaustive") continue;
      opts.seed = 12;
      auto c = make_strategy(name, space, opts);
      Run rc = drive(*c, 120, window, failing_some(land));
      // Both start with the default; the rest follows the seed.
      CHECK(ra.proposals[0] == rc.proposals[0]);
      CHECK(canonicals(ra.proposals) != canonicals(rc.proposals));
    }
  }
}

TEST_CASE("strategies never repeat a config, honour mark_seen and propose only valid configs", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kSmallSpace));
  SearchSpace space(spec, {spec.parse_problem("N=256", Dtype::fp16)}, DeviceTraits{});
  const std::vector<Config>& all = *space.enumerate_valid();
  REQUIRE(all.size() == 48);
  // Seeds: two valid configs (one of them the default) and an invalid one.
  std::vector<Config> seeds = {space.default_config(), all[5], Config::parse("BLOCK=16,WARPS=8,STAGES=1")};
  REQUIRE_FALSE(space.valid(seeds[2]));
  Landscape land{&space, {3, 1, 0}};
  for (const std::string& name : kStrategies) {
    for (uint64_t seed : {1, 2, 3, 4}) {
      for (size_t window : {1, 4}) {
        CAPTURE(name, seed, window);
        StrategyOptions opts;
        opts.seed = seed;
        opts.initial_random = 4;
        auto s = make_strategy(name, space, opts);
        for (const Config& c : seeds) s->mark_seen(c);
        Run run = drive(*s, 1000, window, failing_some(land));
        CHECK(run.exhausted);
        std::set<Config> proposed(run.proposals.begin(), run.proposals.end());
        CHECK(proposed.size() == run.proposals.size());
        for (const Config& c : run.proposals) CHECK(space.valid(c));
        for (const Config& c : seeds) CHECK(proposed.count(c) == 0);
        // Every valid config but the two valid seeds, then nothing more.
        CHECK(run.proposals.size() == all.size() - 2);
        CHECK_FALSE(s->propose());
      }
    }
  }
}

TEST_CASE("configs marked while a run is under way are never proposed", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kSmallSpace));
  SearchSpace space(spec, {spec.parse_problem("N=256", Dtype::fp16)}, DeviceTraits{});
  const std::vector<Config>& all = *space.enumerate_valid();
  REQUIRE(all.size() == 48);
  Landscape land{&space, {1, 0, 2}};
  for (const std::string& name : kStrategies) {
    for (uint64_t seed : {1, 2, 3}) {
      CAPTURE(name, seed);
      StrategyOptions opts;
      opts.seed = seed;
      opts.initial_random = 3;
      auto s = make_strategy(name, space, opts);
      Run head = drive(*s, 6, 2, failing_some(land));
      std::set<Config> proposed(head.proposals.begin(), head.proposals.end());
      // Mark a few configs not proposed yet, spread over the enumeration.
      std::set<Config> marked;
      for (size_t i = 0; i + 1 < all.size() && marked.size() < 8; i += 5)
        if (!proposed.count(all[i])) marked.insert(all[i]);
      for (const Config& c : marked) s->mark_seen(c);
      // Not a config of this space: it must not hide the valid one it extends.
      Config foreign = all.back();
      foreign.values["UNROLL"] = 2;
      s->mark_seen(foreign);
      Run tail = drive(*s, 1000, 2, failing_some(land));
      CHECK(tail.exhausted);
      for (const Config& c : tail.proposals) {
        CHECK(marked.count(c) == 0);
        CHECK(proposed.insert(c).second);
      }
      CHECK(proposed.size() + marked.size() == all.size());
    }
  }
}

TEST_CASE("every strategy stays valid and unique on a space too large to enumerate", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kHugeSpace));
  SearchSpace space(spec, {spec.parse_problem("N=1", Dtype::fp16)}, DeviceTraits{});
  REQUIRE(space.total_size() > 4'000'000);
  Landscape land{&space, {7, 7, 0, 3, 4, 5, 6, 1}};
  for (const std::string& name : kStrategies) {
    StrategyOptions opts;
    opts.seed = 5;
    auto s = make_strategy(name, space, opts);
    Run run = drive(*s, 300, 3, failing_some(land));
    REQUIRE(run.proposals.size() == 300);
    CHECK(std::set<Config>(run.proposals.begin(), run.proposals.end()).size() == 300);
    for (const Config& c : run.proposals) CHECK(space.valid(c));
    CHECK(s->invalid_draws() > 0);  // "D != E" rejects one draw in eight
  }
}

TEST_CASE("exhaustive walks the enumeration in order after the default", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kSmallSpace));
  for (const char* problem : {"N=256", "N=64"}) {
    SearchSpace space(spec, {spec.parse_problem(problem, Dtype::fp16)}, DeviceTraits{});
    const std::vector<Config>& all = *space.enumerate_valid();
    std::vector<Config> expected = {space.default_config()};
    for (const Config& c : all)
      if (!(c == space.default_config())) expected.push_back(c);
    auto s = make_strategy("exhaustive", space, {});
    Run run = drive(*s, 1000, 3, [](const Config&) { return 2.0; });
    CHECK(run.exhausted);
    CHECK(canonicals(run.proposals) == canonicals(expected));
    // Every other point of the product was rejected once by the constraints.
    CHECK(s->invalid_draws() == static_cast<int>(space.total_size()) - static_cast<int>(all.size()));
    CHECK_FALSE(s->propose());
  }
}

TEST_CASE("population keeps the top K ok trials, earlier first on ties", "[search]") {
  Population pop(3);
  auto trial = [](int seq, double fitness, TrialStatus status = TrialStatus::ok) {
    Trial t;
    t.id = 100 + seq;
    t.seq = seq;
    t.config.values["X"] = seq;
    t.status = status;
    t.fitness = fitness;
    return t;
  };
  CHECK(pop.offer(trial(1, 5.0)));
  CHECK_FALSE(pop.offer(trial(2, 1.0, TrialStatus::incorrect)));
  CHECK_FALSE(pop.offer(trial(3, 0.0)));  // ok but unmeasured: never an elite
  CHECK(pop.offer(trial(4, 3.0)));
  CHECK(pop.offer(trial(5, 3.0)));  // ties the 3.0 of seq 4, goes after it
  CHECK_FALSE(pop.offer(trial(6, 9.0)));
  CHECK(pop.elite_ids() == std::vector<int64_t>{104, 105, 101});
  CHECK(pop.offer(trial(7, 2.0)));
  CHECK(pop.elite_ids() == std::vector<int64_t>{107, 104, 105});
  CHECK_FALSE(pop.offer(trial(8, 3.0)));  // a third 3.0, later than both
  CHECK_FALSE(pop.offer(trial(4, 0.5)));  // the same config again
  REQUIRE(pop.best());
  CHECK(pop.best()->seq == 7);
  std::vector<int> seqs;
  for (const Trial& t : pop.ok_trials()) seqs.push_back(t.seq);
  CHECK(seqs == std::vector<int>{7, 4, 5, 8, 1, 6});
}

TEST_CASE("evo keeps its elites", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["M"])", kGemmSpace));
  SearchSpace space(spec, {spec.parse_problem("M=4096", Dtype::fp16)}, DeviceTraits{});
  Landscape land{&space, {3, 3, 1, 1, 2, 1}};
  StrategyOptions opts;
  opts.seed = 3;
  auto s = make_strategy("evo", space, opts);
  std::vector<Trial> previous;
  int checks = 0;
  drive(*s, 300, 4, failing_some(land), [&](const Strategy& st) {
    const auto& elites = st.population().elites();
    REQUIRE(elites.size() <= static_cast<size_t>(opts.elites));
    // One observation can push out at most one elite: the old K-th, no
    // better than the new K-th.
    int dropped = 0;
    for (const Trial& old : previous) {
      ++checks;
      bool kept = std::any_of(elites.begin(), elites.end(), [&](const Trial& e) { return e.config == old.config; });
      if (kept) continue;
      ++dropped;
      CHECK(elites.size() == static_cast<size_t>(opts.elites));
      CHECK(old.fitness >= elites.back().fitness);
    }
    CHECK(dropped <= 1);
    for (size_t i = 1; i < elites.size(); ++i) CHECK(elites[i - 1].fitness <= elites[i].fitness);
    previous = elites;
  });
  CHECK(checks > 1500);  // the population was full for most of the run
}

TEST_CASE("evo finds the optimum of a landscape far sooner than the space's size", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["M"])", kGemmSpace));
  SearchSpace space(spec, {spec.parse_problem("M=4096", Dtype::fp16)}, DeviceTraits{});
  size_t valid = space.enumerate_valid()->size();
  REQUIRE(valid == 3482);
  // Targets: valid configs inside the space and against its constraints.
  std::vector<std::vector<size_t>> targets = {
      indices_of(space, Config::parse("BLOCK_M=64,BLOCK_N=32,BLOCK_K=64,WARPS=2,STAGES=4,UNROLL=4")),
      indices_of(space, Config::parse("BLOCK_M=256,BLOCK_N=128,BLOCK_K=64,WARPS=8,STAGES=3,UNROLL=8")),
      indices_of(space, Config::parse("BLOCK_M=16,BLOCK_N=256,BLOCK_K=16,WARPS=1,STAGES=5,UNROLL=2")),
  };
  const size_t budget = valid * 3 / 10;
  const size_t compare_at = 100;
  double evo_trials = 0, evo_best = 0, random_best = 0;
  int runs = 0;
  for (const auto& target : targets) {
    Landscape land{&space, target};
    REQUIRE(space.valid(space.default_config()));
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      StrategyOptions opts;
      opts.seed = seed;
      auto evo = make_strategy("evo", space, opts);
      // What is checked is known once the optimum is found and compare_at
      // trials are in: the rest of the budget (the costly part of the run:
      // proposals model every observation) would change nothing.
      Run e = drive(*evo, budget, seed % 2 ? 1 : 6, [&](const Config& c) { return land(c); }, {},
                    [&](const Run& r) { return r.best_after.size() >= compare_at && r.best_after.back() <= 1.0; });
      auto rnd = make_strategy("random", space, opts);
      Run r = drive(*rnd, compare_at, 1, [&](const Config& c) { return land(c); });
      evo_trials += static_cast<double>(trials_to_optimum(e));
      evo_best += e.best_after.at(compare_at - 1);
      random_best += r.best_after.at(compare_at - 1);
      ++runs;
    }
  }
  evo_trials /= runs;
  evo_best /= runs;
  random_best /= runs;
  INFO("evo: " << evo_trials << " trials to the optimum of " << valid << " valid; best after " << compare_at << ": evo "
               << evo_best << ", random " << random_best);
  // Typically ~75 trials (2% of the space); random search needs ~half of it.
  CHECK(evo_trials <= 0.1 * static_cast<double>(valid));
  CHECK(evo_best < random_best);
}

TEST_CASE("evo counts the children the constraints reject", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["N"])", kThinSpace));
  SearchSpace space(spec, {spec.parse_problem("N=1", Dtype::fp16)}, DeviceTraits{});
  Landscape land{&space, {2, 5, 6}};
  StrategyOptions opts;
  opts.initial_random = 0;
  auto s = make_strategy("evo", space, opts);
  // A resumed run: the default and two measured trials are known already,
  // so every proposal is bred and no random draw is made.
  s->mark_seen(space.default_config());
  int seq = 0;
  for (const char* text : {"A=1,B=6,C=0", "A=6,B=1,C=7"}) {
    Trial t;
    t.seq = ++seq;
    t.config = Config::parse(text);
    t.fitness = land(t.config);
    s->observe(t);
  }
  REQUIRE(s->population().ok_trials().size() == 2);
  REQUIRE(s->invalid_draws() == 0);
  Run run = drive(*s, 10, 1, [&](const Config& c) { return land(c); });
  REQUIRE(run.proposals.size() == 10);
  for (const Config& c : run.proposals) CHECK(space.valid(c));
  CHECK(s->invalid_draws() >= 10);
}

TEST_CASE("evo ranks configs in flight by the results so far, the baselines have no preference", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["M"])", kGemmSpace));
  SearchSpace space(spec, {spec.parse_problem("M=4096", Dtype::fp16)}, DeviceTraits{});
  const Config best_place = Config::parse("BLOCK_M=64,BLOCK_N=32,BLOCK_K=64,WARPS=2,STAGES=4,UNROLL=4");
  REQUIRE(space.valid(best_place));
  Landscape land{&space, indices_of(space, best_place)};
  StrategyOptions opts;
  opts.seed = 3;
  auto evo = make_strategy("evo", space, opts);
  auto rnd = make_strategy("random", space, opts);
  // Proposed, not yet observed: nothing to rank them by.
  std::vector<Config> proposed;
  for (int i = 0; i < 30; ++i) proposed.push_back(*evo->propose());
  CHECK(evo->scores(proposed).empty());
  // Half observed: the rest are ranked as the landscape orders them, nearly.
  std::vector<Config> open;
  for (size_t i = 0; i < proposed.size(); ++i) {
    if (i % 2) {
      open.push_back(proposed[i]);
      continue;
    }
    Trial t;
    t.config = proposed[i];
    t.status = TrialStatus::ok;
    t.fitness = land(proposed[i]);
    evo->observe(t);
  }
  const std::vector<double> s = evo->scores(open);
  REQUIRE(s.size() == open.size());
  CHECK(evo->scores(open) == s);  // the same results give the same ranking
  size_t agree = 0, pairs = 0;
  for (size_t i = 0; i < open.size(); ++i)
    for (size_t j = i + 1; j < open.size(); ++j) {
      if (land(open[i]) == land(open[j])) continue;
      ++pairs;
      if ((s[i] < s[j]) == (land(open[i]) < land(open[j]))) ++agree;
    }
  INFO(agree << " of " << pairs << " pairs ranked as the landscape orders them");
  CHECK(agree > pairs * 6 / 10);
  // A config withdrawn no longer counts as taken: the room around it is back.
  std::vector<Config> one = {open.front()};
  Config twin = open.front();
  const double before = evo->scores({twin}).front();
  for (size_t i = 1; i < open.size(); ++i) evo->withdraw(open[i]);
  CHECK(evo->scores(one).front() <= before);
  // Withdrawn is still proposed once only.
  for (int i = 0; i < 200; ++i) {
    auto c = evo->propose();
    REQUIRE(c);
    CHECK(std::find(open.begin(), open.end(), *c) == open.end());
  }
  std::vector<Config> r_open;
  for (int i = 0; i < 3; ++i) r_open.push_back(*rnd->propose());
  Trial t;
  t.config = r_open[0];
  t.status = TrialStatus::ok;
  t.fitness = 2;
  rnd->observe(t);
  CHECK(rnd->scores(r_open).empty());
}

TEST_CASE("evo's candidates include every one-parameter variant of the best", "[search]") {
  KernelSpec spec = spec_from(spec_text(R"(["M"])", kGemmSpace));
  SearchSpace space(spec, {spec.parse_problem("M=4096", Dtype::fp16)}, DeviceTraits{});
  const Config target = Config::parse("BLOCK_M=64,BLOCK_N=32,BLOCK_K=64,WARPS=2,STAGES=4,UNROLL=4");
  Landscape land{&space, indices_of(space, target)};
  // No bred or random candidates: past the start (which may run to twice
  // its size while the model learns), every proposal is a variant of the
  // best in one parameter, until none is left unseen.
  StrategyOptions opts;
  opts.seed = 5;
  opts.children = 0;
  opts.random_candidates = 0;
  auto s = make_strategy("evo", space, opts);
  const Trial* best = nullptr;
  int variants = 0, seq = 0;
  bool found = false;
  for (int i = 0; i < 200 && !found; ++i) {
    std::optional<Config> c = s->propose();
    REQUIRE(c);
    if (i >= 2 * opts.initial_random && best) {
      int differ = 0;
      for (const ParamSpec& p : space.params()) differ += c->values.at(p.name) != best->config.values.at(p.name);
      CHECK(differ == 1);
      ++variants;
    }
    Trial t;
    t.seq = ++seq;
    t.config = *c;
    t.status = TrialStatus::ok;
    t.fitness = land(*c);
    s->observe(t);
    best = s->population().best();
    found = best->fitness <= 1.0;
  }
  // A local search on this convex landscape reaches the optimum.
  CHECK(found);
  CHECK(variants > 0);
}
