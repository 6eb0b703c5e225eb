// evotune built-in FP8 attention forward (Ada and Hopper, mma.sync):
// O = softmax(Q·Kᵀ·scale)·V with Q, K, V in e4m3 and per-tensor descale
// factors (the real values are q_descale·Q, k_descale·K, v_descale·V), softmax
// in fp32, O in the run's dtype (fp16 or bf16). sm_89 and newer.
//
// Problem. Q and O are [B, H, S, D], K and V [B, HKV, SKV, D], D innermost.
// Query head h reads key/value head h / (H / HKV) (grouped-query attention).
// The causal mask is aligned bottom-right, as FlashAttention's: query i sees
// keys j <= i + SKV - S; a query that sees no key gets O = 0.
//
// Design (FlashAttention-2 style, one CTA per BLOCK_M query rows of one head).
//  * Each of the WARPS warps owns M_TILES tiles of 16 query rows. Q (the CTA's
//    rows) is copied to shared memory once; K and V tiles of BLOCK_N keys
//    stream through a STAGES-deep cp.async ring (rows past S zero-filled).
//  * S = Q·Kᵀ is mma.sync m16n8k32 e4m3 with fp32 accumulators: A (Q) row-major
//    and B (K) "col" are both 4-byte words of a row of D bytes, read straight
//    from shared memory (rows padded by 16 bytes: no bank conflicts).
//  * The online softmax runs on the accumulators (exp2, the descales and the
//    softmax scale folded into one factor; row max and sum across the quad
//    of lanes sharing a row). P is quantized to e4m3 in registers, times 256
//    with P_SCALE=1 (P ≤ 1 would use only e4m3's lowest binades; the factor
//    is divided out at the end), and O += P·V is m16n8k32 e4m3 again.
//  * The accumulator of a key-column pair (2t, 2t+1) of 8 is not where the
//    A operand wants it (4 consecutive k per lane), so the keys of each 32-key
//    block take a fixed order in the k dimension: lane t's A slots 4t..4t+3
//    hold keys {2t, 2t+1, 8+2t, 9+2t} and slots 16+4t.. the same plus 16, the
//    lane's own accumulators. V is used in the same order: after each tile
//    lands, the CTA writes it transposed and permuted (Vt[d][slot] =
//    V[key(slot)][d]) with byte permutes, so a B operand is one 4-byte word.
//    This is the V transpose FP8's k-major operands need.
//  * P16=1 keeps P in 16 bits instead (fp16, m16n8k16 for P·V): V is then
//    written transposed as fp16 (e4m3 values are exact in fp16), keys in their
//    own order, since the 16-bit A layout is the accumulators' own.
//  * O is divided by the row sums, times v_descale (and 1/256), and stored.
//
// Tunables (spec.toml lists their values): BLOCK_N, WARPS, M_TILES, STAGES,
// Q_IN_REGS, P_SCALE, P16, MIN_BLOCKS. Problem: HEAD_DIM (64, 128, 256), IS_CAUSAL,
// FP8_DESCALE_PER_HEAD.

#include <cuda_fp8.h>

#include "evotune_ptx.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef IS_CAUSAL
#define IS_CAUSAL 0
#endif
#ifndef FP8_DESCALE_PER_HEAD
#define FP8_DESCALE_PER_HEAD 0  // 1: per (batch, key/value head) factors on the descales
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef M_TILES
#define M_TILES 1
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef Q_IN_REGS
#define Q_IN_REGS 1
#endif
#ifndef P_SCALE
#define P_SCALE 1
#endif
#ifndef P16
#define P16 0
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

#define BLOCK_M (16 * WARPS * M_TILES)
#define THREADS (32 * WARPS)
#define ROW (HEAD_DIM + 16)  // bytes per Q/K/V row in shared memory
// Bytes per transposed V row (one head dimension): e4m3, or fp16 with P16.
#define VT_ROW (P16 ? 2 * (BLOCK_N + 8) : BLOCK_N + 16)
#define KSTEPS (HEAD_DIM / 32)
#define NT_S (BLOCK_N / 8)   // n8 tiles of S
#define NT_O (HEAD_DIM / 8)  // n8 tiles of O
#define PV_STEPS (BLOCK_N / 32)

