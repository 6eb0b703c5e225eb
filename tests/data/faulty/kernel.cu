// y = 2x, broken on purpose according to MODE (see spec.toml).
extern "C" __global__ void faulty(float* x, float* y, float* state, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
#if MODE == 14
  __shared__ float staged[1024];
  staged[threadIdx.x] = i < n ? x[i] : 0.0f;
  // No barrier: reads a neighbour's slot that another warp may not have
  // written yet. The value never reaches the output.
  if (staged[(threadIdx.x + 32) % blockDim.x] == 1.0e30f) state[0] = 1.0f;
#endif
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
#elif MODE == 11
  y[i] = 2.0f * x[i];
  if (i == n - 1) y[n] = 0.0f;
#elif MODE == 12
  y[i] = 2.0f * x[i] + state[i];  // state starts at zero and is never reset
  state[i] = 1.0f;
#elif MODE == 15
  // Keeps its first answer in scratch and serves it from then on: right on
  // every launch over the same inputs, wrong on any other.
  // (The inputs are never zero, so neither is a kept answer.)
  if (state[i] == 0.0f) state[i] = 2.0f * x[i];
  y[i] = state[i];
#elif MODE == 13
  float past = i == n - 1 ? x[n] : 0.0f;
  y[i] = past == 1.0e30f ? 0.0f : 2.0f * x[i];
#else
  y[i] = 2.0f * x[i];
#endif
}
