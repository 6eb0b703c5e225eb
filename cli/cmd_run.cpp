#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/app.hpp"
#include "cli/tuner.hpp"
#include "core/strings.hpp"
#include "store/store.hpp"

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
      "  evotune run --resume 7          # continue run 7 after an interruption\n\n"
      "Each trial passes the gates in order: constraints (free) -> NVRTC compile -> resources\n"
      "(registers, shared memory, spills) -> correctness against the reference -> latency.\n"
      "Ctrl-C records the trial in hand and stops; --resume continues.");
  cmd->add_option("-k,--kernel", opts->kernel, "built-in kernel name (see `evotune kernels`) or a spec file path");
  cmd->add_option("-s,--shape", *shapes, "problem dims in the kernel's order, e.g. 2,8,512,64 (repeatable)");
  cmd->add_option("-p,--problem", *named, "problem by name, e.g. B=2,H=8,S=512,D=64 (repeatable)");
  cmd->add_option("-d,--dtype", *dtype, "element type: fp16, bf16 (default: the kernel's first)");
  cmd->add_option("-b,--budget", opts->budget, "trials to evaluate (constraint rejections are free)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("-e,--elites", opts->elites, "size K of the elite population kept across generations")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", opts->seed, "random seed: same seed and results, same trials");
  cmd->add_option("--strategy", opts->strategy, "search strategy")->check(CLI::IsMember({"evo", "random", "exhaustive"}));
  cmd->add_option("--config", opts->seed_configs, "a config to evaluate first, e.g. BLOCK_M=64,BLOCK_N=64,... (repeatable)");
  cmd->add_flag("--compile-only", opts->compile_only, "compile and gate configs without a GPU (needs --arch there)");
  cmd->add_option("--arch", opts->arch, "target for --compile-only, e.g. sm_90a, sm_80");
  cmd->add_option("-j,--compile-threads", opts->compile_threads, "NVRTC compile threads (default: one per core)");
  cmd->add_option("--compile-timeout", opts->compile_timeout_s, "seconds before a compile is cut off (compile_error)");
  cmd->add_option("--device", opts->device, "CUDA device ordinal");
  cmd->add_option("--timeout", opts->timeout_floor_s, "minimum seconds a trial may take on the GPU before it is killed");
  cmd->add_option("--abort-factor", opts->abort_factor,
                  "stop timing a candidate whose p50 exceeds this many times the best's (0: never)");
  cmd->add_option("--warmup-ms", opts->timing.warmup_ms, "warm-up time per problem before sampling");
  cmd->add_option("--samples", opts->timing.max_samples, "most timed launches per problem")->check(CLI::Range(3, 100000));
  cmd->add_flag("--no-flush", *no_flush, "do not flush L2 before each timed launch (hot-cache timing)");
  cmd->add_flag("!--no-cache", opts->use_cache, "do not use the on-disk compile cache");
  cmd->add_option("--resume", *resume, "continue run RUN (id or 'last') with its remaining budget");
  cmd->add_option("--window", opts->window, "configs in flight (compiling ahead of the GPU); default 2x threads");
  cmd->add_flag("-q,--quiet", opts->quiet, "no per-trial progress lines");
  cmd->callback([&ctx, cmd, opts, shapes, named, dtype, resume, no_flush] {
    bool budget_given = cmd->count("--budget") > 0;
    ctx.action = [&ctx, opts, shapes, named, dtype, resume, no_flush, budget_given] {
      TuneOptions o = *opts;
      // A resumed run keeps its budget unless a larger one is asked for.
      if (!resume->empty() && !budget_given) o.budget = 0;
      o.db_path = ctx.db_path;
      o.command_line = ctx.command_line;
      o.problems = *shapes;
      o.problems.insert(o.problems.end(), named->begin(), named->end());
      if (!dtype->empty()) o.dtype = *dtype;
      if (*no_flush) o.timing.flush_l2 = false;
      if (!resume->empty()) o.resume_run = parse_run_ref(*resume, ctx.db_path);
      TuneResult r = tune(o, std::cout);
      return r.interrupted ? kExitInterrupted : kExitOk;
    };
  });
}

}  // namespace evotune
