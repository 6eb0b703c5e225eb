// Error types shared by every folder. Expected candidate failures (a config
// that does not compile, a kernel that computes the wrong answer) are data, a
// trial status; these exceptions are for the tool's own failures and bad input.
// cli/main.cpp maps each to an exit code.
#pragma once

#include <stdexcept>
#include <string>

namespace evotune {

// Bad input from the user: unknown kernel, malformed shape, bad option value.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A malformed spec file or a spec expression that fails.
struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A malformed or failing expression; SpecError wraps it with the field name.
struct ExprError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The database could not be opened, read or written.
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CUDA, NVRTC or the worker process failed for a reason that is not the
// candidate's fault (no device, out of memory in set-up, lost worker).
struct EngineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// No CUDA device or driver on this machine.
struct NoDeviceError : EngineError {
  using EngineError::EngineError;
};

}  // namespace evotune
