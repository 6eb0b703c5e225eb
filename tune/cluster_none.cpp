// A build without MPI: there is never a job to join.
#include <stdexcept>

#include "core/error.hpp"
#include "tune/cluster.hpp"

namespace evotune {

struct Cluster::Sends {};

Cluster::Cluster(int rank, int size) : rank_(rank), size_(size) {}
Cluster::~Cluster() = default;

std::unique_ptr<Cluster> Cluster::join() {
  const int n = launched_ranks();
  if (n > 1)
    throw UsageError("started as one of " + std::to_string(n) +
                     " MPI ranks, but this evotune was built without MPI: build it with `scripts/bootstrap.sh --mpi` "
                     "(CMake option EVOTUNE_MPI=ON), or run it as one process");
  return nullptr;
}

void Cluster::send(int, const Message&) {
  throw std::logic_error("no MPI in this build");
}

std::optional<Envelope> Cluster::poll() {
  throw std::logic_error("no MPI in this build");
}

Envelope Cluster::receive() {
  throw std::logic_error("no MPI in this build");
}

}  // namespace evotune
