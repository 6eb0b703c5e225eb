// sdpa_fwd: scaled dot-product attention forward, O = softmax(Q·Kᵀ·scale)·V,
// for Q and O of shape [B,H,S,D] and K, V of shape [B,HKV,SKV,D] (contiguous,
// one row = one token's D values), D = HEAD_DIM ∈ {64,128,256}, fp16 or bf16 in,
// fp32 statistics and accumulation. Query head h reads key/value head
// h / (H / HKV) (grouped-query attention). Under IS_CAUSAL the mask is aligned
// bottom-right, as FlashAttention's: query i sees keys j <= i + SKV - S; a
// query that sees no key gets O = 0.
//
// Design (FlashAttention-2 style, mma.sync m16n8k16 on sm_80+). A CTA owns
// BLOCK_M query rows of one (b,h) (blockIdx.x = query block, reversed under
// causal masking so the longest blocks start first; blockIdx.y = b*H+h;
// blockIdx.z = key split). WARPS consumer warps each own BLOCK_M/WARPS rows
// (MT = rows/16 m16 tiles). Q is staged through shared memory once and its
// A fragments either kept in registers (Q_IN_REGS=1) or re-read from shared
// memory with ldmatrix at every key tile (Q_IN_REGS=0, fewer registers). Key
// and value tiles of BLOCK_N rows stream through a STAGES-deep cp.async ring
// (zero-filled past SKV). Per tile: S = Q·Kᵀ (K tile row-major in smem is the
// "col" B operand: ldmatrix non-trans), masking of keys >= SKV and, under
// IS_CAUSAL, keys > query + SKV - S, online softmax in registers (running max m and
// thread-partial sum l per row, exp2 with scale·log2(e) folded in), P packed
// from the fp32 C fragments straight into A fragments (two adjacent n8 tiles
// = one k16 A tile), O += P·V (V via ldmatrix.trans). The epilogue divides by
// l, stages the tile in shared memory (reusing the warp's own Q rows) and
// writes 16-byte rows.
//
// Tunables:
//   BLOCK_M        query rows per CTA (multiple of 16*WARPS).
//   BLOCK_N        keys per pipeline tile (a multiple of 16: 32, 64, 128).
//   WARPS          consumer (math) warps.
//   STAGES         depth of the K/V ring: 1 = load, wait, compute (no overlap);
//                  2/3 = STAGES-1 tiles in flight while one is computed.
//   PRODUCER_WARPS 0: every consumer thread issues its share of the cp.async
//                  loads and the ring is guarded by __syncthreads (FA2). 1/2:
//                  dedicated producer warps issue all K/V loads and hand stages
//                  over through named barriers (FULL[s] = 1+s: producers
//                  arrive, consumers sync; EMPTY[s] = 1+STAGES+s: the reverse;
//                  1+2*STAGES: consumers only). A producer releases tile i-
//                  (STAGES-2) right after issuing tile i, so STAGES-1 tiles
//                  are in flight as in the consumer-issued ring.
//   SPLIT_KV       splits of the key range over gridDim.z (flash-decoding). Each
//                  split takes an equal share of the key tiles its query block
//                  needs (causal: up to the block's last row; splits beyond
//                  the tile count exit at once and are not counted; split 0
//                  runs even with no key tile, to write O = 0), writes an
//                  unnormalised fp32 partial O plus its row max and sum to
//                  `workspace` and bumps a per-(b,h,query block) counter; the
//                  last one merges with log-sum-exp rescaling, writes O and
//                  resets the counter to 0 for the next launch.
//   Q_IN_REGS      1: Q fragments live in registers; 0: re-read per key tile.
//   MIN_BLOCKS     __launch_bounds__ min blocks per SM (register cap hint).
//   KV_SWIZZLE     1: XOR-swizzled 16-byte chunks (row stride D); 0: rows
//                  padded by 16 bytes. Both make ldmatrix conflict-free.
#include "evotune_ptx.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 64
#endif
#ifndef IS_CAUSAL
#define IS_CAUSAL 0
#endif
#ifndef BLOCK_M
#define BLOCK_M 64
#endif
#ifndef BLOCK_N
#define BLOCK_N 64
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef PRODUCER_WARPS
#define PRODUCER_WARPS 0
#endif
#ifndef SPLIT_KV
#define SPLIT_KV 1
#endif
#ifndef Q_IN_REGS
#define Q_IN_REGS 1
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef KV_SWIZZLE
#define KV_SWIZZLE 1
#endif

