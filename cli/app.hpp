// The command-line interface: subcommands registered by the cmd_*.cpp files,
// one top-level catch that maps errors to messages and exit codes.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace evotune {

// Exit codes, documented in README.md.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // an unexpected internal error
  kExitUsage = 2,     // bad command line, unknown kernel, malformed shape or spec
  kExitStore = 3,     // the database cannot be opened, read or written
  kExitNoDevice = 4,  // the command needs a GPU and there is none
  kExitEngine = 5,    // CUDA/NVRTC/worker failure that is not a candidate's
  kExitInterrupted = 130,
};

struct Context {
  std::string db_path;
  bool json = false;
  int verbosity = 0;
  std::string command_line;
  // Subcommands set this; main runs it after parsing.
  std::function<int()> action;
};

void add_run_command(CLI::App& app, Context& ctx);
void add_profile_command(CLI::App& app, Context& ctx);
void add_kernels_command(CLI::App& app, Context& ctx);
void add_query_commands(CLI::App& app, Context& ctx);   // runs, top, trials
void add_export_commands(CLI::App& app, Context& ctx);  // export, report

// Reading commands take a database that does not exist yet for one with no
// runs, and create nothing.
bool no_database_yet(const std::string& db_path);

// Parses a run reference: a run id, or "last". Throws UsageError for a run
// the database cannot have (none yet, or none at all).
long long parse_run_ref(const std::string& text, const std::string& db_path);

// Checks for numeric options, with messages that say what was wrong.
CLI::Validator positive_number();      // > 0
CLI::Validator non_negative_number();  // >= 0

// What this process says when it is terminated (SIGTERM: a job scheduler
// or mpirun ending every rank because one died) once a run is open: that
// the run keeps its trials and how to continue it.
void set_termination_note(long long run_id);

int cli_main(int argc, char** argv);

}  // namespace evotune
