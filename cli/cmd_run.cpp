#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <set>

#include "cli/app.hpp"
#include "cli/console_progress.hpp"
#include "store/store.hpp"
#include "tune/profile.hpp"

namespace evotune {

namespace {

// What `run`'s options fill in, shared by the option groups and the action.
struct RunArgs {
  TuneOptions opts;
  std::vector<std::string> shapes, named;
  std::string dtype, resume;
  bool no_flush = false;
  int profile_top = 0;
};

void add_problem_options(CLI::App* cmd, RunArgs& a) {
  const char* g = "What to tune";
  cmd->add_option("-k,--kernel", a.opts.kernel, "built-in kernel name (see `evotune kernels`) or a spec file path")
      ->group(g);
  cmd->add_option("-s,--shape", a.shapes, "problem dims in the kernel's order, e.g. 2,8,512,64 (repeatable)")->group(g);
  cmd->add_option("-p,--problem", a.named, "problem by name, e.g. B=2,H=8,S=512,D=64 (repeatable)")->group(g);
  cmd->add_option("-d,--dtype", a.dtype, "element type: fp16, bf16 (default: the kernel's first)")->group(g);
}

void add_search_options(CLI::App* cmd, RunArgs& a) {
  const char* g = "The search";
  cmd->add_option("-b,--budget", a.opts.budget,
                  "trials to evaluate (constraint rejections are free); with --resume, the run's new total")
      ->check(CLI::Range(1, 1000000))
      ->group(g);
  cmd->add_option("-e,--elites", a.opts.elites, "size K of the elite population kept across generations")
      ->check(CLI::Range(1, 1000))
      ->group(g);
  cmd->add_option("--seed", a.opts.seed, "random seed: same seed and results, same trials")
      ->check(CLI::Range(uint64_t{0}, uint64_t{INT64_MAX}).description("< 2^63"))  // SQLite stores it signed
      ->group(g);
  cmd->add_option("--strategy", a.opts.strategy, "search strategy")
      ->check(CLI::IsMember({"evo", "random", "exhaustive"}))
      ->group(g);
  cmd->add_option("--config", a.opts.seed_configs,
                  "a config to evaluate first, e.g. BLOCK_M=64,STAGES=4 (others: defaults; repeatable)")
      ->group(g);
  cmd->add_option("--window", a.opts.window,
                  "configs in flight (compiling ahead of the GPU); default: 8, growing by one per result to as many "
                  "as keep the slower of compiling and the GPU busy, from the measured times, at most 2x threads")
      ->check(positive_number())
      ->group(g);
  cmd->add_option("--resume", a.resume,
                  "continue run RUN (id or 'last') with its remaining budget; options that define the run (kernel, "
                  "problems, dtype, strategy, seed, elites) may be left out, and must agree with it if given")
      ->group(g);
}

void add_where_options(CLI::App* cmd, RunArgs& a) {
  const char* g = "Where it runs";
  cmd->add_option("--device", a.opts.device, "CUDA device ordinal")->check(non_negative_number())->group(g);
  cmd->add_option("--gpus", a.opts.gpus,
                  "evaluate on several GPUs at once: all, or ordinals like 0,1; with --replay, N simulated GPUs")
      ->group(g);
  cmd->add_flag("--compile-only", a.opts.compile_only, "compile and gate configs without a GPU (needs --arch there)")
      ->group(g);
  cmd->add_option("--arch", a.opts.arch, "target for --compile-only, e.g. sm_90a, sm_80")->group(g);
  cmd->add_option("-j,--compile-threads", a.opts.compile_threads, "NVRTC compile threads (default: one per core)")
      ->check(positive_number())
      ->group(g);
  cmd->add_option("--compile-timeout", a.opts.compile_timeout_s, "seconds before a compile is cut off (compile_error)")
      ->check(positive_number())
      ->group(g);
  cmd->add_flag("!--no-cache", a.opts.use_cache, "do not use the on-disk compile cache")->group(g);
  cmd->add_option("--replay", a.opts.replay_path,
                  "evaluate configs from a dataset (`evotune export RUN --format dataset`) instead of a GPU")
      ->group(g);
  cmd->add_flag("--replay-warm-cache", a.opts.replay_warm_cache, "with --replay: charge no compile time")->group(g);
}

void add_timing_options(CLI::App* cmd, RunArgs& a) {
  const char* g = "Timing";
  cmd->add_option("--timeout", a.opts.timeout_floor_s, "minimum seconds a trial may take on the GPU before it is killed")
      ->check(positive_number())
      ->group(g);
  cmd->add_option("--abort-factor", a.opts.abort_factor,
                  "stop timing a candidate whose p50 exceeds this many times the best's (0: never)")
      ->check(non_negative_number())
      ->group(g);
  cmd->add_option("--sustain-ms", a.opts.timing.sustain_ms,
                  "warm-up per problem: this many ms of the timed loop itself (flushes included), so that each "
                  "candidate is timed at the clocks its sustained load settles to (0: the count-based --warmup-ms)")
      ->check(CLI::Range(0.0, 60000.0))
      ->group(g);
  cmd->add_option("--warmup-ms", a.opts.timing.warmup_ms,
                  "with --sustain-ms 0: warm-up launches per problem, by time, when the GPU has been idle")
      ->check(non_negative_number())
      ->group(g);
  cmd->add_option("--busy-warmup-ms", a.opts.timing.warmup_busy_ms,
                  "with --sustain-ms 0: warm-up while the GPU is kept busy (the previous evaluation ended <200 ms ago)")
      ->check(non_negative_number())
      ->group(g);
  cmd->add_option("--samples", a.opts.timing.max_samples, "most timed launches per problem")
      ->check(CLI::Range(3, 100000))
      ->group(g);
  cmd->add_flag("--no-flush", a.no_flush, "do not flush L2 before each timed launch (hot-cache timing)")->group(g);
  cmd->add_option("--retime", a.opts.retime_rounds, "rounds of interleaved re-timing of the final elites (0: none)")
      ->check(CLI::Range(0, 100))
      ->group(g);
  cmd->add_option("--retime-ms", a.opts.retime_ms,
                  "re-time each elite under its own sustained load: this many ms of launches (flushes included) "
                  "before sampling as long again, so it is ranked at the clocks a long run settles to (default 200; "
                  "0: time as the search does)")
      ->check(CLI::Range(0.0, 60000.0))
      ->group(g);
}

void add_after_options(CLI::App* cmd, RunArgs& a) {
  const char* g = "Gates, output and what follows the search";
  cmd->add_option("--sanitize", a.opts.sanitize,
                  "compute-sanitizer gate (the spec's [gates] sanitize tools, on the check shapes): none, elites "
                  "(each elite once before the final re-timing; a finding drops it and the next moves up) or all "
                  "(every correct trial). Default: elites where compute-sanitizer is installed")
      ->check(CLI::IsMember({"none", "elites", "all"}))
      ->group(g);
  cmd->add_flag("-q,--quiet", a.opts.quiet, "no per-trial or progress lines; the run's header and summary remain")
      ->group(g);
  cmd->add_option("--baselines", a.opts.baselines,
                  "after the search, measure the reference kernel and the spec's [[baseline]] vendor kernels "
                  "(cuBLASLt, cuDNN/flash through PyTorch) on this GPU with the elites' timing: all (default), none, "
                  "or names (e.g. cublaslt,reference); a library not installed is skipped with the reason")
      ->group(g);
  cmd->add_option("--profile", a.profile_top,
                  "at the end, Nsight Compute on the top N elites, the default config and the baselines measured, as "
                  "`evotune profile --baseline` (needs ncu; default 0: none)")
      ->check(CLI::Range(0, 100))
      ->group(g);
}

// The run itself: the options as given, the tuning, then --profile.
int run_tuning(const Context& ctx, const RunArgs& a, const std::set<std::string>& given) {
  TuneOptions o = a.opts;
  o.given = given;
  o.db_path = ctx.db_path;
  o.command_line = ctx.command_line;
  o.problems = a.shapes;
  o.problems.insert(o.problems.end(), a.named.begin(), a.named.end());
  if (!a.dtype.empty()) o.dtype = a.dtype;
  if (a.no_flush) o.timing.flush_l2 = false;
  if (!a.resume.empty()) o.resume_run = parse_run_ref(a.resume, ctx.db_path);
  TuneResult r = tune(o, std::cout);
  if (r.interrupted) return kExitInterrupted;
  if (r.evaluated_for_rank0) return kExitOk;
  if (a.profile_top > 0) {
    ProfileOptions po;
    po.db_path = ctx.db_path;
    po.run_id = r.run.id;
    po.top = a.profile_top;
    po.baselines = true;
    po.exe = o.worker_exe;
    profile_run(po, std::cout);
  }
  return kExitOk;
}

}  // namespace

void add_run_command(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Tune a kernel on the GPU (or --compile-only without one)");
  cmd->footer(
      "\nExamples:\n"
      "  evotune run --kernel sdpa_fwd --shape 2,8,512,64 --dtype fp16 --budget 128 --elites 6\n"
      "  evotune run --kernel gemm --problem M=4096,N=4096,K=4096 --dtype bf16 --strategy random\n"
      "  evotune run --kernel examples/transpose/spec.toml --shape 4096,4096 --budget 32\n"
      "  evotune run --kernel gemm --shape 4096,4096,4096 --compile-only --arch sm_90a --budget 16\n"
      "  evotune run --resume 7          # continue run 7 after an interruption\n"
      "  evotune run --resume 7 --budget 500   # extend run 7 to 500 trials in all\n"
      "  evotune run --kernel gemm --replay tests/data/gemm_h200.json --budget 128   # no GPU needed\n"
      "  mpirun -np 5 --bind-to none evotune run --kernel gemm --shape 4096,4096,4096 --gpus all   # hosts, MPI build\n\n"
      "Each trial passes the gates in order: constraints (free) -> NVRTC compile -> resources\n"
      "(registers, shared memory, spills) -> correctness against the reference -> latency.\n"
      "Ctrl-C records the trial in hand and stops; --resume continues.");
  add_problem_options(cmd, *args);
  add_search_options(cmd, *args);
  add_where_options(cmd, *args);
  add_timing_options(cmd, *args);
  add_after_options(cmd, *args);
  cmd->callback([&ctx, cmd, args] {
    std::set<std::string> given;  // (--resume checks these against the run)
    for (const CLI::Option* opt : cmd->get_options())
      if (opt->count() > 0) given.insert(opt->get_name());
    ctx.action = [&ctx, args, given] { return run_tuning(ctx, *args, given); };
  });
}

void add_profile_command(CLI::App& app, Context& ctx) {
  auto run = std::make_shared<std::string>();
  auto opts = std::make_shared<ProfileOptions>();
  auto no_default = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "profile",
      "Nsight Compute on a run's top elites, default config and (--baseline) baselines (duration, SM and tensor-pipe "
      "use, occupancy, DRAM, L2 hit rate, resources, warp stalls), stored for `report` (needs ncu and a GPU)");
  cmd->add_option("run", *run, "run id, or 'last'")->required();
  cmd->add_option("--top", opts->top, "elites to profile, best first (default 3)")->check(CLI::Range(1, 100));
  cmd->add_flag("--no-default", *no_default, "leave the template's default config out");
  cmd->add_flag("--baseline", opts->baselines,
                "the run's baselines measured ok too: the reference kernel and the vendor libraries' kernels (one "
                "call each, measured again on its problem; the longest kernel of the call is stored)");
  cmd->add_option("--timeout", opts->timeout_s, "seconds one trial may take under ncu (default 600)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reports", opts->reports_dir,
                  "also keep a full Nsight Compute report of each trial and baseline in this directory "
                  "(run<R>-trial<N>.ncu-rep, run<R>-<baseline>-p<P>.ncu-rep: every section and the warp stalls "
                  "sampled per SASS instruction; ncu replays each kernel some 40 times for one)");
  cmd->footer(
      "\nEach trial is evaluated once more by this binary under ncu, which profiles the first launch of each of the "
      "run's problems in the timed series (caches flushed, the GPU's own clocks). ncu is looked for in $EVOTUNE_NCU, "
      "PATH, $CUDA_HOME/bin and /usr/local/cuda/bin; without it, or without access to the GPU's counters, the command "
      "exits 5 and changes nothing.\n\nExample: evotune profile last --top 3 --baseline && evotune report last -o "
      "reports/summary.md\n         evotune profile last --top 1 --baseline --reports ncu/   (then: ncu-ui "
      "ncu/run1-trial5.ncu-rep)");
  cmd->callback([&ctx, run, opts, no_default] {
    ctx.action = [&ctx, run, opts, no_default] {
      ProfileOptions o = *opts;
      o.db_path = ctx.db_path;
      o.run_id = parse_run_ref(*run, ctx.db_path);
      o.with_default = !*no_default;
      profile_run(o, std::cout);
      return kExitOk;
    };
  });
}

}  // namespace evotune