namespace sdpa_fwd_detail {

constexpr int kD = HEAD_DIM;
constexpr int kBM = BLOCK_M;
constexpr int kBN = BLOCK_N;
constexpr int kWarps = WARPS;
constexpr int kStages = STAGES;
constexpr int kProducerWarps = PRODUCER_WARPS;
constexpr int kConsumerThreads = 32 * kWarps;
constexpr int kProducerThreads = 32 * kProducerWarps;
constexpr int kThreads = kConsumerThreads + kProducerThreads;
constexpr int kRowsPerWarp = kBM / kWarps;
constexpr int kMT = kRowsPerWarp / 16;  // m16 tiles per warp
constexpr int kKT = kD / 16;            // k16 steps of Q·Kᵀ
constexpr int kDT = kD / 8;             // n8 tiles of O
constexpr int kNT = kBN / 8;            // n8 tiles of S
constexpr int kCPR = kD / 8;            // 16-byte chunks per row
constexpr int kRowBytes = KV_SWIZZLE ? kD * 2 : kD * 2 + 16;
constexpr int kQBytes = kBM * kRowBytes;
constexpr int kTileBytes = kBN * kRowBytes;
constexpr int kStageBytes = 2 * kTileBytes;
// Producer warps signal tile i-kLag after issuing tile i, so STAGES-1 tiles
// stay in flight while consumers never wait for a producer round trip.
constexpr int kLag = kStages >= 2 ? kStages - 2 : 0;
constexpr int kFullBar = 1;
constexpr int kEmptyBar = 1 + kStages;
constexpr int kConsumerBar = 1 + 2 * kStages;  // consumer-only barrier (PRODUCER_WARPS > 0)

static_assert(kD == 64 || kD == 128 || kD == 256, "HEAD_DIM must be 64, 128 or 256");
static_assert(kBM % (16 * kWarps) == 0, "BLOCK_M must be a multiple of 16*WARPS");
static_assert(kBN % 16 == 0, "BLOCK_N must be a multiple of 16");
static_assert(kStages >= 1 && kStages <= 3, "STAGES must be 1..3");
static_assert(kProducerWarps >= 0 && kProducerWarps <= 2, "PRODUCER_WARPS must be 0..2");
static_assert(kThreads <= 1024, "too many threads");
static_assert(kConsumerBar <= 15, "named barrier ids 1..15");

// -inf without <math.h> (NVRTC has no INFINITY macro by default).
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// 2^x on the SFU; ex2(-inf) = +0, which the masking relies on.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// ldmatrix / mma without `volatile` (the shared helpers' asm volatile pins
// every ldmatrix in program order against all other volatile asm, which costs
// ~10 registers in the largest configs and makes them spill). The "memory"
// clobber keeps each ldmatrix ordered against barriers, cp.async waits and
// shared stores; mma is a pure register op.
__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
  asm("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(evotune_ptx::smem_addr(p))
      : "memory");
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const void* p) {
  asm("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(evotune_ptx::smem_addr(p))
      : "memory");
}
__device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." EVOTUNE_MMA_TYPE "." EVOTUNE_MMA_TYPE
      ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Workspace partials were written by other CTAs: read them from L2, not L1.
__device__ __forceinline__ float2 ld_cg_f2(const float* p) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0,%1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "l"(p));
  return v;
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a [rows][D] smem tile.
// Swizzle: the chunk index is XORed with row%8, so the 8 rows read by one
// ldmatrix phase (same logical chunk) land in 8 distinct 16-byte bank groups.
__device__ __forceinline__ int tile_off(int row, int chunk) {
#if KV_SWIZZLE
  return row * kRowBytes + ((chunk ^ (row & 7)) << 4);
#else
  return row * kRowBytes + (chunk << 4);
#endif
}

