// The ranks of an MPI job (started by mpirun or srun) and the messages
// between them, the only place evotune touches MPI. A tuning run spread over
// hosts has rank 0 search and record, and every other rank evaluate
// (remote.hpp). Built without MPI (the CMake option EVOTUNE_MPI off), there
// is never a job to join: join() returns nothing, or refuses a process that
// a launcher started as one of several ranks.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/worker.hpp"

namespace evotune {

// A message from another rank: a JSON header and binary blobs (cubins), as
// between the tuner and its worker processes.
struct Envelope {
  int from = -1;
  Message message;
};

class Cluster {
 public:
  // Joins the MPI job this process was started in: nullptr where no launcher
  // started it. Throws UsageError where one did, as one of several ranks, and
  // this build has no MPI; EngineError where MPI fails to start.
  static std::unique_ptr<Cluster> join();

  // Leaves the job (MPI_Finalize); never throws.
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Sends `m` to rank `to`; returns once the message is on its way.
  void send(int to, const Message& m);
  // A message that has arrived from any rank, if one has.
  std::optional<Envelope> poll();
  // Waits for the next message from any rank.
  Envelope receive();

 private:
  struct Sends;  // messages sent, until MPI is done with their bytes
  Cluster(int rank, int size);

  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<Sends> sends_;
};

// A message as bytes and back (MPI carries bytes); unpack throws EngineError
// on bytes that are not a message.
std::string pack(const Message& m);
Message unpack(const std::string& bytes);

// The size of the job a launcher started this process in, from its
// environment (mpirun's OMPI_COMM_WORLD_SIZE, Slurm's PMI or PMIx); 0 when
// none did.
int launched_ranks();

}  // namespace evotune
