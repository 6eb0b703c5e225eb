// A tuning run spread over the ranks of an MPI job (cluster.hpp): rank 0
// searches and owns the database; every other rank evaluates, on its own
// host's GPUs with its own CPUs compiling (and its own compile cache), or
// from a replay dataset standing in for them.
//
// RemoteEvaluator is rank 0's side. A config is staged on the rank with the
// least busy compile processes; the staged job (its cubins included) runs on
// whichever GPU frees, on any rank: slots are numbered rank by rank. So
// every host's CPUs compile and every GPU takes any compiled candidate, as
// the search loop expects of one host. In a replay it is the source of a
// ReplayEvaluator, whose simulated clock orders the results: the trials for
// a seed are those of one process simulating as many GPUs.
//
// serve_rank is every other rank's side: it opens what rank 0's plan says
// and reports its host and GPU (rank 0 refuses a job whose GPUs differ: a
// run tunes for one GPU model), then evaluates what rank 0 sends until rank
// 0 says stop. Its GPUs are set up once the first configs are compiling, so
// that both overlap, as in one process; a set-up that fails is reported to
// rank 0, which ends the run with the rank's error.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tune/cluster.hpp"
#include "tune/evaluator.hpp"
#include "tune/options.hpp"
#include "tune/plan.hpp"

namespace evotune {

class RemoteEvaluator : public Evaluator {
 public:
  // Sends every other rank the plan and waits for each to report. Throws
  // UsageError where a rank's GPU model differs from this plan's (or the
  // plan gates every trial on compute-sanitizer, which ranks do not),
  // EngineError where a rank could not set up.
  RemoteEvaluator(const TunePlan& plan, Cluster& cluster);

  int slots() const override { return slots_; }
  int compile_slots() const override { return compile_slots_; }
  int gpus() const override { return gpus_; }
  std::future<Staged> stage(const Config& c, Wakeup& wake) override;
  std::future<Trial> run(Job job, int slot, const Limits& limits, Wakeup& wake) override;
  double elapsed() const override;
  double gpu_busy_s() const override { return gpu_busy_s_; }
  // Receives the ranks' results until one completes something after `seen`.
  void wait(Wakeup& wake, uint64_t seen) override;

 private:
  struct Rank {
    int rank = 0;
    std::string host;
    int slots = 0;
    int compile_slots = 0;
    int staging = 0;  // configs sent to it to stage, not yet back
  };

  void send_plan();
  void hear_ranks();
  void receive(const Envelope& e, Wakeup& wake);
  const Rank& rank_of(int rank) const;

  const TunePlan& plan_;
  Cluster& cluster_;
  std::vector<Rank> ranks_;
  int slots_ = 0, compile_slots_ = 0, gpus_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::promise<Staged>> stagings_;  // requests sent, by id
  std::map<uint64_t, std::promise<Trial>> runs_;       // requests sent, by id (one sequence with stagings_)
  double gpu_busy_s_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// A staged job in a message to or from a rank: the trial so far and the
// request in the header, the cubins as blobs.
void put_job(Message& m, const Job& job);
Job get_job(const Message& m);

// Every rank but 0: evaluates for rank 0 until it says stop. `options` are
// this rank's command line; rank 0's plan names the kernel, problems and
// dataset (a resumed run's).
void serve_rank(Cluster& cluster, TuneOptions options);

// Rank 0: tells every other rank to stop when the run is over, however it
// ends (a refusal before it starts included). Never throws.
class RanksStop {
 public:
  explicit RanksStop(Cluster& cluster) : cluster_(cluster) {}
  ~RanksStop();
  RanksStop(const RanksStop&) = delete;
  RanksStop& operator=(const RanksStop&) = delete;

 private:
  Cluster& cluster_;
};

}  // namespace evotune