// Per-lane part of an ldmatrix address: the lane reads row `r0 + lr` (r0 a
// multiple of 8), chunk `c0 + lc` (c0 even, lc ∈ {0,1}). With the swizzle,
// (c0+lc)^(lr&7) = c0 ^ (lc^(lr&7)), so a lane keeps y = (lc^(lr&7))<<4 and
// the compile-time c0 only adds or XORs a constant.
__device__ __forceinline__ int lane_y(int lr, int lc) {
#if KV_SWIZZLE
  return (lc ^ (lr & 7)) << 4;
#else
  return lc << 4;
#endif
}
__device__ __forceinline__ int chunk_part(int c0, int y) {
#if KV_SWIZZLE
  return (((c0 & 7) << 4) ^ y) + ((c0 & ~7) << 4);
#else
  return (c0 << 4) + y;
#endif
}

// Hides a pointer's provenance from the optimiser, so that `p + constant` per
// chunk stays an immediate offset instead of being reassociated into one
// hoisted 64-bit register per chunk (which spills in the big configs).
__device__ __forceinline__ const evotune_elem_t* opaque(const evotune_elem_t* p) {
  const evotune_elem_t* r;
  asm("mov.b64 %0, %1;\n" : "=l"(r) : "l"(p));
  return r;
}

// cp.async of a [ROWS][D] tile (rows row0.., zero-filled from row S on) by
// NTHREADS threads; t = this thread's index among them. Thread t always
// copies rows ≡ t (mod 8), so its swizzle term row%8 is fixed and every
// destination is one per-thread offset plus a compile-time constant (no
// per-chunk address registers). Eight consecutive threads read 8 rows of the
// same chunk column; a warp covers 4 adjacent chunks (64 bytes) of 8 rows.
template <int ROWS, int NTHREADS>
__device__ __forceinline__ void load_tile(unsigned char* dst, const evotune_elem_t* src, int row0, int S, int t) {
  constexpr int kCols = NTHREADS / 8;  // chunk columns covered per pass
  static_assert(ROWS % 8 == 0, "tile rows must be a multiple of 8");
  const int x = t & 7;
  const int left = S - row0 - x;  // rows r = x + 8k with 8k < left are in range
  if constexpr (kCols >= kCPR) {
    // A pass covers kCols/kCPR groups of 8 full rows.
    constexpr int kGroups = kCols / kCPR;
    constexpr int kPasses = (ROWS / 8 + kGroups - 1) / kGroups;
    const int c = (t >> 3) % kCPR;
    const int grp = (t >> 3) / kCPR;
    const int off = tile_off(8 * grp + x, c);
    const evotune_elem_t* g = opaque(src + ((size_t)row0 * kD + (8 * grp + x) * kD + c * 8));
    const int lim = left - 8 * grp;
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      if ((ROWS / 8) % kGroups == 0 || 8 * (grp + i * kGroups) < ROWS) {
        evotune_ptx::cp_async_16(dst + off + 8 * i * kGroups * kRowBytes, g + 8 * i * kGroups * kD,
                                 8 * i * kGroups < lim);
      }
    }
  } else {
    // A row group of 8 rows takes kCPR/kCols passes over the chunk columns.
    constexpr int kSub = kCPR / kCols;
    const int c = t >> 3;  // < kCols ≤ 8
    // Chunk c + j*kCols (disjoint bits) swizzles to ((c^x) ^ j*kCols).
    const int sw = tile_off(x, c);
    const evotune_elem_t* g = opaque(src + ((size_t)row0 * kD + x * kD + c * 8));
#pragma unroll
    for (int rg = 0; rg < ROWS / 8; ++rg) {
      const bool valid = 8 * rg < left;
#pragma unroll
      for (int j = 0; j < kSub; ++j) {
        const int cj = j * kCols;
#if KV_SWIZZLE
        const int o = 8 * rg * kRowBytes + (sw ^ ((cj & 7) << 4)) + ((cj & ~7) << 4);
#else
        const int o = 8 * rg * kRowBytes + sw + (cj << 4);
#endif
        evotune_ptx::cp_async_16(dst + o, g + 8 * rg * kD + cj * 8, valid);
      }
    }
  }
}

