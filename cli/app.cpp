#include "cli/app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "cli/tuner.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compile_service.hpp"
#include "engine/worker.hpp"
#include "store/store.hpp"

#ifndef EVOTUNE_VERSION
#define EVOTUNE_VERSION "0.0.0"
#endif

namespace evotune {

long long parse_run_ref(const std::string& text, const std::string& db_path) {
  if (text == "last") {
    Store s = Store::open(db_path, Store::Mode::read_only);
    long long id = s.last_run_id();
    if (id == 0) throw UsageError("no runs in " + db_path);
    return id;
  }
  auto v = parse_int(text);
  if (!v || *v <= 0) throw UsageError("'" + text + "' is not a run id (a positive integer, or 'last')");
  return *v;
}

namespace {

void on_sigint(int) {
  // First Ctrl-C: finish the trial in hand, record it, stop. Second: now.
  if (stop_requested().exchange(true)) std::_Exit(kExitInterrupted);
}

void add_worker_command(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("worker", "internal: evaluate candidates on a GPU for a tuning run");
  cmd->group("");  // hidden from --help
  static int in_fd = 0, out_fd = 1, device = -1;
  cmd->add_option("--in-fd", in_fd);
  cmd->add_option("--out-fd", out_fd);
  cmd->add_option("--device", device, "create this device's context before the set-up arrives");
  cmd->callback([&ctx] { ctx.action = [] { return worker_main(in_fd, out_fd, device); }; });

  auto* comp = app.add_subcommand("compile-worker", "internal: compile candidates with NVRTC for a tuning run");
  comp->group("");
  static bool prewarm = false;
  comp->add_option("--in-fd", in_fd);
  comp->add_option("--out-fd", out_fd);
  comp->add_flag("--prewarm", prewarm, "load NVRTC with a trivial compile before the first request");
  comp->callback([&ctx] { ctx.action = [] { return compile_worker_main(in_fd, out_fd, prewarm); }; });
}

}  // namespace

int cli_main(int argc, char** argv) {
  Context ctx;
  for (int i = 0; i < argc; ++i) ctx.command_line += (i ? " " : "") + std::string(argv[i]);
  const char* env_db = std::getenv("EVOTUNE_DB");
  ctx.db_path = env_db && *env_db ? env_db : "evotune.db";

  CLI::App app{
      "evotune: an evolutionary autotuner for CUDA kernels.\n\n"
      "Tunes a kernel template's parameters for your GPU and problem shapes: every candidate is\n"
      "compiled with NVRTC, gated on resources, verified against a reference on random inputs,\n"
      "then timed. Every trial is kept in SQLite; the winner exports as a header.\n\n"
      "  evotune kernels                                   built-in kernels\n"
      "  evotune run --kernel sdpa_fwd --shape 2,8,512,64  tune (needs a GPU)\n"
      "  evotune top last                                  the elite population\n"
      "  evotune export last -o best.h                     the winner as a header\n",
      "evotune"};
  app.set_version_flag("--version", EVOTUNE_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_option("--db", ctx.db_path, "SQLite database (env EVOTUNE_DB; default ./evotune.db)");
  app.add_flag("-v,--verbose", ctx.verbosity, "more output");

  add_kernels_command(app, ctx);
  add_run_command(app, ctx);
  add_query_commands(app, ctx);
  add_export_commands(app, ctx);
  add_worker_command(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  std::signal(SIGINT, on_sigint);
  // Diagnostics (-v, -vv) go to stderr with timestamps; results go to stdout.
  auto log = spdlog::stderr_color_mt("evotune");
  log->set_pattern("[%H:%M:%S.%e] %v");
  log->set_level(ctx.verbosity >= 2   ? spdlog::level::debug
                 : ctx.verbosity == 1 ? spdlog::level::info
                                      : spdlog::level::warn);
  spdlog::set_default_logger(log);
  try {
    return ctx.action ? ctx.action() : kExitOk;
  } catch (const UsageError& e) {
    std::cerr << "evotune: " << e.what() << "\n";
    return kExitUsage;
  } catch (const SpecError& e) {
    std::cerr << "evotune: spec error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const ExprError& e) {
    std::cerr << "evotune: " << e.what() << "\n";
    return kExitUsage;
  } catch (const StoreError& e) {
    std::cerr << "evotune: database error: " << e.what() << "\n";
    return kExitStore;
  } catch (const NoDeviceError& e) {
    std::cerr << "evotune: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const EngineError& e) {
    std::cerr << "evotune: " << e.what() << "\n";
    return kExitEngine;
  } catch (const std::exception& e) {
    std::cerr << "evotune: internal error: " << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace evotune