static_assert(BLOCK_N % 32 == 0, "BLOCK_N is whole 32-key blocks");
static_assert(HEAD_DIM % 32 == 0, "HEAD_DIM is whole k32 steps");

namespace {

using evotune_ptx::cp_async_16;

#define kInf __int_as_float(0x7f800000)

__device__ __forceinline__ void mma_fp8(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as two e4m3 bytes (x low), rounded to nearest, saturated.
__device__ __forceinline__ unsigned fp8x2(float x, float y) {
  return static_cast<unsigned>(__nv_cvt_float2_to_fp8x2(make_float2(x, y), __NV_SATFINITE, __NV_E4M3));
}

__device__ __forceinline__ unsigned ld32(const unsigned char* p) {
  return *reinterpret_cast<const unsigned*>(p);
}

// The key (0..31) of a 32-key block that k slot `s` holds (see the design).
__device__ __forceinline__ int key_of_slot(int s) {
  const int half = s >> 4, t = (s & 15) >> 2, i = s & 3;
  return half * 16 + (i < 2 ? 2 * t + i : 8 + 2 * t + (i - 2));
}

struct Smem {
  unsigned char q[BLOCK_M * ROW];
  unsigned char k[STAGES][BLOCK_N * ROW];
  unsigned char v[STAGES][BLOCK_N * ROW];
  unsigned char vt[HEAD_DIM * VT_ROW];
};

// One tile of `rows` rows of D bytes from row `row0` of a [S, D] head into
// shared memory (rows at or past S zero-filled), 16 bytes per copy.
__device__ __forceinline__ void load_rows(unsigned char* dst, const unsigned char* head, int row0, int rows, int S,
                                          int tid) {
  constexpr int chunks = HEAD_DIM / 16;
  for (int c = tid; c < rows * chunks; c += THREADS) {
    const int r = c / chunks, col = (c % chunks) * 16;
    const bool valid = row0 + r < S;
    cp_async_16(dst + r * ROW + col, head + (valid ? (size_t)(row0 + r) * HEAD_DIM + col : 0), valid);
  }
}

// Four e4m3 bytes as four fp16 values (exact), low byte first.
__device__ __forceinline__ uint2 fp8x4_to_half4(unsigned w) {
  const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xFFFFu), __NV_E4M3);
  const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  return make_uint2(lo.x | (static_cast<unsigned>(lo.y) << 16), hi.x | (static_cast<unsigned>(hi.y) << 16));
}

// Vt[d][slot] = V[key(slot)][d] for the tile in `v` (P16: Vt[d][key] in
// fp16, keys in order): each thread builds 4x4 byte blocks (4 slots x 4 head
// dimensions) from the four V rows those slots name, with byte permutes.
__device__ __forceinline__ void transpose_v(unsigned char* vt, const unsigned char* v, int tid) {
  constexpr int blocks = (BLOCK_N / 4) * (HEAD_DIM / 4);
  for (int b = tid; b < blocks; b += THREADS) {
    const int sg = b % (BLOCK_N / 4), dg = b / (BLOCK_N / 4);
    const int s0 = sg * 4, d0 = dg * 4;
    const int base = (s0 / 32) * 32, s = s0 % 32;
    auto row = [&](int i) { return P16 ? s0 + i : base + key_of_slot(s + i); };
    const unsigned r0 = ld32(v + row(0) * ROW + d0);
    const unsigned r1 = ld32(v + row(1) * ROW + d0);
    const unsigned r2 = ld32(v + row(2) * ROW + d0);
    const unsigned r3 = ld32(v + row(3) * ROW + d0);
    // Column j of the 4x4 byte block: byte j of each row, rows in slot order.
    const unsigned lo01 = __byte_perm(r0, r1, 0x5140), hi01 = __byte_perm(r0, r1, 0x7362);
    const unsigned lo23 = __byte_perm(r2, r3, 0x5140), hi23 = __byte_perm(r2, r3, 0x7362);
    const unsigned col[4] = {__byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
                             __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (P16)
        *reinterpret_cast<uint2*>(vt + (d0 + j) * VT_ROW + 2 * s0) = fp8x4_to_half4(col[j]);
      else
        *reinterpret_cast<unsigned*>(vt + (d0 + j) * VT_ROW + s0) = col[j];
    }
  }
}

