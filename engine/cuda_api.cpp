#include "engine/cuda_api.hpp"

#include <mutex>

#include "core/error.hpp"

namespace evotune::cuda {

namespace {

template <typename F>
void resolve(const char* name, F& fn, bool required) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &status);
  if (e != cudaSuccess || status != cudaDriverEntryPointSuccess || p == nullptr) {
    if (required)
      throw NoDeviceError(std::string("CUDA driver function ") + name + " is unavailable: " + error_text(e));
    return;
  }
  fn = reinterpret_cast<F>(p);
}

}  // namespace

const DriverApi& driver() {
  static DriverApi api;
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    try {
      int n = 0;
      cudaError_t e = cudaGetDeviceCount(&n);
      if (e != cudaSuccess) throw NoDeviceError("no CUDA device: " + error_text(e));
      resolve("cuModuleLoadData", api.moduleLoadData, true);
      resolve("cuModuleUnload", api.moduleUnload, true);
      resolve("cuModuleGetFunction", api.moduleGetFunction, true);
      resolve("cuFuncSetAttribute", api.funcSetAttribute, true);
      resolve("cuFuncGetAttribute", api.funcGetAttribute, true);
      resolve("cuLaunchKernel", api.launchKernel, true);
      resolve("cuLaunchKernelEx", api.launchKernelEx, true);
      resolve("cuGetErrorName", api.getErrorName, true);
      resolve("cuGetErrorString", api.getErrorString, true);
      resolve("cuTensorMapEncodeTiled", api.tensorMapEncodeTiled, false);
    } catch (const std::exception& ex) {
      failure = ex.what();
    }
  });
  if (!failure.empty()) throw NoDeviceError(failure);
  return api;
}

std::string error_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string error_text(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  try {
    const DriverApi& d = driver();
    d.getErrorName(r, &name);
    d.getErrorString(r, &text);
  } catch (const std::exception&) {
  }
  return std::string(name ? name : "CUDA_ERROR_" + std::to_string(static_cast<int>(r))) + ": " +
         (text ? text : "unknown");
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw EngineError(std::string(what) + ": " + error_text(e));
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) throw EngineError(std::string(what) + ": " + error_text(r));
}

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  check(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

Stream::Stream() {
  check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreate");
}
Stream::~Stream() {
  if (s_) cudaStreamDestroy(s_);
}

Event::Event() {
  check(cudaEventCreate(&e_), "cudaEventCreate");
}
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}

Module::Module(const std::string& cubin) {
  check(driver().moduleLoadData(&mod_, cubin.data()), "cuModuleLoadData");
}

CUfunction Module::function(const std::string& entry) const {
  CUfunction fn = nullptr;
  CUresult r = driver().moduleGetFunction(&fn, mod_, entry.c_str());
  if (r != CUDA_SUCCESS) throw EngineError("cuModuleGetFunction(" + entry + "): " + error_text(r));
  return fn;
}

Module::~Module() {
  if (mod_) {
    try {
      driver().moduleUnload(mod_);
    } catch (...) {
    }
  }
}

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    if (mod_) {
      try {
        driver().moduleUnload(mod_);
      } catch (...) {
      }
    }
    mod_ = std::exchange(o.mod_, nullptr);
  }
  return *this;
}

}  // namespace evotune::cuda
