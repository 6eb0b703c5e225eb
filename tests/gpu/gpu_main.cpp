// GPU tests: skipped, with a message and CTest's skip code, where there is no
// CUDA device.
#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif

#include <cstdio>

#include "engine/device_info.hpp"

int main(int argc, char** argv) {
  evotune::DeviceQuery q = evotune::query_devices();
  if (q.devices.empty()) {
    std::printf("GPU tests SKIPPED: no CUDA device (%s)\n", q.reason.c_str());
    return 77;
  }
  std::printf("GPU tests on %s (sm_%d)\n", q.devices[0].name.c_str(), q.devices[0].cc);
  return Catch::Session().run(argc, argv);
}