// Named barrier with a compile-time id and thread count. ptxas reserves only
// the ids it can see; a register-valued id (as in the shared helpers) makes
// it reserve all 16, which can limit the CTAs resident per SM.
template <int ID, int COUNT, bool SYNC>
__device__ __forceinline__ void named_bar() {
  if (SYNC) {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(COUNT) : "memory");
  } else {
    asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(COUNT) : "memory");
  }
}
// Barrier BASE + stage for a runtime ring stage: one uniform branch.
template <int BASE, bool SYNC>
__device__ __forceinline__ void stage_bar(int stage) {
  if constexpr (kStages > 2) {
    if (stage == 2) {
      named_bar<BASE + 2, kThreads, SYNC>();
      return;
    }
  }
  if constexpr (kStages > 1) {
    if (stage == 1) {
      named_bar<BASE + 1, kThreads, SYNC>();
      return;
    }
  }
  named_bar<BASE, kThreads, SYNC>();
}

__device__ __forceinline__ void consumer_sync() {
  if constexpr (kProducerWarps == 0) {
    __syncthreads();
  } else {
    named_bar<kConsumerBar, kConsumerThreads, true>();
  }
}

// Where this thread sits: recomputed from the special registers wherever it
// is needed (asm volatile: never hoisted or merged), so the indices do not
// occupy registers across the key loop — the largest configs sit right at
// 255 registers, where every long-lived value costs a spill.
struct Ctx {
  int tid, lane, warp;
  int mb;  // query block
  int bh;  // b*H + h
};

// Element offsets of the CTA's query/output head and of the key/value head
// it reads (query head h reads h / (H / HKV)).
__device__ __forceinline__ size_t q_head(const Ctx& cx, int S) { return (size_t)cx.bh * S * kD; }
__device__ __forceinline__ size_t kv_head(const Ctx& cx, int H, int HKV, int SKV) {
  // b*H + h over the group H / HKV is b*HKV + h / (H / HKV), the key/value head.
  return (size_t)(cx.bh / (H / HKV)) * SKV * kD;
}

// Key tiles query block mb needs: all SKV keys, or under IS_CAUSAL those up
// to its last row's (row + SKV - S), none where its rows see no key.
__device__ __forceinline__ int key_tiles(int mb, int S, int SKV) {
  const int last_row = min(S, (mb + 1) * kBM) - 1;
  const int n_keys = IS_CAUSAL ? max(0, min(SKV, last_row + 1 + SKV - S)) : SKV;
  return (n_keys + kBN - 1) / kBN;
}
__device__ __forceinline__ Ctx fresh_ctx() {
  unsigned t, x, y, nx;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(x));
  asm volatile("mov.u32 %0, %%ctaid.y;\n" : "=r"(y));
  asm volatile("mov.u32 %0, %%nctaid.x;\n" : "=r"(nx));
  Ctx c;
  c.tid = (int)t;
  c.lane = (int)(t & 31);
  c.warp = (int)(t >> 5);
  c.mb = IS_CAUSAL ? (int)(nx - 1 - x) : (int)x;  // causal: longest blocks first
  c.bh = (int)y;
  return c;
}

// Per-warp state of one query row block.
struct WarpState {
  float o[kMT][kDT][4];  // O accumulators, C-fragment layout
  float m[kMT][2];       // running max of scale·log2(e)·s, rows g and g+8
  float l[kMT][2];       // this thread's partial row sums
#if Q_IN_REGS
  unsigned q[kMT][kKT][4];  // Q A fragments
#endif
};

