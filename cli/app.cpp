#include "cli/app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/console_progress.hpp"
#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/compile_service.hpp"
#include "engine/worker.hpp"
#include "store/store.hpp"

#ifndef EVOTUNE_VERSION
#define EVOTUNE_VERSION "0.0.0"
#endif

namespace evotune {

bool no_database_yet(const std::string& db_path) {
  std::error_code ec;
  return !std::filesystem::exists(db_path, ec) && !ec;
}

long long parse_run_ref(const std::string& text, const std::string& db_path) {
  auto v = parse_int(text);
  if (text != "last" && (!v || *v <= 0))
    throw UsageError("'" + text + "' is not a run id (a positive integer, or 'last')");
  const std::string none = "no runs yet in " + db_path + " (`evotune run` records them there)";
  if (no_database_yet(db_path)) throw UsageError(text == "last" ? none : "no run " + text + ": " + none);
  if (text != "last") return *v;
  long long id = Store::open(db_path, Store::Mode::read_only).last_run_id();
  if (id == 0) throw UsageError(none);
  return id;
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        return v > 0 ? "" : "'" + text + "' must be more than 0";
      },
      "POSITIVE");
}

CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(text, v)) return "'" + text + "' is not a number";
        return v >= 0 ? "" : "'" + text + "' must be 0 or more";
      },
      "NONNEGATIVE");
}

namespace {

// CLI11 reads integers with strtoll(text, 0): "010" is octal 8, "0x10" is 16,
// and "-1" for an unsigned option wraps around to 2^64-1.
CLI::Validator decimal_integer(bool is_unsigned) {
  return CLI::Validator(
      [is_unsigned](std::string& text) -> std::string {
        const size_t sign = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
        if (text.size() == sign || text.find_first_not_of("0123456789", sign) != std::string::npos)
          return "'" + text + "' is not a decimal integer";
        const size_t first = text.find_first_not_of('0', sign);
        const std::string digits = first == std::string::npos ? "0" : text.substr(first);
        const bool negative = text[0] == '-' && digits != "0";
        if (negative && is_unsigned) return "'" + text + "' is negative";
        text = (negative ? "-" : "") + digits;  // leading zeros dropped: never octal
        return "";
      },
      "");
}

// Every integer option of every command reads decimal only.
void read_integers_as_decimal(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (is_unsigned || type.rfind("INT", 0) == 0) opt->transform(decimal_integer(is_unsigned));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) read_integers_as_decimal(*sub);
}

void on_sigint(int) {
  // First Ctrl-C: finish the trial in hand, record it, stop. Second: now.
  if (stop_requested().exchange(true)) std::_Exit(kExitInterrupted);
}

// The termination note, written by the handler with write(2) only.
char g_note[256];
std::atomic<size_t> g_note_size{0};

void on_sigterm(int sig) {
  if (size_t n = g_note_size.load()) {
    ssize_t ignored = ::write(STDERR_FILENO, g_note, n);
    (void)ignored;
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
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

void set_termination_note(long long run_id) {
  const int n =
      std::snprintf(g_note, sizeof g_note,
                    "evotune: terminated; run %lld keeps every trial it recorded: `evotune run --resume %lld` "
                    "continues it (under MPI, with any number of ranks)\n",
                    run_id, run_id);
  g_note_size.store(n > 0 ? std::min(static_cast<size_t>(n), sizeof g_note - 1) : 0);
}

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
  add_profile_command(app, ctx);
  add_query_commands(app, ctx);
  add_export_commands(app, ctx);
  add_worker_command(app, ctx);
  read_integers_as_decimal(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    // CLI11 checks for a subcommand before it reports a word it did not know.
    const std::vector<std::string> extra = app.remaining();
    if (!app.get_subcommands().empty() || extra.empty() || extra.front().rfind('-', 0) == 0) {
      app.exit(e);
      return kExitUsage;
    }
    std::cerr << "evotune: unknown command '" << extra.front() << "' (see `evotune --help`)\n";
    return kExitUsage;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }

  std::signal(SIGINT, on_sigint);
  std::signal(SIGTERM, on_sigterm);
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
