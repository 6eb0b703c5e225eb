// The worker process (`evotune worker`) and its wire protocol. The tuner
// sends requests on one pipe and reads replies on another; each message is a
// JSON header plus binary blobs (cubins):
//   u32 magic 'EVTW' | u32 header bytes | u32 blob count | header |
//   (u64 blob bytes | blob)*
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace evotune {

struct Message {
  nlohmann::json header;
  std::vector<std::string> blobs;
};

// Throws EngineError when the pipe breaks.
void write_message(int fd, const Message& m);

enum class ReadStatus { ok, eof, timeout };
// Reads one whole message. timeout_ms < 0 waits forever; on timeout the
// stream position is undefined (the caller kills the peer).
ReadStatus read_message(int fd, Message& m, int timeout_ms);

// Serves requests until "quit" or EOF. Exit codes: 0 normal, 3 after a fault
// that poisoned the CUDA context (the tuner starts a new worker).
// `device` >= 0: create that device's context at once, while the tuner is
// still preparing the set-up (the set-up's own device is what counts).
int worker_main(int in_fd, int out_fd, int device = -1);

}  // namespace evotune