// One key tile: S = Q·Kᵀ, mask, online softmax, O += P·V.
// kv: the stage (K tile then V tile); qs: the Q tile; row0: the warp's first
// query row (absolute); key0: the tile's first key.
template <bool MASK>
__device__ __forceinline__ void consume_tile(WarpState& st, const unsigned char* qs, const unsigned char* kv, int lane,
                                             int wrow, int row0, int key0, int SKV, int shift, float sl2) {
  float s[kMT][kNT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;

  // K (non-trans B): lanes 0-7 keys 0-7 chunk c0, 8-15 keys 0-7 chunk c0+1,
  // 16-23 keys 8-15 chunk c0, 24-31 keys 8-15 chunk c0+1 → b(n-tile 2np), b(2np+1).
  const int k_lr = (lane & 7) + ((lane >> 4) << 3);
  const unsigned char* kbase = kv + k_lr * kRowBytes;
  const int k_y = lane_y(k_lr, (lane >> 3) & 1);
#if !Q_IN_REGS
  // Q (A, non-trans): lane reads row lane%16, chunk c0 + lane/16.
  const int q_lr = lane & 15;
  const unsigned char* qbase = qs + (wrow + q_lr) * kRowBytes;
  const int q_y = lane_y(q_lr, lane >> 4);
#endif

#pragma unroll
  for (int kk = 0; kk < kKT; ++kk) {
    unsigned a[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#if Q_IN_REGS
#pragma unroll
      for (int e = 0; e < 4; ++e) a[mt][e] = st.q[mt][kk][e];
#else
      ldsm_x4(a[mt], qbase + mt * 16 * kRowBytes + chunk_part(2 * kk, q_y));
#endif
    }
#pragma unroll
    for (int np = 0; np < kNT / 2; ++np) {
      unsigned b[4];
      ldsm_x4(b, kbase + np * 16 * kRowBytes + chunk_part(2 * kk, k_y));
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        mma(s[mt][2 * np], a[mt], b[0], b[1]);
        mma(s[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }

  const int g = lane >> 2, c = lane & 3;
  if (MASK) {
    // C fragment: e=0,1 → row g, keys 2c,2c+1; e=2,3 → row g+8.
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = row0 + mt * 16 + g + ((e >> 1) << 3);
          const int key = key0 + nt * 8 + 2 * c + (e & 1);
          bool dead = key >= SKV;
          if (IS_CAUSAL) dead = dead || key > row + shift;
          if (dead) s[mt][nt][e] = neg_inf();
        }
  }

  // Online softmax, per row (h = 0: row g, h = 1: row g+8).
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = neg_inf();
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * h], s[mt][nt][2 * h + 1]));
      // The row's keys are spread over the 4 lanes of a quad.
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(st.m[mt][h], mx * sl2);
      // A row with no live key yet keeps m = -inf; subtract 0 then so that
      // exp2 sees -inf, never (-inf) - (-inf).
      const float base = m_new == neg_inf() ? 0.f : m_new;
      const float alpha = ex2(st.m[mt][h] - base);
      st.m[mt][h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
        const float p0 = ex2(fmaf(s[mt][nt][2 * h], sl2, -base));
        const float p1 = ex2(fmaf(s[mt][nt][2 * h + 1], sl2, -base));
        s[mt][nt][2 * h] = p0;
        s[mt][nt][2 * h + 1] = p1;
        sum += p0 + p1;
      }
      st.l[mt][h] = st.l[mt][h] * alpha + sum;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        st.o[mt][dt][2 * h] *= alpha;
        st.o[mt][dt][2 * h + 1] *= alpha;
      }
    }
  }

  // O += P·V. V (trans B): lane reads key lane%16, chunk 2dp + lane/16 →
  // b(d-tile 2dp), b(2dp+1).
  const unsigned char* vs = kv + kTileBytes;
  const int v_lr = lane & 15;
  const unsigned char* vbase = vs + v_lr * kRowBytes;
  const int v_y = lane_y(v_lr, lane >> 4);
