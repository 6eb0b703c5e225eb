#include "tune/evaluator.hpp"

#include <chrono>

namespace evotune {

void Wakeup::notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++events_;
  }
  cv_.notify_all();
}

uint64_t Wakeup::events() {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

void Wakeup::wait(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return events_ != seen; });
}

}  // namespace evotune
