// What CUDA devices this machine has. Works without a driver: the list is
// empty and `reason` says why.
#pragma once

#include <string>
#include <vector>

namespace evotune {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  std::string uuid;  // "GPU-xxxxxxxx-..."
  int cc = 0;        // 90
  int num_sms = 0;
  long long l2_bytes = 0;
  long long smem_optin = 0;  // max dynamic+static shared memory per block
  long long mem_bytes = 0;
  int driver_version = 0;  // e.g. 13000
  int runtime_version = 0;
};

struct DeviceQuery {
  std::vector<DeviceInfo> devices;
  std::string reason;  // why the list is empty
};

DeviceQuery query_devices();

// This machine's host name (what a trial records as the host its GPU is on).
std::string host_name();

}  // namespace evotune