#pragma unroll
  for (int j = 0; j < kNT / 2; ++j) {
    unsigned a[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      // The C fragments of n8 tiles 2j and 2j+1 are exactly the A fragment
      // of the k16 step j: a0 = (g, 2c..), a1 = (g+8, 2c..), a2/a3 = +8 keys.
      a[mt][0] = evotune_ptx::pack2(s[mt][2 * j][0], s[mt][2 * j][1]);
      a[mt][1] = evotune_ptx::pack2(s[mt][2 * j][2], s[mt][2 * j][3]);
      a[mt][2] = evotune_ptx::pack2(s[mt][2 * j + 1][0], s[mt][2 * j + 1][1]);
      a[mt][3] = evotune_ptx::pack2(s[mt][2 * j + 1][2], s[mt][2 * j + 1][3]);
    }
#pragma unroll
    for (int dp = 0; dp < kDT / 2; ++dp) {
      unsigned b[4];
      ldsm_x4_t(b, vbase + j * 16 * kRowBytes + chunk_part(2 * dp, v_y));
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        mma(st.o[mt][2 * dp], a[mt], b[0], b[1]);
        mma(st.o[mt][2 * dp + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// Tile dispatch for one warp: skip tiles that causal masking kills entirely
// for this warp's rows, mask only tiles that cross SKV or the diagonal
// (shift = SKV - S: query row i sees keys up to i + shift).
__device__ __forceinline__ void warp_tile(WarpState& st, const unsigned char* qs, const unsigned char* kv, const Ctx& cx,
                                          int key0, int SKV, int shift, float sl2) {
  const int wrow = cx.warp * kRowsPerWarp;  // the warp's first row in the block
  const int row0 = cx.mb * kBM + wrow;      // and in the sequence
  const int lane = cx.lane;
  if (IS_CAUSAL && key0 > row0 + kRowsPerWarp - 1 + shift) return;
  const bool mask = key0 + kBN > SKV || (IS_CAUSAL && key0 + kBN - 1 > row0 + shift);
  if (mask) {
    consume_tile<true>(st, qs, kv, lane, wrow, row0, key0, SKV, shift, sl2);
  } else {
    consume_tile<false>(st, qs, kv, lane, wrow, row0, key0, SKV, shift, sl2);
  }
}

}  // namespace sdpa_fwd_detail

extern "C" __global__ void __launch_bounds__(sdpa_fwd_detail::kThreads, MIN_BLOCKS)
    sdpa_fwd(const evotune_elem_t* __restrict__ Q, const evotune_elem_t* __restrict__ K,
             const evotune_elem_t* __restrict__ V, evotune_elem_t* __restrict__ O, float* __restrict__ workspace,
             unsigned* __restrict__ counters, int B, int H, int HKV, int S, int SKV, float scale) {
  using namespace sdpa_fwd_detail;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* const qs = smem;
  unsigned char* const ring = smem + kQBytes;
  (void)B;

  // Key range [key_begin, key_end) of this CTA: the keys its query block
  // needs (causal: up to its last row), this split's share of their tiles.
  int key_begin, key_end;
  {
    const Ctx cx = fresh_ctx();
    const int n_tiles = key_tiles(cx.mb, S, SKV);
#if SPLIT_KV > 1
    const int nsplit = max(1, min(SPLIT_KV, n_tiles));
    const int z = blockIdx.z;
    if (z >= nsplit) return;  // never counted: the merge waits for nsplit arrivals
    key_begin = z * n_tiles / nsplit * kBN;
    key_end = (z + 1) * n_tiles / nsplit * kBN;
#else
    (void)workspace;
    (void)counters;
    key_begin = 0;
    key_end = n_tiles * kBN;
#endif
  }

#if PRODUCER_WARPS > 0
  if (threadIdx.x >= kConsumerThreads) {
    // Producer: issue tile i, then release tile i-kLag once its copies landed.
    const int count = (key_end - key_begin) / kBN;
    int stage = 0;
#pragma unroll 1
    for (int i = 0; i < count; ++i) {
      if (i >= kStages) stage_bar<kEmptyBar, true>(stage);
      const Ctx cx = fresh_ctx();
      const size_t head = kv_head(cx, H, HKV, SKV);
      const int key0 = key_begin + i * kBN;
      load_tile<kBN, kProducerThreads>(ring + stage * kStageBytes, K + head, key0, SKV, cx.tid - kConsumerThreads);
      load_tile<kBN, kProducerThreads>(ring + stage * kStageBytes + kTileBytes, V + head, key0, SKV,
                                       cx.tid - kConsumerThreads);
      evotune_ptx::cp_async_commit();
      if (i >= kLag) {
        evotune_ptx::cp_async_wait<kLag>();
        stage_bar<kFullBar, false>((i - kLag) % kStages);
      }
      stage = stage + 1 == kStages ? 0 : stage + 1;
    }
    evotune_ptx::cp_async_wait_all();
#pragma unroll 1
    for (int i = max(count - kLag, 0); i < count; ++i) stage_bar<kFullBar, false>(i % kStages);
    return;
  }
#endif

  // ---- consumers
  const float sl2 = scale * 1.4426950408889634f;
  WarpState st;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      st.m[mt][h] = neg_inf();
      st.l[mt][h] = 0.f;
    }
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st.o[mt][dt][e] = 0.f;
  }

  {
    const Ctx cx = fresh_ctx();
    load_tile<kBM, kConsumerThreads>(qs, Q + q_head(cx, S), cx.mb * kBM, S, cx.tid);
    evotune_ptx::cp_async_commit();
#if PRODUCER_WARPS == 0
    // Prologue: STAGES-1 tiles in flight (empty groups keep the count uniform).
    const size_t head = kv_head(cx, H, HKV, SKV);
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      const int key0 = key_begin + i * kBN;
      if (key0 < key_end) {
        load_tile<kBN, kConsumerThreads>(ring + i * kStageBytes, K + head, key0, SKV, cx.tid);
        load_tile<kBN, kConsumerThreads>(ring + i * kStageBytes + kTileBytes, V + head, key0, SKV, cx.tid);
      }
      evotune_ptx::cp_async_commit();
    }
    evotune_ptx::cp_async_wait<kStages - 1>();  // the Q group is the oldest
#else
    evotune_ptx::cp_async_wait<0>();
#endif
    consumer_sync();
#if Q_IN_REGS
    const int q_lr = cx.lane & 15;
    const unsigned char* qbase = qs + (cx.warp * kRowsPerWarp + q_lr) * kRowBytes;
    const int q_y = lane_y(q_lr, cx.lane >> 4);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int kk = 0; kk < kKT; ++kk)
        ldsm_x4(st.q[mt][kk], qbase + mt * 16 * kRowBytes + chunk_part(2 * kk, q_y));
#endif
  }

  int stage = 0;
