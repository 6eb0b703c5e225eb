// The MPI build: one job of ranks over MPI_COMM_WORLD. Every MPI call is made
// by the thread that joined (MPI_THREAD_FUNNELED). Sends are nonblocking, so
// two ranks sending each other a large message (a job's cubins, a staged
// config's) never wait on each other; their bytes are kept until MPI is done.
#include <mpi.h>

#include <chrono>
#include <list>
#include <thread>

#include "core/error.hpp"
#include "tune/cluster.hpp"

namespace evotune {

namespace {

constexpr int kTag = 7;

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw EngineError(std::string(call) + " failed: " + text);
}

}  // namespace

struct Cluster::Sends {
  struct Pending {
    std::string bytes;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  std::list<Pending> pending;

  // Forgets the sends MPI is done with.
  void reap() {
    for (auto it = pending.begin(); it != pending.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? pending.erase(it) : std::next(it);
    }
  }
};

Cluster::Cluster(int rank, int size) : rank_(rank), size_(size), sends_(std::make_unique<Sends>()) {}

std::unique_ptr<Cluster> Cluster::join() {
  if (launched_ranks() == 0) return nullptr;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (exceptions here), not as an abort of the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<Cluster>(new Cluster(rank, size));
}

Cluster::~Cluster() {
  // Sends still in flight are given a moment (the peer is reading them);
  // those a peer will never read (it stopped, or failed) are cancelled, so
  // that leaving the job does not wait for them.
  try {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!sends_->pending.empty() && std::chrono::steady_clock::now() < until) {
      sends_->reap();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } catch (...) {  // a failed send: nothing left to do but leave
  }
  for (Sends::Pending& p : sends_->pending) {
    MPI_Cancel(&p.request);
    MPI_Request_free(&p.request);
  }
  MPI_Finalize();
}

void Cluster::send(int to, const Message& m) {
  sends_->reap();
  Sends::Pending& p = sends_->pending.emplace_back();
  p.bytes = pack(m);
  check(MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, to, kTag, MPI_COMM_WORLD, &p.request),
        "MPI_Isend");
}

namespace {

Envelope receive_probed(const MPI_Status& st) {
  int bytes = 0;
  check(MPI_Get_count(&st, MPI_BYTE, &bytes), "MPI_Get_count");
  std::string buf(static_cast<size_t>(bytes), '\0');
  check(MPI_Recv(buf.data(), bytes, MPI_BYTE, st.MPI_SOURCE, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  return Envelope{st.MPI_SOURCE, unpack(buf)};
}

}  // namespace

std::optional<Envelope> Cluster::poll() {
  sends_->reap();
  int arrived = 0;
  MPI_Status st;
  check(MPI_Iprobe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &arrived, &st), "MPI_Iprobe");
  if (!arrived) return std::nullopt;
  return receive_probed(st);
}

Envelope Cluster::receive() {
  sends_->reap();
  MPI_Status st;
  check(MPI_Probe(MPI_ANY_SOURCE, kTag, MPI_COMM_WORLD, &st), "MPI_Probe");
  return receive_probed(st);
}

}  // namespace evotune
