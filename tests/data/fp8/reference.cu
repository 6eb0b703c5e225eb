// The bits decoded by hand, not by cuda_fp8.h: an e4m3 byte is a sign, a
// 4-bit exponent (bias 7) and 3 mantissa bits; exponent 0 is subnormal
// (m/8 · 2^-6). The outputs are references in f32, as for every kernel.
__device__ float e4m3_value(unsigned char b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float mag = e == 0 ? ldexpf(m / 8.0f, -6) : ldexpf(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -mag : mag;
}

// e5m2 keeps the top 2 of e4m3's 3 mantissa bits, rounded to nearest even;
// every e4m3 value is within e5m2's range.
__device__ float to_e5m2(float v) {
  if (v == 0.0f) return v;
  int ex;
  frexpf(fabsf(v), &ex);                             // |v| = f · 2^ex, f in [0.5, 1)
  const float ulp = ldexpf(1.0f, max(ex - 3, -16));  // 2 mantissa bits; subnormals below 2^-14
  return rintf(v / ulp) * ulp;
}

extern "C" __global__ void fp8_copy_reference(const unsigned char* x, float* y, float* z, float* w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = e4m3_value(x[i]);
  y[i] = v;
  z[i] = v;
  w[i] = to_e5m2(v);
}