#pragma unroll 1
  for (int key0 = key_begin; key0 < key_end; key0 += kBN) {
    unsigned char* kv = ring + stage * kStageBytes;
#if PRODUCER_WARPS == 0
#if STAGES == 1
    {
      const Ctx cx = fresh_ctx();
      const size_t head = kv_head(cx, H, HKV, SKV);
      load_tile<kBN, kConsumerThreads>(kv, K + head, key0, SKV, cx.tid);
      load_tile<kBN, kConsumerThreads>(kv + kTileBytes, V + head, key0, SKV, cx.tid);
    }
    evotune_ptx::cp_async_commit();
    evotune_ptx::cp_async_wait<0>();
    __syncthreads();
#else
    evotune_ptx::cp_async_wait<kStages - 2>();
    // Tile key0 visible to all; every warp is done with the previous tile,
    // whose stage the next load reuses.
    __syncthreads();
    {
      const int nkey0 = key0 + (kStages - 1) * kBN;
      if (nkey0 < key_end) {
        int ns = stage + kStages - 1;
        ns = ns >= kStages ? ns - kStages : ns;
        const Ctx cx = fresh_ctx();
        const size_t head = kv_head(cx, H, HKV, SKV);
        load_tile<kBN, kConsumerThreads>(ring + ns * kStageBytes, K + head, nkey0, SKV, cx.tid);
        load_tile<kBN, kConsumerThreads>(ring + ns * kStageBytes + kTileBytes, V + head, nkey0, SKV, cx.tid);
      }
      evotune_ptx::cp_async_commit();
    }
#endif
    warp_tile(st, qs, kv, fresh_ctx(), key0, SKV, SKV - S, sl2);
#if STAGES == 1
    __syncthreads();  // the next load overwrites the only stage
#endif
#else
    stage_bar<kFullBar, true>(stage);
    warp_tile(st, qs, kv, fresh_ctx(), key0, SKV, SKV - S, sl2);
    // Release the stage only when the producer will refill it.
    if (key0 + kStages * kBN < key_end) stage_bar<kEmptyBar, false>(stage);
#endif
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }

  // Full row sums: the quad's four partial sums.
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = st.l[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      st.l[mt][h] = l;
    }

  const Ctx cx = fresh_ctx();
  const int g = cx.lane >> 2, c = cx.lane & 3;
  const int wrow = cx.warp * kRowsPerWarp;  // the warp's first row in the block
  const int m0 = cx.mb * kBM;
  const size_t head = q_head(cx, S);
