// y = 2x, broken on purpose according to MODE (see spec.toml).
extern "C" __global__ void faulty(float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if MODE == 1
  y[i + (1 << 30)] = 2.0f * x[i];  // far outside any allocation
#elif MODE == 2
  if (i == 7) __trap();
  y[i] = 2.0f * x[i];
#elif MODE == 3
  // clock64() never goes backwards and the compiler cannot know that.
  long long start = clock64();
  while (clock64() >= start) {
  }
  y[i] = 2.0f * x[i];
#elif MODE == 4
  y[i] = (i == 5) ? __int_as_float(0x7fc00000) : 2.0f * x[i];
#elif MODE == 5
  this is not C++;
#elif MODE == 7
  y[i] = 2.0f * x[i];
  if (i == 3) x[i] = 0.0f;
#elif MODE == 8
  if (i % 1000 != 999) y[i] = 2.0f * x[i];
#elif MODE == 9
  y[i] = 2.0f * x[i] * 1.001f;
#else
  y[i] = 2.0f * x[i];
#endif
}
