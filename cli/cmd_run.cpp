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

void add_run_command(CLI::App& app, Context& ctx) {
  auto opts = std::make_shared<TuneOptions>();
  auto shapes = std::make_shared<std::vector<std::string>>();
  auto named = std::make_shared<std::vector<std::string>>();
  auto dtype = std::make_shared<std::string>();
  auto resume = std::make_shared<std::string>();
  auto no_flush = std::make_shared<bool>(false);

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
  cmd->add_option("-k,--kernel", opts->kernel, "built-in kernel name (see `evotune kernels`) or a spec file path");
  cmd->add_option("-s,--shape", *shapes, "problem dims in the kernel's order, e.g. 2,8,512,64 (repeatable)");
  cmd->add_option("-p,--problem", *named, "problem by name, e.g. B=2,H=8,S=512,D=64 (repeatable)");
  cmd->add_option("-d,--dtype", *dtype, "element type: fp16, bf16 (default: the kernel's first)");
  cmd->add_option("-b,--budget", opts->budget,
                  "trials to evaluate (constraint rejections are free); with --resume, the run's new total")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("-e,--elites", opts->elites, "size K of the elite population kept across generations")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", opts->seed, "random seed: same seed and results, same trials")
      ->check(CLI::Range(uint64_t{0}, uint64_t{INT64_MAX}).description("< 2^63"));  // SQLite stores it signed
  cmd->add_option("--strategy", opts->strategy, "search strategy")
      ->check(CLI::IsMember({"evo", "random", "exhaustive"}));
  cmd->add_option("--config", opts->seed_configs,
                  "a config to evaluate first, e.g. BLOCK_M=64,STAGES=4 (others: defaults; repeatable)");
  cmd->add_flag("--compile-only", opts->compile_only, "compile and gate configs without a GPU (needs --arch there)");
  cmd->add_option("--arch", opts->arch, "target for --compile-only, e.g. sm_90a, sm_80");
  cmd->add_option("-j,--compile-threads", opts->compile_threads, "NVRTC compile threads (default: one per core)")
      ->check(positive_number());
  cmd->add_option("--compile-timeout", opts->compile_timeout_s, "seconds before a compile is cut off (compile_error)")
      ->check(positive_number());
  cmd->add_option("--device", opts->device, "CUDA device ordinal")->check(non_negative_number());
  cmd->add_option("--gpus", opts->gpus,
                  "evaluate on several GPUs at once: all, or ordinals like 0,1; with --replay, N simulated GPUs");
  cmd->add_option("--replay", opts->replay_path,
                  "evaluate configs from a dataset (`evotune export RUN --format dataset`) instead of a GPU");
  cmd->add_flag("--replay-warm-cache", opts->replay_warm_cache, "with --replay: charge no compile time");
  cmd->add_option("--retime", opts->retime_rounds, "rounds of interleaved re-timing of the final elites (0: none)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--retime-ms", opts->retime_ms,
                  "re-time each elite under its own sustained load: this many ms of launches (flushes included) "
                  "before sampling as long again, so it is ranked at the clocks a long run settles to (default 200; "
                  "0: time as the search does)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--timeout", opts->timeout_floor_s, "minimum seconds a trial may take on the GPU before it is killed")
      ->check(positive_number());
  cmd->add_option("--abort-factor", opts->abort_factor,
                  "stop timing a candidate whose p50 exceeds this many times the best's (0: never)")
      ->check(non_negative_number());
  cmd->add_option("--sustain-ms", opts->timing.sustain_ms,
                  "warm-up per problem: this many ms of the timed loop itself (flushes included), so that each "
                  "candidate is timed at the clocks its sustained load settles to (0: the count-based --warmup-ms)")
      ->check(CLI::Range(0.0, 60000.0));
  cmd->add_option("--warmup-ms", opts->timing.warmup_ms,
                  "with --sustain-ms 0: warm-up launches per problem, by time, when the GPU has been idle")
      ->check(non_negative_number());
  cmd->add_option("--busy-warmup-ms", opts->timing.warmup_busy_ms,
                  "with --sustain-ms 0: warm-up while the GPU is kept busy (the previous evaluation ended <200 ms ago)")
      ->check(non_negative_number());
  cmd->add_option("--samples", opts->timing.max_samples, "most timed launches per problem")
      ->check(CLI::Range(3, 100000));
  cmd->add_flag("--no-flush", *no_flush, "do not flush L2 before each timed launch (hot-cache timing)");
  cmd->add_flag("!--no-cache", opts->use_cache, "do not use the on-disk compile cache");
  cmd->add_option("--resume", *resume,
                  "continue run RUN (id or 'last') with its remaining budget; options that define the run (kernel, "
                  "problems, dtype, strategy, seed, elites) may be left out, and must agree with it if given");
  cmd->add_option("--window", opts->window,
                  "configs in flight (compiling ahead of the GPU); default: 8, growing by one per result to as many "
                  "as keep the slower of compiling and the GPU busy, from the measured times, at most 2x threads")
      ->check(positive_number());
  cmd->add_option("--sanitize", opts->sanitize,
                  "compute-sanitizer gate (the spec's [gates] sanitize tools, on the check shapes): none, elites "
                  "(each elite once before the final re-timing; a finding drops it and the next moves up) or all "
                  "(every correct trial). Default: elites where compute-sanitizer is installed")
      ->check(CLI::IsMember({"none", "elites", "all"}));
  cmd->add_flag("-q,--quiet", opts->quiet, "no per-trial or progress lines; the run's header and summary remain");
  cmd->add_option("--baselines", opts->baselines,
                  "after the search, measure the reference kernel and the spec's [[baseline]] vendor kernels "
                  "(cuBLASLt, cuDNN/flash through PyTorch) on this GPU with the elites' timing: all (default), none, "
                  "or names (e.g. cublaslt,reference); a library not installed is skipped with the reason");
  auto profile_top = std::make_shared<int>(0);
  cmd->add_option("--profile", *profile_top,
                  "at the end, Nsight Compute on the top N elites, the default config and the baselines measured, as "
                  "`evotune profile --baseline` (needs ncu; default 0: none)")
      ->check(CLI::Range(0, 100));
  cmd->callback([&ctx, cmd, opts, shapes, named, dtype, resume, no_flush, profile_top] {
    std::set<std::string> given;
    for (const CLI::Option* opt : cmd->get_options())
      if (opt->count() > 0) given.insert(opt->get_name());
    ctx.action = [&ctx, opts, shapes, named, dtype, resume, no_flush, given, profile_top] {
      TuneOptions o = *opts;
      o.given = given;
      o.db_path = ctx.db_path;
      o.command_line = ctx.command_line;
      o.problems = *shapes;
      o.problems.insert(o.problems.end(), named->begin(), named->end());
      if (!dtype->empty()) o.dtype = *dtype;
      if (*no_flush) o.timing.flush_l2 = false;
      if (!resume->empty()) o.resume_run = parse_run_ref(*resume, ctx.db_path);
      TuneResult r = tune(o, std::cout);
      if (r.interrupted) return kExitInterrupted;
      if (r.evaluated_for_rank0) return kExitOk;
      if (*profile_top > 0) {
        ProfileOptions po;
        po.db_path = ctx.db_path;
        po.run_id = r.run.id;
        po.top = *profile_top;
        po.baselines = true;
        po.exe = o.worker_exe;
        profile_run(po, std::cout);
      }
      return kExitOk;
    };
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
  cmd->footer(
      "\nEach trial is evaluated once more by this binary under ncu, which profiles the first launch of each of the "
      "run's problems in the timed series (caches flushed, the GPU's own clocks). ncu is looked for in $EVOTUNE_NCU, "
      "PATH, $CUDA_HOME/bin and /usr/local/cuda/bin; without it, or without access to the GPU's counters, the command "
      "exits 5 and changes nothing.\n\nExample: evotune profile last --top 3 --baseline && evotune report last -o "
      "reports/summary.md");
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
