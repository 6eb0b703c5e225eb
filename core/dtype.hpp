// Element types: a run's dtype (fp16, bf16, fp32) and the element type of a
// kernel's buffer, with their sizes, names and the macro a kernel reads to
// know the run's dtype. One place for them, so the spec, the engine's buffers
// and the exported header agree on every byte count.
#pragma once

#include <string>

namespace evotune {

enum class Dtype { fp16, bf16, fp32 };
std::string to_string(Dtype d);
Dtype parse_dtype(const std::string& s);  // throws UsageError
int dtype_bytes(Dtype d);
// "EVOTUNE_DTYPE_FP16": defined to 1 when a kernel is compiled for that dtype.
const char* dtype_macro(Dtype d);

// elem: the run's dtype. e4m3 and e5m2: the OCP 8-bit floats (CUDA's
// __nv_fp8_e4m3, __nv_fp8_e5m2), for FP8 kernels' inputs and outputs.
enum class ElemType { elem, f16, bf16, f32, i32, u32, u8, e4m3, e5m2 };
std::string to_string(ElemType t);
// The concrete element type of a buffer (elem resolved to the run's dtype).
ElemType resolve_elem(ElemType t, Dtype run_dtype);
int elem_bytes(ElemType t, Dtype run_dtype);
// Bytes of a concrete element type (an unresolved `elem` counts as 4).
int elem_bytes(ElemType concrete);

}  // namespace evotune
