#include "core/dtype.hpp"

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

std::string to_string(Dtype d) {
  switch (d) {
    case Dtype::fp16:
      return "fp16";
    case Dtype::bf16:
      return "bf16";
    case Dtype::fp32:
      return "fp32";
  }
  return "?";
}

Dtype parse_dtype(const std::string& s) {
  std::string t = to_lower(s);
  if (t == "fp16" || t == "f16" || t == "half" || t == "float16") return Dtype::fp16;
  if (t == "bf16" || t == "bfloat16") return Dtype::bf16;
  if (t == "fp32" || t == "f32" || t == "float" || t == "float32") return Dtype::fp32;
  throw UsageError("unknown dtype '" + s + "' (expected fp16, bf16 or fp32)");
}

int dtype_bytes(Dtype d) {
  return d == Dtype::fp32 ? 4 : 2;
}

const char* dtype_macro(Dtype d) {
  switch (d) {
    case Dtype::fp16:
      return "EVOTUNE_DTYPE_FP16";
    case Dtype::bf16:
      return "EVOTUNE_DTYPE_BF16";
    case Dtype::fp32:
      return "EVOTUNE_DTYPE_FP32";
  }
  return "EVOTUNE_DTYPE_FP32";
}

std::string to_string(ElemType t) {
  switch (t) {
    case ElemType::elem:
      return "elem";
    case ElemType::f16:
      return "f16";
    case ElemType::bf16:
      return "bf16";
    case ElemType::f32:
      return "f32";
    case ElemType::i32:
      return "i32";
    case ElemType::u32:
      return "u32";
    case ElemType::u8:
      return "u8";
    case ElemType::e4m3:
      return "e4m3";
    case ElemType::e5m2:
      return "e5m2";
  }
  return "?";
}

ElemType resolve_elem(ElemType t, Dtype run_dtype) {
  if (t != ElemType::elem) return t;
  switch (run_dtype) {
    case Dtype::fp16:
      return ElemType::f16;
    case Dtype::bf16:
      return ElemType::bf16;
    case Dtype::fp32:
      return ElemType::f32;
  }
  return ElemType::f32;
}

int elem_bytes(ElemType t, Dtype run_dtype) {
  return elem_bytes(resolve_elem(t, run_dtype));
}

int elem_bytes(ElemType concrete) {
  switch (concrete) {
    case ElemType::f16:
    case ElemType::bf16:
      return 2;
    case ElemType::u8:
    case ElemType::e4m3:
    case ElemType::e5m2:
      return 1;
    default:
      return 4;
  }
}

}  // namespace evotune