__device__ __forceinline__ void mma_f16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned half2_bits(float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<const unsigned*>(&h);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
    sdpa_fp8(const unsigned char* __restrict__ Q, const unsigned char* __restrict__ K,
             const unsigned char* __restrict__ V, evotune_elem_t* __restrict__ O, int H, int S, int SKV, int group,
             float scale, float q_descale, float k_descale, float v_descale, const float* __restrict__ q_descales,
             const float* __restrict__ k_descales, const float* __restrict__ v_descales) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& sm = *reinterpret_cast<Smem*>(smem_raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.x * BLOCK_M;
  const size_t head = (size_t)blockIdx.y * S * HEAD_DIM;  // Q and O: head b*H + h
  const int b = blockIdx.y / H, h = blockIdx.y % H;
  const int kvh = b * (H / group) + h / group;  // this head's key/value head, over the batch
  const size_t kv_head = (size_t)kvh * SKV * HEAD_DIM;
#if FP8_DESCALE_PER_HEAD
  q_descale *= q_descales[kvh];
  k_descale *= k_descales[kvh];
  v_descale *= v_descales[kvh];
#endif
  const unsigned char* q_head = Q + head;
  const unsigned char* k_head = K + kv_head;
  const unsigned char* v_head = V + kv_head;
  const int shift = SKV - S;  // causal: query i sees keys j <= i + shift
  // log2(e) · scale · the descales: s·c is the exponent of 2 the softmax takes.
  const float c = 1.4426950408889634f * scale * q_descale * k_descale;
  constexpr float p_mul = P_SCALE ? 256.0f : 1.0f;

  const int last_row = min(m0 + BLOCK_M, S) - 1;
  const int n_keys = IS_CAUSAL ? max(0, min(SKV, last_row + 1 + shift)) : SKV;
  const int n_tiles = (n_keys + BLOCK_N - 1) / BLOCK_N;

  load_rows(sm.q, q_head, m0, BLOCK_M, S, tid);
  evotune_ptx::cp_async_commit();
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < n_tiles) {
      load_rows(sm.k[st], k_head, st * BLOCK_N, BLOCK_N, SKV, tid);
      load_rows(sm.v[st], v_head, st * BLOCK_N, BLOCK_N, SKV, tid);
    }
    evotune_ptx::cp_async_commit();
  }

  float o[M_TILES][NT_O][4];
  float row_max[M_TILES][2], row_sum[M_TILES][2];