#if SPLIT_KV > 1
  const int nsplit = max(1, min(SPLIT_KV, key_tiles(cx.mb, S, SKV)));
  if (nsplit > 1) {
    const int z = blockIdx.z;
    // Partials: O[BM][D] per split, then (m, l) per row after all O partials.
    const size_t blk = (size_t)cx.bh * gridDim.x + cx.mb;
    const size_t o_split = (size_t)kBM * kD;
    const size_t ml_base = (size_t)gridDim.y * gridDim.x * SPLIT_KV * o_split;
    float* wo = workspace + (blk * SPLIT_KV) * o_split;
    float* wml = workspace + ml_base + (blk * SPLIT_KV) * kBM * 2;
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wrow + mt * 16 + g + 8 * h;
        if (m0 + r < S) {
          float* dst = wo + z * o_split + (size_t)r * kD + 2 * c;
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt)
            *reinterpret_cast<float2*>(dst + dt * 8) = make_float2(st.o[mt][dt][2 * h], st.o[mt][dt][2 * h + 1]);
          if (c == 0) *reinterpret_cast<float2*>(wml + ((size_t)z * kBM + r) * 2) = make_float2(st.m[mt][h], st.l[mt][h]);
        }
      }
    __threadfence();  // partials visible device-wide before the count says so
    __shared__ int s_last;
    consumer_sync();
    if (cx.tid == 0) {
      const unsigned prev = atomicAdd(counters + blk, 1u);
      const int last = prev == (unsigned)(nsplit - 1);
      if (last) {
        counters[blk] = 0u;  // every split has arrived: ready for the next launch
        __threadfence();     // and the others' partials are read after their count
      }
      s_last = last;
    }
    consumer_sync();
    if (!s_last) return;

    // Merge: M = max over splits, O = Σ 2^(m_z-M)·O_z, L = Σ 2^(m_z-M)·l_z.
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wrow + mt * 16 + g + 8 * h;
        if (m0 + r >= S) continue;
        float mmax = st.m[mt][h];
#pragma unroll 1
        for (int zz = 0; zz < nsplit; ++zz)
          if (zz != z) mmax = fmaxf(mmax, ld_cg_f2(wml + ((size_t)zz * kBM + r) * 2).x);
        // All -inf for a row that sees no key (causal, S > SKV): O = 0 then.
        const float base = mmax == neg_inf() ? 0.f : mmax;
        const float f = ex2(st.m[mt][h] - base);
        float L = st.l[mt][h] * f;
#pragma unroll
        for (int dt = 0; dt < kDT; ++dt) {
          st.o[mt][dt][2 * h] *= f;
          st.o[mt][dt][2 * h + 1] *= f;
        }
#pragma unroll 1
        for (int zz = 0; zz < nsplit; ++zz) {
          if (zz == z) continue;
          const float2 ml = ld_cg_f2(wml + ((size_t)zz * kBM + r) * 2);
          const float fz = ex2(ml.x - base);
          L += ml.y * fz;
          const float* src = wo + zz * o_split + (size_t)r * kD + 2 * c;
#pragma unroll
          for (int dt = 0; dt < kDT; ++dt) {
            const float2 v = ld_cg_f2(src + dt * 8);
            st.o[mt][dt][2 * h] += fz * v.x;
            st.o[mt][dt][2 * h + 1] += fz * v.y;
          }
        }
        st.l[mt][h] = L;
      }
  }
#endif

  // Epilogue: normalise, stage through this warp's own Q rows (no other warp
  // touches them), then 16-byte row stores.
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float inv = st.l[mt][h] > 0.f ? 1.f / st.l[mt][h] : 0.f;
      const int r = wrow + mt * 16 + g + 8 * h;
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
        *reinterpret_cast<unsigned*>(qs + tile_off(r, dt) + 4 * c) =
            evotune_ptx::pack2(st.o[mt][dt][2 * h] * inv, st.o[mt][dt][2 * h + 1] * inv);
    }
  __syncwarp();
  evotune_elem_t* Oh = O + head;
  constexpr int kRowsPerPass = 32 / kCPR;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp / kRowsPerPass; ++i) {
    const int r = wrow + i * kRowsPerPass + cx.lane / kCPR;
    const int ch = cx.lane % kCPR;
    if (m0 + r < S)
      *reinterpret_cast<uint4*>(Oh + (size_t)(m0 + r) * kD + ch * 8) =
          *reinterpret_cast<const uint4*>(qs + tile_off(r, ch));
  }
}
