#include "engine/device_info.hpp"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <climits>

#include "core/strings.hpp"
#include "engine/cuda_api.hpp"

namespace evotune {

namespace {

std::string format_uuid(const cudaUUID_t& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::string s = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    s += strfmt("%02x", b[i]);
  }
  return s;
}

}  // namespace

DeviceQuery query_devices() {
  DeviceQuery q;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    if (e == cudaErrorInsufficientDriver)
      q.reason = "no CUDA driver found (libcuda.so.1 missing or older than this build's CUDA runtime)";
    else if (e == cudaErrorNoDevice)
      q.reason = "the CUDA driver reports no device";
    else
      q.reason = cuda::error_text(e);
    return q;
  }
  if (count == 0) {
    q.reason = "the CUDA driver reports no device";
    return q;
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    DeviceInfo d;
    d.ordinal = i;
    d.name = p.name;
    d.uuid = format_uuid(p.uuid);
    d.cc = p.major * 10 + p.minor;
    d.num_sms = p.multiProcessorCount;
    d.l2_bytes = p.l2CacheSize;
    d.smem_optin = static_cast<long long>(p.sharedMemPerBlockOptin);
    d.mem_bytes = static_cast<long long>(p.totalGlobalMem);
    d.driver_version = drv;
    d.runtime_version = rt;
    q.devices.push_back(d);
  }
  if (q.devices.empty()) q.reason = "no CUDA device could be queried";
  return q;
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace evotune
