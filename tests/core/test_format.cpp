// Number formatting and element types: the digits, units and edge values
// every table, report and exported header shows.
#include <cmath>
#include <limits>

#include "core/dtype.hpp"
#include "core/format.hpp"
#include "core/peak.hpp"
#include "tests/catch.hpp"

using namespace evotune;

TEST_CASE("fmt_us keeps 3-4 significant digits and says '-' for no latency", "[format]") {
  CHECK(fmt_us(1.23456) == "1.235");
  CHECK(fmt_us(9.9994) == "9.999");
  CHECK(fmt_us(9.9996) == "10.000");  // rounds within its band, not into the next
  CHECK(fmt_us(18.427) == "18.43");
  CHECK(fmt_us(123.46) == "123.5");
  CHECK(fmt_us(99999.0) == "99999.0");
  CHECK(fmt_us(123456.0) == "1.235e+05");
  CHECK(fmt_us(0) == "-");
  CHECK(fmt_us(-1) == "-");
}

TEST_CASE("fmt_us_fixed has three decimals and the unit, n/a when not finite", "[format]") {
  CHECK(fmt_us_fixed(18.42) == "18.420 us");
  CHECK(fmt_us_fixed(0.0004) == "0.000 us");
  CHECK(fmt_us_fixed(1234567.8916) == "1234567.892 us");
  CHECK(fmt_us_fixed(std::numeric_limits<double>::quiet_NaN()) == "n/a");
  CHECK(fmt_us_fixed(std::numeric_limits<double>::infinity()) == "n/a");
}

TEST_CASE("ratios, errors and sizes", "[format]") {
  CHECK(fmt_ratio(1.234) == "1.23x");
  CHECK(fmt_ratio(1.235001) == "1.24x");
  CHECK(fmt_ratio(0) == "-");
  CHECK(fmt_sci(0.0031) == "3.1e-03");
  CHECK(fmt_sci(0) == "0.0e+00");
  CHECK(fmt_err(0.0123456) == "0.0123");
  CHECK(fmt_err(1234.5) == "1.23e+03");
  CHECK(fmt_err(std::nan("")) == "NaN");
  CHECK(fmt_kib(49152) == "48.0K");
  CHECK(fmt_kib(1000) == "1.0K");
  CHECK(fmt_kib(0) == "0.0K");
}

TEST_CASE("CUDA versions and compute capabilities read as major.minor", "[format]") {
  CHECK(cuda_version_string(13000) == "13.0");
  CHECK(cuda_version_string(12080) == "12.8");
  CHECK(cuda_version_string(12040) == "12.4");
  CHECK(cuda_version_string(0) == "unknown");  // none recorded (compile-only, no driver)
  CHECK(cc_string(90) == "9.0");
  CHECK(cc_string(86) == "8.6");
  CHECK(cc_string(0) == "unknown");
}

TEST_CASE("element sizes: elem is the run's dtype, the dtype's macro", "[format]") {
  CHECK(elem_bytes(ElemType::elem, Dtype::fp16) == 2);
  CHECK(elem_bytes(ElemType::elem, Dtype::bf16) == 2);
  CHECK(elem_bytes(ElemType::elem, Dtype::fp32) == 4);
  CHECK(elem_bytes(ElemType::u8, Dtype::fp32) == 1);
  CHECK(elem_bytes(ElemType::f16) == 2);
  CHECK(elem_bytes(ElemType::bf16) == 2);
  CHECK(elem_bytes(ElemType::f32) == 4);
  CHECK(elem_bytes(ElemType::i32) == 4);
  CHECK(elem_bytes(ElemType::u32) == 4);
  CHECK(elem_bytes(ElemType::u8) == 1);
  CHECK(elem_bytes(ElemType::e4m3) == 1);
  CHECK(elem_bytes(ElemType::e5m2, Dtype::bf16) == 1);
  CHECK(to_string(ElemType::e4m3) == "e4m3");
  CHECK(to_string(ElemType::e5m2) == "e5m2");
  CHECK(resolve_elem(ElemType::elem, Dtype::bf16) == ElemType::bf16);
  CHECK(resolve_elem(ElemType::i32, Dtype::bf16) == ElemType::i32);
  CHECK(std::string(dtype_macro(Dtype::fp16)) == "EVOTUNE_DTYPE_FP16");
  CHECK(std::string(dtype_macro(Dtype::bf16)) == "EVOTUNE_DTYPE_BF16");
  CHECK(std::string(dtype_macro(Dtype::fp32)) == "EVOTUNE_DTYPE_FP32");
  CHECK(dtype_bytes(parse_dtype("bfloat16")) == 2);
}

TEST_CASE("peak rates: known models by a whole word of CUDA's name, per dtype, unknown ones have none", "[format]") {
  CHECK(peak_tflops("NVIDIA H100 80GB HBM3", "bf16").tflops == 989.4);
  CHECK(peak_tflops("NVIDIA H100 PCIe", "fp16").tflops == 756.5);  // not taken for the SXM part
  CHECK(peak_tflops("NVIDIA H200", "fp16").tflops == 989.4);
  CHECK(peak_tflops("NVIDIA H200", "fp32").tflops == 66.9);
  CHECK(peak_tflops("NVIDIA L4", "fp16").tflops == 121.0);
  CHECK(peak_tflops("NVIDIA L40S", "fp16").tflops == 362.1);  // "L4" is not a word of "L40S"
  CHECK(peak_tflops("NVIDIA A100-SXM4-80GB", "bf16").tflops == 312.0);
  CHECK(peak_tflops("NVIDIA H200", "bf16").what.find("H200") != std::string::npos);
  CHECK(peak_tflops("NVIDIA GeForce RTX 4090", "fp16").tflops == 0);
  CHECK(peak_tflops("synthetic", "fp16").tflops == 0);
  CHECK(peak_tflops("NVIDIA H200", "int4").tflops == 0);
}