#pragma unroll
  for (int mt = 0; mt < M_TILES; ++mt) {
#pragma unroll
    for (int n = 0; n < NT_O; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
    row_max[mt][0] = row_max[mt][1] = -kInf;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
#if Q_IN_REGS
  unsigned qf[M_TILES][KSTEPS][4];
  bool q_loaded = false;
#endif

  for (int j = 0; j < n_tiles; ++j) {
    const int slot = j % STAGES;
    // Tile j (and Q) landed; every warp is done with tile j-1.
    if (STAGES > 1)
      evotune_ptx::cp_async_wait<STAGES - 2>();
    else {
      if (j > 0) __syncthreads();  // every warp done with tile j-1's K before it is overwritten
      load_rows(sm.k[0], k_head, j * BLOCK_N, BLOCK_N, SKV, tid);
      load_rows(sm.v[0], v_head, j * BLOCK_N, BLOCK_N, SKV, tid);
      evotune_ptx::cp_async_commit();
      evotune_ptx::cp_async_wait_all();
    }
    __syncthreads();
    transpose_v(sm.vt, sm.v[slot], tid);
    if (STAGES > 1) {
      const int next = j + STAGES - 1;
      if (next < n_tiles) {
        load_rows(sm.k[next % STAGES], k_head, next * BLOCK_N, BLOCK_N, SKV, tid);
        load_rows(sm.v[next % STAGES], v_head, next * BLOCK_N, BLOCK_N, SKV, tid);
      }
      evotune_ptx::cp_async_commit();
    }
    __syncthreads();
#if Q_IN_REGS
    if (!q_loaded) {
#pragma unroll
      for (int mt = 0; mt < M_TILES; ++mt) {
        const unsigned char* qb = sm.q + ((warp * M_TILES + mt) * 16) * ROW;
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
          qf[mt][ks][0] = ld32(qb + g * ROW + ks * 32 + 4 * t);
          qf[mt][ks][1] = ld32(qb + (g + 8) * ROW + ks * 32 + 4 * t);
          qf[mt][ks][2] = ld32(qb + g * ROW + ks * 32 + 16 + 4 * t);
          qf[mt][ks][3] = ld32(qb + (g + 8) * ROW + ks * 32 + 16 + 4 * t);
        }
      }
      q_loaded = true;
    }
#endif
    const unsigned char* kb = sm.k[slot];
    const int key0 = j * BLOCK_N;
#pragma unroll
    for (int mt = 0; mt < M_TILES; ++mt) {
      const int row0 = m0 + (warp * M_TILES + mt) * 16;     // this m16 tile's first query row
      if (IS_CAUSAL && key0 > row0 + 15 + shift) continue;  // every key of the tile is masked for these rows
      float s[NT_S][4];
#pragma unroll
      for (int n = 0; n < NT_S; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        unsigned a[4];
#if Q_IN_REGS
        a[0] = qf[mt][ks][0];
        a[1] = qf[mt][ks][1];
        a[2] = qf[mt][ks][2];
        a[3] = qf[mt][ks][3];
#else
        const unsigned char* qb = sm.q + ((warp * M_TILES + mt) * 16) * ROW;
        a[0] = ld32(qb + g * ROW + ks * 32 + 4 * t);
        a[1] = ld32(qb + (g + 8) * ROW + ks * 32 + 4 * t);
        a[2] = ld32(qb + g * ROW + ks * 32 + 16 + 4 * t);
        a[3] = ld32(qb + (g + 8) * ROW + ks * 32 + 16 + 4 * t);
#endif
#pragma unroll
        for (int n = 0; n < NT_S; ++n) {
          const unsigned char* kr = kb + (n * 8 + g) * ROW + ks * 32 + 4 * t;
          mma_fp8(s[n], a, ld32(kr), ld32(kr + 16));
        }
      }
      // Masks: keys at or past SKV, and (causal) keys after the query row's.
      const bool edge = key0 + BLOCK_N > SKV || (IS_CAUSAL && key0 + BLOCK_N - 1 > row0 + shift);
      if (edge) {
#pragma unroll
        for (int n = 0; n < NT_S; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = key0 + n * 8 + 2 * t + (e & 1);
            const int row = row0 + g + (e >= 2 ? 8 : 0);
            if (key >= SKV || (IS_CAUSAL && key > row + shift)) s[n][e] = -kInf;
          }
      }
      // Online softmax, per half (rows g and g+8).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = row_max[mt][h];
#pragma unroll
        for (int n = 0; n < NT_S; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]) * c);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float base = mx == -kInf ? 0.f : mx;  // a row with no key yet
        const float corr = exp2f(row_max[mt][h] - base);
        row_max[mt][h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < NT_S; ++n) {
          s[n][2 * h] = exp2f(s[n][2 * h] * c - base);
          s[n][2 * h + 1] = exp2f(s[n][2 * h + 1] * c - base);
          sum += s[n][2 * h] + s[n][2 * h + 1];
        }
        row_sum[mt][h] = row_sum[mt][h] * corr + sum;
#pragma unroll
        for (int n = 0; n < NT_O; ++n) {
          o[mt][n][2 * h] *= corr;
          o[mt][n][2 * h + 1] *= corr;
        }
      }
