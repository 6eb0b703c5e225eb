// CUDA handles. The runtime is linked statically and the driver API is
// reached through cudaGetDriverEntryPointByVersion, so the binary starts on a
// machine without libcuda; the first call that needs a GPU throws
// NoDeviceError there. One RAII class per handle: non-copyable, movable,
// destructors never throw.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace evotune::cuda {

// The driver functions evotune uses, resolved once.
struct DriverApi {
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) funcGetAttribute = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuLaunchKernelEx) launchKernelEx = nullptr;
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled = nullptr;
};

// Throws NoDeviceError when no driver is present.
const DriverApi& driver();

std::string error_text(cudaError_t e);  // "cudaErrorIllegalAddress: an illegal memory access..."
std::string error_text(CUresult r);
// Throws EngineError naming `what` when e is not success.
void check(cudaError_t e, const char* what);
void check(CUresult r, const char* what);

// Errors after which the context is unusable: the process must be replaced.
bool is_sticky(cudaError_t e);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// A loaded cubin.
class Module {
 public:
  Module() = default;
  // Loads the cubin; a bad image throws EngineError carrying the driver error.
  explicit Module(const std::string& cubin);
  ~Module();
  Module(Module&& o) noexcept : mod_(std::exchange(o.mod_, nullptr)) {}
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // Throws EngineError when the module has no such kernel.
  CUfunction function(const std::string& entry) const;

 private:
  CUmodule mod_ = nullptr;
};

}  // namespace evotune::cuda