#if P16
      // O += P·V in fp16, 16 keys per k step: key tiles 2b and 2b+1 are the
      // lane's A operand as they are.
#pragma unroll
      for (int b = 0; b < BLOCK_N / 16; ++b) {
        unsigned a[4];
        a[0] = half2_bits(s[2 * b][0] * p_mul, s[2 * b][1] * p_mul);
        a[1] = half2_bits(s[2 * b][2] * p_mul, s[2 * b][3] * p_mul);
        a[2] = half2_bits(s[2 * b + 1][0] * p_mul, s[2 * b + 1][1] * p_mul);
        a[3] = half2_bits(s[2 * b + 1][2] * p_mul, s[2 * b + 1][3] * p_mul);
#pragma unroll
        for (int n = 0; n < NT_O; ++n) {
          const unsigned char* vr = sm.vt + (n * 8 + g) * VT_ROW + 2 * (b * 16 + 2 * t);
          mma_f16(o[mt][n], a, ld32(vr), ld32(vr + 16));
        }
      }
#else
      // O += P·V, 32 keys per k step: the lane's own accumulators of key
      // tiles 4b..4b+3 are its A slots (keys in the slot order above).
#pragma unroll
      for (int b = 0; b < PV_STEPS; ++b) {
        unsigned a[4];
        a[0] = fp8x2(s[4 * b][0] * p_mul, s[4 * b][1] * p_mul) |
               (fp8x2(s[4 * b + 1][0] * p_mul, s[4 * b + 1][1] * p_mul) << 16);
        a[1] = fp8x2(s[4 * b][2] * p_mul, s[4 * b][3] * p_mul) |
               (fp8x2(s[4 * b + 1][2] * p_mul, s[4 * b + 1][3] * p_mul) << 16);
        a[2] = fp8x2(s[4 * b + 2][0] * p_mul, s[4 * b + 2][1] * p_mul) |
               (fp8x2(s[4 * b + 3][0] * p_mul, s[4 * b + 3][1] * p_mul) << 16);
        a[3] = fp8x2(s[4 * b + 2][2] * p_mul, s[4 * b + 2][3] * p_mul) |
               (fp8x2(s[4 * b + 3][2] * p_mul, s[4 * b + 3][3] * p_mul) << 16);
#pragma unroll
        for (int n = 0; n < NT_O; ++n) {
          const unsigned char* vr = sm.vt + (n * 8 + g) * VT_ROW + b * 32 + 4 * t;
          mma_fp8(o[mt][n], a, ld32(vr), ld32(vr + 16));
        }
      }
#endif
    }
  }
  evotune_ptx::cp_async_wait_all();

  // O = acc · v_descale / (256 ·) l; rows past S are not stored; a row that
  // saw no key (l = 0) gets 0.
#pragma unroll
  for (int mt = 0; mt < M_TILES; ++mt) {
    const int row0 = m0 + (warp * M_TILES + mt) * 16;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = row_sum[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float f = l > 0.f ? v_descale / (l * p_mul) : 0.f;
      const int row = row0 + g + 8 * h;
      if (row >= S) continue;
      evotune_elem_t* out = O + head + (size_t)row * HEAD_DIM + 2 * t;
#pragma unroll
      for (int n = 0; n < NT_O; ++n)
        *reinterpret_cast<unsigned*>(out + n * 8) = evotune_ptx::pack2(o[mt][n][2 * h] * f, o[mt][n][2 * h + 1] * f);
    }
  }
}
