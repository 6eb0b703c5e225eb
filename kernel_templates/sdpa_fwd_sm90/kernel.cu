// evotune built-in Hopper attention forward: O = softmax(Q·Kᵀ·scale)·V, fp16 or
// bf16 in and out, fp32 accumulation and softmax. sm_90a only.
//
// Problem. Q and O are [B, H, S, D], K and V [B, HKV, SKV, D] (row-major,
// D innermost). Query head h reads key/value head h / (H / HKV) (grouped-query
// attention; HKV = H is plain multi-head). The causal mask is aligned
// bottom-right, as FlashAttention's: query i sees keys j <= i + SKV - S, so a
// query block prefilled against a cache sees the whole cache; a query that
// sees no key at all (S > SKV) gets O = 0.
//
// Design (FlashAttention-3 style, built on the gemm_sm90 machinery).
//  * Roles. Threads 0 .. 128*CONSUMER_WG-1 are consumer warpgroups, each owning
//    64 query rows of a BLOCK_M = 64*CONSUMER_WG tile; after them the producer,
//    one warp (PRODUCER=0) or a warpgroup that hands its registers to the
//    consumers with setmaxnreg (PRODUCER=1).
//  * Loads. One elected producer thread issues TMA copies: the Q tile (2-D map
//    over [B*H*S, D] rows) once per work unit into its own buffer, then the K
//    and V tiles (3-D maps over [B*HKV, SKV, D], zero-filled past SKV) into a
//    STAGES-deep ring, all in the 128-byte swizzle as 64-column panels. K and V
//    of a stage fill and free on separate mbarriers: Q·Kᵀ starts before V
//    lands, and the next K loads as soon as Q·Kᵀ is done with the last. The
//    consumers poll the full stages (mbar_wait_spin: a warp suspended there
//    now and then resumed ~115 us late); the producer's waits may suspend.
//  * Math. S = Q·Kᵀ is wgmma m64nBLOCK_Nk16 with Q from shared memory (or from
//    registers, Q_IN_REGS=1) and K K-major; the online softmax runs on the
//    accumulators in registers (exp2 with the scale folded in, row max across a
//    quad of lanes, row sums kept per thread until the end); P is packed to the
//    input type in registers and O += P·V is wgmma m64nDk16 with P from
//    registers and V MN-major from shared memory.
//  * Overlap (OVERLAP=1). Iteration j issues S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1}
//    back to back, and runs the softmax of S_j while P_{j-1}·V_{j-1} is still on
//    the tensor cores. PINGPONG=1 (two consumer warpgroups) also orders the
//    warpgroups' GEMM issues with named barriers, so one warpgroup's softmax
//    runs under the other's GEMMs.
//  * Masks. Only key tiles that cross the causal diagonal or the end of SKV are
//    masked; key tiles wholly above the diagonal are never loaded.
//  * Work units are (query tile, head, key split). PACK_GQA=1 packs the H/HKV
//    query heads that share a key/value head into the rows of one tile (their
//    Q and O rows are contiguous), so K and V are read once per group: the
//    decode case. SPLIT_KV > 1 cuts a unit's key tiles into splits run by
//    different CTAs; each writes its unnormalised O, row max and row sum to
//    `workspace`, and the warpgroup arriving last at the tile's counter (in
//    `counters`, re-armed for the next launch) merges them. Causal units run
//    longest first. PERSISTENT=1 launches CTAS_PER_SM CTAs per SM that loop
//    over the units in a fixed order (the producer runs ahead into the next
//    unit's loads): a stride, or causal, pairs of a long and a short query
//    tile of one head, of equal work (paired_unit); 2 the same with each CTA
//    taking the next unit from a global counter when it is ready for one; 0
//    launches one CTA per unit.
//    The producer hands each unit to the consumers with its Q tile: it writes
//    the unit to the CTA's slot in `counters` before the arrival on the
//    tile's mbarrier (a global slot: compute-sanitizer's racecheck does not
//    follow a shared-memory handover through an mbarrier). L2_HEADS > 0
//    orders the units in sections of that many heads, so the CTAs running at
//    once share a few heads' K and V in L2 instead of streaming every head's
//    from memory.
//
//    UNIT_OVERLAP=1 (persistent) runs a CTA's units as one stream of key
//    tiles: the next unit's first Q·Kᵀ is issued beside this unit's last
//    P·V, so neither the epilogue nor a unit's first softmax leaves the
//    tensor cores waiting. CTAS_PER_SM=2 (one-warp producers) keeps two CTAs
//    on each SM (and launches two per SM when persistent), so one CTA's
//    softmax and epilogue run under the other's GEMMs without ping-pong.
//    EARLY=1: the thread that initialises the barriers issues the CTA's
//    first unit's Q and first STAGES key tiles before the set-up barrier
//    (early_loads), so that their latency runs under the set-up and the
//    producer's start; the producer skips those loads and its first wait
//    for a free Q buffer.
//  * Stores. O is normalised in registers and stored from them (4 bytes a
//    thread), or with O_TMA=1 written into a per-warpgroup staging tile in
//    shared memory (the 128-byte swizzle) and stored by one thread's TMA copy
//    per 64-column panel, through a 3-D map over [B*H, S, D] that clips the
//    rows past S; a warpgroup waits for its previous store before reusing the
//    staging.
//
// FP8 (SDPA_FP8=1, the sdpa_fp8_sm90 template, entry sdpa_fp8_sm90): Q, K
// and V in e4m3 with descale factors (per tensor, times per (batch, key/value
// head) factors with FP8_DESCALE_PER_HEAD=1), O in fp16 or bf16. The same
// flow, with the differences FP8 wgmma brings:
//  * Q·Kᵀ is wgmma m64nBLOCK_Nk32 e4m3: a k32 slice is 32 bytes of a row, as a
//    16-bit k16 slice is, so the tiles and descriptors are the 16-bit ones in
//    bytes (at D = 64 the rows are 64 bytes: the 64-byte swizzle).
//  * FP8 operands must be K-major, so P·V needs Vᵀ. V lands by TMA unswizzled
//    in one of two raw buffers; the producer warpgroup's warps 1-3 (the
//    transposer; warp 0 issues the copies) write it into the stage as Vᵀ, 128
//    keys per 128-byte swizzled panel, and arrive on the stage's V barrier.
//  * P goes to P·V as e4m3 A fragments from registers. A thread's
//    accumulators of a 32-key slice are keys {2t, 2t+1, 8+2t, 9+2t} (+16),
//    not the 4 consecutive k an 8-bit fragment holds, so slot 4t+i of a 16-key
//    group holds key {2t, 2t+1, 8+2t, 9+2t}[i]: P packs without shuffles and
//    the transposer writes Vᵀ's keys in that order.
//  * P is scaled by 256 (exp2 of the score minus the row max, plus 8) so that
//    its e4m3 rounding uses the format's upper binades; the row sums carry
//    the same factor, which cancels in O = Σ P·V / Σ P.
//  * The descales fold into the softmax scale (q, k) and O's normalisation (v).
//  FP8 needs the producer warpgroup (PRODUCER=1): with two or three consumer
//  warpgroups it keeps 56 registers (the consumers 224 or 152).
//  V_PACK=1 (V as it is stored, a tunable): the launch first writes Vᵀ into a
//  scratch buffer, every thread of every CTA taking part (pack_vt below), in
//  the transposer's key order; the producer then loads it by TMA as it loads
//  a stored Vᵀ, and there is no transposer.
//  V_TRANSPOSED=1 (V stored as Vᵀ, [B, HKV, D, SKV], SKV a multiple of 16):
//  Vᵀ tiles land by TMA as they are (128-key panels in the 128-byte swizzle,
//  or, for 64- and 192-key tiles, 64-key panels in the 64-byte one), and
//  there is no transposer (the producer keeps 24 or 32 registers, the
//  consumers 240 or 160). P's fragment
//  order is then made on the Q·Kᵀ side: K is loaded through a 5-D view whose
//  box puts key 16h + 4m + 2b + e in row 16h + 8b + 2m + e of the tile, so in
//  each 16-key group thread t = lane % 4 holds keys 4t + {0, 1} in its first
//  accumulator pair and 4t + {2, 3} in its second: P packs in key order.
//
// Tunables (spec.toml lists their values): BLOCK_N, CONSUMER_WG, STAGES,
// PRODUCER, REG_SPLIT, OVERLAP, PINGPONG, Q_IN_REGS, SPLIT_KV, PACK_GQA,
// PERSISTENT, L2_HEADS, UNIT_OVERLAP, CTAS_PER_SM, O_TMA, EARLY. Problem: HEAD_DIM
// (64, 128, 256), IS_CAUSAL; FP8: SDPA_FP8, FP8_DESCALE_PER_HEAD, V_TRANSPOSED, and the tunable V_PACK.

#include "evotune_ptx.cuh"
#include "evotune_sm90.cuh"

#ifndef SDPA_FP8
#define SDPA_FP8 0
#endif
#ifndef FP8_DESCALE_PER_HEAD
#define FP8_DESCALE_PER_HEAD 0
#endif
#ifndef V_TRANSPOSED
#define V_TRANSPOSED 0
#endif
#ifndef V_PACK
#define V_PACK 0
#endif
// FP8: Vᵀ reaches the stages by TMA, stored so (V_TRANSPOSED) or packed so
// at the start of the launch (V_PACK); otherwise the producer transposes V.
#define SDPA_VT_TMA (V_TRANSPOSED || V_PACK)
#if SDPA_FP8
#include "evotune_sm90_fp8.cuh"
#endif

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef IS_CAUSAL
#define IS_CAUSAL 0
#endif
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef CONSUMER_WG
#define CONSUMER_WG 2
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef PRODUCER
#define PRODUCER 1
#endif
#ifndef REG_SPLIT
#define REG_SPLIT 1
#endif
#ifndef OVERLAP
#define OVERLAP 1
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef Q_IN_REGS
#define Q_IN_REGS 0
#endif
#ifndef SPLIT_KV
#define SPLIT_KV 1
#endif
#ifndef PACK_GQA
#define PACK_GQA 0
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef L2_HEADS
#define L2_HEADS 0
#endif
#ifndef UNIT_OVERLAP
#define UNIT_OVERLAP 0
#endif
#ifndef CTAS_PER_SM
#define CTAS_PER_SM 1
#endif
#ifndef O_TMA
#define O_TMA 0
#endif
#ifndef EARLY
#define EARLY 0
#endif

namespace sdpa_sm90 {

#if defined(EVOTUNE_DTYPE_BF16)
[[maybe_unused]] constexpr bool kBF16 = true;
#else
[[maybe_unused]] constexpr bool kBF16 = false;
#endif

constexpr bool kFP8 = SDPA_FP8 == 1;
constexpr bool kVT = kFP8 && V_TRANSPOSED == 1;  // FP8 with V stored transposed: K's rows permuted
constexpr bool kVTma = kFP8 && SDPA_VT_TMA;      // FP8, Vᵀ by TMA: no transposer
constexpr int kD = HEAD_DIM;
constexpr int kBN = BLOCK_N;
constexpr int kCWG = CONSUMER_WG;
constexpr int kBM = 64 * kCWG;
constexpr int kRowBytes = kFP8 ? kD : 2 * kD;       // a Q, K or V row
constexpr int kSw = kRowBytes >= 128 ? 128 : 64;    // the Q and K tiles' swizzle (64: FP8 at D = 64)
constexpr int kPanels = kRowBytes / kSw;            // swizzle-wide panels of a row
constexpr int kPanelCols = kFP8 ? kSw : kSw / 2;    // elements of a panel row
constexpr int kQBytes = kBM * kRowBytes;            // the Q tile
constexpr int kKVBytes = kBN * kRowBytes;           // one K (or V as it lands) tile
// FP8: keys per panel of the Vᵀ the consumers read, the row of its swizzle:
// 128 (the 128-byte swizzle), or 64 (64-byte) where V is stored transposed
// and 128 does not divide the tile (the transposer fills 128-key panels).
constexpr int kVPanel = kVTma && kBN % 128 != 0 ? 64 : 128;
// The V the consumers read: the tile itself, or (FP8) Vᵀ in kVPanel-key panels.
constexpr int kVBytes = kFP8 ? (kBN + kVPanel - 1) / kVPanel * kD * kVPanel : kKVBytes;
constexpr int kStageBytes = kKVBytes + kVBytes;     // K then V
constexpr int kVRaw = kFP8 && !kVTma ? 2 : 0;       // FP8: buffers V lands in before the transpose
constexpr int kRawOffset = kQBytes + STAGES * kStageBytes;
// O_TMA: each consumer warpgroup's 64 rows of O staged for a TMA store, as
// 64-column panels of 128-byte rows in the 128-byte swizzle.
constexpr int kOStage = O_TMA ? 64 * kD * 2 : 0;
constexpr int kOOffset = kRawOffset + kVRaw * kKVBytes;
constexpr int kBarOffset = kOOffset + kCWG * kOStage;
constexpr int kSmemBytes = 1024 + kBarOffset + 256;  // alignment slack, tiles, barriers
constexpr int kProducerThreads = PRODUCER ? 128 : 32;
constexpr int kConsumerThreads = 128 * kCWG;
constexpr int kThreads = kConsumerThreads + kProducerThreads;

// Timeline build option (EVOTUNE_SM90_TIMELINE, evotune_sm90.cuh; defined by
// tools/timeline.py in a copy of the spec; off in the product): thread 0
// (consumer warpgroup 0) stamps into its CTA's row of 32: 0 entry, 1 SM id,
// 2 past the set-up barrier, 21 past V_PACK's pass; for units i < kTlUnits,
// the unit taken (its Q landed, 3 + 2i) and finished (its epilogue done and
// O's stores issued, 4 + 2i); 22 the first unit's first key tile landed;
// in its key-tile loop (with OVERLAP) 23 the first tile's softmax done, 24 /
// 25 the second / third tile's step done, 26 the last tile's, 27 the last
// P·V done; 15
// the consumers' exit; 20 the units taken + 1. The producer's thread: 16 its
// start, 17 its first Q load issued, 18 its first K tile's, 19 its last load.
constexpr int kTlUnits = 6;
constexpr int kSAcc = kBN / 2;  // fp32 S accumulators per thread
constexpr int kOAcc = kD / 2;   // fp32 O accumulators per thread
constexpr int kKSlice = kFP8 ? 32 : 16;  // k of one wgmma (32 bytes of a row either way)
constexpr int kPK = kBN / kKSlice;       // k-slices of P (A fragments of the P·V product)
constexpr int kQK = kD / kKSlice;        // k-slices of Q
constexpr bool kPingPong = PINGPONG == 1;
// setmaxnreg with a producer warpgroup beside two to four consumer warpgroups:
// two take 240 (24 left to the producer) or 232 (40); three take 160 (32),
// four 112 (32). FP8's producer transposes V: it keeps 56 (the consumers 224,
// 152 or 104). setmaxnreg.inc only takes what the CTA's warps gave back
// with .dec: the CTA keeps the registers it launched with (ptxas's count
// times its threads: 168 x 384, 128 x 512, 96 x 640), and a consumer
// asking for more than that leaves waits forever.
constexpr bool kSetMaxNReg = PRODUCER == 1 && kCWG >= 2;
constexpr bool kTransposing = kFP8 && !kVTma;
[[maybe_unused]] constexpr int kRegProducer = kTransposing ? 56 : (kCWG >= 3 ? 32 : (REG_SPLIT ? 24 : 40));
[[maybe_unused]] constexpr int kRegConsumer =
    kTransposing ? (kCWG == 4 ? 104 : kCWG == 3 ? 152 : 224)
                 : (kCWG == 4 ? 112 : kCWG == 3 ? 160 : (REG_SPLIT ? 240 : 232));
constexpr unsigned kWarpArrivals = 4 * kCWG;  // every consumer warp releases a buffer
constexpr int kTransposers = kTransposing ? 3 : 0;  // FP8: producer warps 1-3 write Vᵀ

// Named barrier ids (0 is __syncthreads).
constexpr int kBarWg = 1;    // + wg: one consumer warpgroup (split-KV merge)
constexpr int kBarTurn = 5;  // + wg: ping-pong turn of warpgroup wg

static_assert(kD == 64 || kD == 128 || kD == 256, "HEAD_DIM is 64, 128 or 256");
static_assert(kBN == 64 || kBN == 96 || kBN == 128 || kBN == 160 || kBN == 176 || kBN == 192 || (kFP8 && kBN == 256),
              "BLOCK_N is 64, 96, 128, 160, 176 or 192, or 256 in FP8 (a wgmma N with its A, and a multiple of 16)");
static_assert(kCWG >= 1 && kCWG <= 4, "1 to 4 consumer warpgroups");
static_assert(PRODUCER == 0 || kCWG >= 2 || kFP8, "a producer warpgroup hands registers to 2 or 3 consumer warpgroups");
static_assert(!kFP8 || (PRODUCER == 1 && kBN % 32 == 0), "FP8: a producer warpgroup (it transposes V), k32 slices of keys");
static_assert(!kPingPong || (kCWG == 2 && OVERLAP == 1), "ping-pong: two overlapped consumer warpgroups");
static_assert(STAGES >= 2 && STAGES <= 4, "2..4 stages");
static_assert(CTAS_PER_SM == 1 || (CTAS_PER_SM == 2 && PRODUCER == 0), "two CTAs per SM: one-warp producers");
static_assert(!UNIT_OVERLAP || (OVERLAP == 1 && PERSISTENT > 0), "unit overlap: overlapped persistent CTAs");
static_assert(kSmemBytes <= 232448, "over 227 KB of shared memory");
static_assert(!kVTma || kBN % 64 == 0, "Vᵀ by TMA: tiles of whole 64- or 128-key boxes");
static_assert(kOOffset % 1024 == 0, "O's staging on a swizzle atom boundary");
static_assert(!kFP8 || kBN * kD / 64 % 32 == 0, "the transposer's (16-key group, 4-byte word) pairs fill whole warps");

struct Problem {
  int B, H, HKV, SQ, SKV;
  int G;         // query heads per key/value head
  int L;         // rows of a unit's sequence: S, or G*S with PACK_GQA
  int m_tiles;   // query tiles per unit sequence
  int heads;     // unit sequences: B*H, or B*HKV with PACK_GQA
  int units;     // m_tiles * heads * SPLIT_KV
};

__device__ __forceinline__ Problem make_problem(int B, int H, int HKV, int SQ, int SKV) {
  Problem p;
  p.B = B;
  p.H = H;
  p.HKV = HKV;
  p.SQ = SQ;
  p.SKV = SKV;
  p.G = H / HKV;
  p.L = PACK_GQA ? p.G * SQ : SQ;
  p.m_tiles = (p.L + kBM - 1) / kBM;
  p.heads = PACK_GQA ? B * HKV : B * H;
  p.units = p.m_tiles * p.heads * SPLIT_KV;
  return p;
}

// One work unit as both roles see it.
struct Work {
  bool live;        // this key split has work (splits past the tile's count do not)
  int tile;         // (query tile, head) index: counters and workspace slot
  int z, nsplit;    // key split and the tile's number of splits
  int row_base;     // global Q/O row of the unit's row 0
  int seq;          // the unit's sequence (row_base / L): O's 3-D map's outer coordinate
  int m0;           // the tile's first row in the unit sequence
  int kv;           // key/value head (b*HKV + hk), the 3-D maps' outer coordinate
  int t_begin, t_end;  // key tiles of this split
  int mask_from;    // key tiles from here on need the mask
#if SDPA_FP8
  float sl2, os;    // the consumers': softmax scale in log2 units and O's factor, with the unit's descales
#endif
};

// The sizes decode divides by, and two ways to divide by them. The consumers
// decode at every unit, between its Q's landing and its first Q·Kᵀ: there
// each size's multiplier and shift (Granlund-Montgomery: q = (hi(a * mul) +
// a) >> shift, exact for 0 <= a < 2^31) come from shared memory, found once
// by the thread that sets up the barriers (put_divs), in place of a division
// at run time (a reciprocal on the MUFU pipe and its corrections) each.
enum DivIdx { kDivPer, kDivHeads, kDivH, kDivHKV, kDivG, kDivSQ, kDivs };

__device__ __forceinline__ int size_of(const Problem& p, DivIdx i) {
  switch (i) {
    case kDivPer: return (L2_HEADS > 0 ? L2_HEADS : 1) * p.m_tiles;  // units (of split 0) per whole section
    case kDivHeads: return p.heads;
    case kDivH: return p.H;
    case kDivHKV: return p.HKV;
    case kDivG: return p.G;
    default: return p.SQ;
  }
}

// Division as written (the producer's: few registers, one decode per unit ahead of the consumers).
struct PlainDiv {
  const Problem& p;
  __device__ __forceinline__ int operator()(DivIdx i, int a) const { return a / size_of(p, i); }
};

// By multiplier and shift (the consumers').
struct FastDiv {
  const Problem& p;
  unsigned magic;  // shared memory, kDivs pairs (mul, shift)
  __device__ __forceinline__ int operator()(DivIdx i, int a) const {
    unsigned mul, shift;
    asm("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(mul), "=r"(shift) : "r"(magic + 8u * i) : "memory");
    return (int)((__umulhi((unsigned)a, mul) + (unsigned)a) >> shift);
  }
};

// Size i's pair (a 64-bit division: one size a thread, in parallel).
__device__ __forceinline__ void put_div(const Problem& p, uint2* magic, int i) {
  const unsigned d = (unsigned)max(1, size_of(p, (DivIdx)i));
  const unsigned shift = 32 - __clz(d - 1);  // ceil(log2 d)
  magic[i] = make_uint2((unsigned)(((1ull << 32) * ((1ull << shift) - d)) / d + 1), shift);
}

template <class Div>
__device__ __forceinline__ Work decode(const Problem& p, int u, const Div& div) {
  const auto rem = [&](DivIdx i, int a, int q) { return a - q * size_of(p, i); };
  Work w;
  w.z = u % SPLIT_KV;
  const int rest = u / SPLIT_KV;
  // Units run in sections of L2_HEADS heads (0: all heads in one section);
  // within a section the head varies fastest, then the query tile.
  int hu, lin;
  if (L2_HEADS > 0 && L2_HEADS < p.heads) {
    const int sec = div(kDivPer, rest), within = rem(kDivPer, rest, sec);
    const int n = min(L2_HEADS, p.heads - sec * L2_HEADS);  // the last may be ragged
    if (n == L2_HEADS) {  // by a constant: no division at run time but for the last section's
      hu = sec * L2_HEADS + within % L2_HEADS;
      lin = within / L2_HEADS;
    } else {
      hu = sec * L2_HEADS + within % n;
      lin = within / n;
    }
  } else {
    lin = div(kDivHeads, rest);
    hu = rem(kDivHeads, rest, lin);
  }
  const int mt = IS_CAUSAL ? p.m_tiles - 1 - lin : lin;  // causal: longest tiles first
  w.tile = mt * p.heads + hu;
  if (PACK_GQA) {
    const int b = div(kDivHKV, hu), hk = rem(kDivHKV, hu, b);
    w.kv = hu;
    w.row_base = (b * p.H + hk * p.G) * p.SQ;
  } else {
    const int b = div(kDivH, hu), h = rem(kDivH, hu, b);
    w.kv = b * p.HKV + div(kDivG, h);
    w.row_base = hu * p.SQ;
  }
  w.seq = hu;
  w.m0 = mt * kBM;
  int n_keys = p.SKV, lo_keys = p.SKV;  // keys the last / first query sees
  if (IS_CAUSAL) {
    const int r_end = min(w.m0 + kBM, p.L);
    const int first = rem(kDivSQ, w.m0, div(kDivSQ, w.m0)), last = rem(kDivSQ, r_end - 1, div(kDivSQ, r_end - 1));
    const bool wraps = r_end - w.m0 > p.SQ || first > last;
    const int q_lo = wraps ? 0 : first, q_hi = wraps ? p.SQ - 1 : last;
    const int off = p.SKV - p.SQ;
    n_keys = max(0, min(p.SKV, q_hi + off + 1));
    lo_keys = max(0, min(p.SKV, q_lo + off + 1));
  }
  const int n_tiles = (n_keys + kBN - 1) / kBN;
  w.nsplit = max(1, min(SPLIT_KV, n_tiles));
  w.live = w.z < w.nsplit;
  w.t_begin = (int)((long long)w.z * n_tiles / w.nsplit);
  w.t_end = (int)((long long)(w.z + 1) * n_tiles / w.nsplit);
  w.mask_from = lo_keys / kBN;
  return w;
}

__device__ __forceinline__ Work decode(const Problem& p, int u) { return decode(p, u, PlainDiv{p}); }

// A ring position: stage and the parity of its current phase.
template <int N>
struct RingOf {
  int stage = 0;
  unsigned phase = 0;
  __device__ __forceinline__ void next() {
    if (++stage == N) {
      stage = 0;
      phase ^= 1u;
    }
  }
};
using Ring = RingOf<STAGES>;

struct Smem {
  unsigned q, ring;                    // tiles
  unsigned divs;                       // decode's multipliers and shifts (FastDiv)
  unsigned o;                          // O_TMA: the warpgroups' O staging
  unsigned q_full, q_empty;            // mbarriers
  unsigned k_full, v_full;             // + 8 * stage: the tile landed (FP8's Vᵀ: written)
  unsigned k_empty, v_empty;           // + 8 * stage: every consumer warp is done with it
#if SDPA_FP8 && !SDPA_VT_TMA
  unsigned raw, raw_full, raw_empty;   // V as it lands, + 8 * buffer: landed / transposed
  __device__ __forceinline__ unsigned raw_tile(int b) const { return raw + b * kKVBytes; }
#endif
  __device__ __forceinline__ unsigned k_tile(int st) const { return ring + st * kStageBytes; }
  __device__ __forceinline__ unsigned v_tile(int st) const { return ring + st * kStageBytes + kKVBytes; }
};

// `counters` holds a unit slot per CTA (the unit of the Q tile in flight, or
// >= units for none), the unit counter, then split-KV arrivals per tile.
// Computed where used, after setmaxnreg: values live across it are spilled.
// Written and read at CTA scope (the mbarrier orders them), so the read may
// hit in L1: a volatile (system-scope) read went to L2 at every unit's start
// while the consumers waited.
__device__ __forceinline__ unsigned* unit_slot(unsigned* counters) { return counters + blockIdx.x; }
__device__ __forceinline__ void put_unit(unsigned* counters, int u) {
  asm volatile("st.relaxed.cta.global.b32 [%0], %1;\n" ::"l"(unit_slot(counters)), "r"(u) : "memory");
}
__device__ __forceinline__ int get_unit(unsigned* counters) {
  int u;
  asm volatile("ld.relaxed.cta.global.b32 %0, [%1];\n" : "=r"(u) : "l"(unit_slot(counters)) : "memory");
  return u;
}
__device__ __forceinline__ unsigned* unit_counter(unsigned* counters) { return counters + gridDim.x; }
__device__ __forceinline__ unsigned* split_arrivals(unsigned* counters) { return counters + gridDim.x + 1; }

// ------------------------------------------------------------ producer

// PERSISTENT=1, causal: a fixed order whose CTAs get equal work. A unit's
// key tiles grow linearly with its query tile, so a fixed stride gives CTAs
// whose blockIdx.x meets the long tiles more work than others (12% of the SM
// time idle at 4,16,4096,128 with 32 query tiles a head and 132 CTAs). Here
// the units go in pairs of one head's query tiles j and m_tiles - 1 - j
// (together as long as any other pair), in the heads' L2 sections as decode
// orders them; CTA c takes pair c + r * gridDim.x in round r, its two units
// back to back, and the last round, short of a pair a CTA, is dealt out so
// that every CTA gets a pair or one unit of one. The CTA's k-th unit: its
// index for decode, -1 for the absent second half of an odd count's middle
// tile, or >= units when the CTA is done.
constexpr bool kPairedOrder = PERSISTENT == 1 && IS_CAUSAL && SPLIT_KV == 1;

__device__ __forceinline__ int paired_unit(const Problem& p, int k) {
  const int G = (int)gridDim.x, c = (int)blockIdx.x;
  const int half = (p.m_tiles + 1) / 2, pairs = half * p.heads;
  const int rounds = pairs / G, f = max(0, 2 * (pairs - rounds * G) - G);
  int pair, member;
  if (k < 2 * rounds || c < f) {
    pair = (k >> 1) * G + c;
    member = k & 1;
    if (k >= 2 * rounds + 2) return p.units;
  } else {
    const int s = c - f;
    pair = rounds * G + f + (s >> 1);
    member = s & 1;
    if (k > 2 * rounds || pair >= pairs) return p.units;
  }
  // The pair's section of heads, head and long tile j, as decode counts them.
  const int hs = (L2_HEADS > 0 && L2_HEADS < p.heads) ? L2_HEADS : p.heads;
  const int sec = pair / (hs * half), within = pair - sec * hs * half;
  const int n = min(hs, p.heads - sec * hs);
  const int j = within / n, hi = within - j * n;
  const int lin = member ? p.m_tiles - 1 - j : j;
  if (member && lin == j) return -1;
  return sec * hs * p.m_tiles + lin * n + hi;
}

// The CTA's first unit.
__device__ __forceinline__ int first_unit(const Problem& p) {
  if constexpr (kPairedOrder) return paired_unit(p, 0);
  return (int)blockIdx.x;
}

// The unit after its k-th (u) for this CTA. PERSISTENT=2: the next from the
// global counter (CTAs start at their blockIdx.x, the counter counts on from
// gridDim.x); the fetch that takes the last value re-arms it for the next
// launch, every CTA having made its final fetch by then.
__device__ __forceinline__ int next_unit(const Problem& p, int u, int k, unsigned* sched) {
  if constexpr (PERSISTENT == 2) {
    const unsigned v = atomicAdd(sched, 1u);
    if (v == (unsigned)(p.units - 1)) *sched = 0u;
    return (int)gridDim.x + (int)v;
  } else if constexpr (kPairedOrder) {
    return paired_unit(p, k + 1);
  } else {
    return u + (int)gridDim.x;
  }
}

// The unit's Q tile, on q_full (its slot in `counters` released by the arrival).
__device__ __forceinline__ void load_q(const Smem& sm, const void* tm_q, unsigned* counters, int u, const Work& w) {
  using namespace evotune_sm90;
  put_unit(counters, u);
  mbar_arrive_expect_tx(sm.q_full, kQBytes);
#pragma unroll
  for (int pn = 0; pn < kPanels; ++pn)
    tma_load_2d(sm.q + pn * kBM * kSw, tm_q, pn * kPanelCols, w.row_base + w.m0, sm.q_full);
}

#if SDPA_FP8 && !SDPA_VT_TMA
using RawRing = RingOf<kVRaw>;  // the transposer's raw buffers
#else
struct RawRing {};  // none
#endif

// Key tile t of the unit: K and V (FP8: Vᵀ by TMA, or V into the transposer's
// raw buffers) into the ring's stage, once the consumers have released it.
__device__ __forceinline__ void load_kv(const Problem& p, const Smem& sm, const void* tm_k, const void* tm_v,
                                        const Work& w, int t, Ring& ring, RawRing& raw) {
  using namespace evotune_sm90;
  (void)p;
  (void)raw;
  mbar_wait(sm.k_empty + 8 * ring.stage, ring.phase ^ 1u);
  mbar_arrive_expect_tx(sm.k_full + 8 * ring.stage, kKVBytes);
#pragma unroll
  for (int pn = 0; pn < kPanels; ++pn) {
#if SDPA_FP8
    // K through a 5-D map: (column, key) as (c0, c1, head c2) with two unit
    // dims, or, V_TRANSPOSED, the permuting view (c4: 16-key groups of all heads).
    if constexpr (kVT)
      tma_load_5d(sm.k_tile(ring.stage) + pn * kBN * kSw, tm_k, pn * kPanelCols, 0, 0, 0,
                  (w.kv * p.SKV + t * kBN) >> 4, sm.k_full + 8 * ring.stage);
    else
      tma_load_5d(sm.k_tile(ring.stage) + pn * kBN * kSw, tm_k, pn * kPanelCols, t * kBN, w.kv, 0, 0,
                  sm.k_full + 8 * ring.stage);
#else
    tma_load_3d(sm.k_tile(ring.stage) + pn * kBN * kSw, tm_k, pn * kPanelCols, t * kBN, w.kv,
                sm.k_full + 8 * ring.stage);
#endif
  }
#if SDPA_FP8 && SDPA_VT_TMA
  // Vᵀ as it is (or as V_PACK packed it): per panel, kD rows of kVPanel keys in that many bytes' swizzle.
  mbar_wait(sm.v_empty + 8 * ring.stage, ring.phase ^ 1u);
  mbar_arrive_expect_tx(sm.v_full + 8 * ring.stage, kBN * kD);
#pragma unroll
  for (int pn = 0; pn < kBN / kVPanel; ++pn)
    tma_load_3d(sm.v_tile(ring.stage) + pn * kD * kVPanel, tm_v, t * kBN + pn * kVPanel, 0, w.kv,
                sm.v_full + 8 * ring.stage);
#elif SDPA_FP8
  // The whole tile unswizzled into a raw buffer; the transposer fills the stage.
  mbar_wait(sm.raw_empty + 8 * raw.stage, raw.phase ^ 1u);
  mbar_arrive_expect_tx(sm.raw_full + 8 * raw.stage, kKVBytes);
  tma_load_3d(sm.raw_tile(raw.stage), tm_v, 0, t * kBN, w.kv, sm.raw_full + 8 * raw.stage);
  raw.next();
#else
  mbar_wait(sm.v_empty + 8 * ring.stage, ring.phase ^ 1u);
  mbar_arrive_expect_tx(sm.v_full + 8 * ring.stage, kKVBytes);
#pragma unroll
  for (int pn = 0; pn < kPanels; ++pn)
    tma_load_3d(sm.v_tile(ring.stage) + pn * kBN * kSw, tm_v, pn * kPanelCols, t * kBN, w.kv,
                sm.v_full + 8 * ring.stage);
#endif
  ring.next();
}

// The CTA's first loads are issued by the thread that initialises the
// barriers, before the set-up barrier: the first unit's Q and up to kEarlyTiles
// of its key tiles (the ring's stages are all free), so that their latency
// runs under the set-up, setmaxnreg and the producer's first decode (~1 us of
// a launch: the first Q landed ~3.4 us in at 2,8,2048,64, issued at 1.1 us).
// EARLY=1 (a tunable: it pays where a CTA runs few or short units, and a
// different code layout costs elsewhere); not with V_PACK (the launch packs V
// first, long enough for any load), and no tiles for the transposer (its raw
// buffers). The producer then skips what was issued: its first unit's Q and
// first tiles.
constexpr bool kEarly = EARLY == 1 && !(kFP8 && V_PACK);
constexpr int kEarlyTiles = kFP8 && !kVTma ? 0 : STAGES;

// The first unit if the loop below takes it as its k = 0 (live, not skipped).
__device__ __forceinline__ bool first_live(const Problem& p, int& u, Work& w) {
  u = first_unit(p);
  if (u < 0 || u >= p.units) return false;
  w = decode(p, u);
  return w.live;
}

// A value the compiler cannot see through: early_loads' problem and first
// unit are computed from these, not shared with the roles' (which would then
// live across setmaxnreg, spilled).
__device__ __forceinline__ int opaque(int x) {
  asm volatile("" : "+r"(x));
  return x;
}

__device__ __forceinline__ int early_tiles(const Work& w) { return min(kEarlyTiles, w.t_end - w.t_begin); }

__device__ __forceinline__ void early_loads(const Problem& p, const Smem& sm, const void* tm_q, const void* tm_k,
                                            const void* tm_v, unsigned* counters) {
  using namespace evotune_sm90;
  int u;
  Work w;
  if (!first_live(p, u, w)) return;
  load_q(sm, tm_q, counters, u, w);
  tl_mark_any(17);
  Ring ring;
  RawRing raw;
  for (int i = 0; i < early_tiles(w); ++i) load_kv(p, sm, tm_k, tm_v, w, w.t_begin + i, ring, raw);
  tl_mark_any(18);
}

__device__ __forceinline__ void producer(const Problem& p, const Smem& sm, const void* tm_q, const void* tm_k,
                                         const void* tm_v, unsigned* counters) {
  using namespace evotune_sm90;
  Ring ring;
  RawRing raw;
  unsigned q_phase = 0;
  tl_mark_any(16);
  int next = first_unit(p);
  for (int k = 0; next < p.units; ++k) {
    const int u = next;
    next = next_unit(p, u, k, unit_counter(counters));
    if (u < 0) continue;
    const Work w = decode(p, u);
    if (!w.live) continue;
    // k = 0 is the first unit early_loads issued (first_live: the same test).
    // Its Q's wait for a free buffer was the fresh barrier's: waiting here
    // would be wrong, not late, as the consumers may have released that Q
    // already (Q in registers, or a unit of no more than kEarlyTiles tiles),
    // and a parity wait cannot tell that phase from the next.
    int t = w.t_begin;
    if (kEarly && k == 0) {
      for (int i = 0; i < early_tiles(w); ++i) ring.next();
      t += early_tiles(w);
    } else {
      mbar_wait(sm.q_empty, q_phase ^ 1u);
      load_q(sm, tm_q, counters, u, w);
    }
    q_phase ^= 1u;
    for (; t < w.t_end; ++t) load_kv(p, sm, tm_k, tm_v, w, t, ring, raw);
  }
  tl_mark_any(19);
  // No more units: an arrival without a tile.
  mbar_wait(sm.q_empty, q_phase ^ 1u);
  put_unit(counters, p.units);
  mbar_arrive(sm.q_full);
}

// ------------------------------------------------------------ FP8: V transposed

#if SDPA_FP8 && !SDPA_VT_TMA

// One tile of V (kBN keys x kD bytes, unswizzled, at raw) written as Vᵀ at vt:
// row n (a column of V) holds the tile's keys in 128-key panels (kD rows of
// 128 bytes, 128-byte swizzle: 16-byte chunk c of row n at c ^ (n & 7)), slot
// 4t+i of each 16-key group holding key {2t, 2t+1, 8+2t, 9+2t}[i] of the group
// (P's fragment order, see the opening comment). A thread takes a (16-key
// group, 4-byte word of V's row) pair at a time: 16 words in, a 4x4 byte
// transpose per 4 keys, four 16-byte chunks out (rows 4w .. 4w+3). Lanes read
// consecutive words of one key row (no bank conflicts); each lane rotates the
// order of its four row writes by (lane >> 1) & 3, so the 8 lanes of a store
// phase hit 8 different chunks of the swizzle.
__device__ __forceinline__ void transpose_v(unsigned raw, unsigned vt, int tw, int lane) {
  constexpr int kWords = kD / 4;                // 4-byte words of a V row
  constexpr int kPairs = kBN / 16 * kWords;
  const int r = (lane >> 1) & 3;
  // Byte selector of a word rotated by r bytes (byte j of the result = byte (j + r) & 3).
  const unsigned rot = (unsigned)(((r + 0) & 3) | ((r + 1) & 3) << 4 | ((r + 2) & 3) << 8 | ((r + 3) & 3) << 12);
#pragma unroll 1
  for (int pi = tw * 32 + lane; pi < kPairs; pi += 32 * kTransposers) {
    const int q = pi / kWords, wd = pi % kWords;
    const unsigned src = raw + (unsigned)(16 * q * kRowBytes + 4 * wd);
    unsigned out[4][4];  // [t][j]: slots 4t .. 4t+3 of row 4wd + ((j + r) & 3)
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      unsigned v[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = (i < 2 ? 2 * t + i : 8 + 2 * t + (i - 2));
        asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v[i]) : "r"(src + key * kRowBytes));
        v[i] = __byte_perm(v[i], 0u, rot);
      }
      const unsigned lo01 = __byte_perm(v[0], v[1], 0x5140), hi01 = __byte_perm(v[0], v[1], 0x7362);
      const unsigned lo23 = __byte_perm(v[2], v[3], 0x5140), hi23 = __byte_perm(v[2], v[3], 0x7362);
      out[t][0] = __byte_perm(lo01, lo23, 0x5410);
      out[t][1] = __byte_perm(lo01, lo23, 0x7632);
      out[t][2] = __byte_perm(hi01, hi23, 0x5410);
      out[t][3] = __byte_perm(hi01, hi23, 0x7632);
    }
    const unsigned panel = vt + (unsigned)((q / 8) * kD * 128);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = 4 * wd + ((j + r) & 3);
      const unsigned dst = panel + n * 128 + (((q % 8) ^ (n & 7)) << 4);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(out[0][j]), "r"(out[1][j]),
                   "r"(out[2][j]), "r"(out[3][j])
                   : "memory");
    }
  }
}

// Producer warps 1-3 (FP8): every unit the producer hands over (they watch
// the Q handover like the consumers, and count in on Q's release so that the
// next unit's slot waits for them), then each key tile's V as it lands,
// transposed into the stage; the consumers wait for all three warps.
__device__ __forceinline__ void transposer(const Problem& p, const Smem& sm, unsigned* counters, int tw, int lane) {
  using namespace evotune_sm90;
  Ring ring;
  RingOf<kVRaw> raw;
  unsigned q_phase = 0;
  for (;;) {
    mbar_wait(sm.q_full, q_phase);
    q_phase ^= 1u;
    const int u = get_unit(counters);
    __syncwarp();
    if (lane == 0) mbar_arrive(sm.q_empty);
    if (u >= p.units) return;
    const Work w = decode(p, u);
    for (int t = w.t_begin; t < w.t_end; ++t) {
      mbar_wait(sm.raw_full + 8 * raw.stage, raw.phase);
      mbar_wait(sm.v_empty + 8 * ring.stage, ring.phase ^ 1u);
      transpose_v(sm.raw_tile(raw.stage), sm.v_tile(ring.stage), tw, lane);
      fence_proxy_async();  // the writes, before the consumers' wgmma reads them
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(sm.v_full + 8 * ring.stage);
        mbar_arrive(sm.raw_empty + 8 * raw.stage);
      }
      ring.next();
      raw.next();
    }
  }
}

#endif  // SDPA_FP8 && !SDPA_VT_TMA

// ------------------------------------------------------------ FP8: V packed as Vᵀ (V_PACK)

#if SDPA_FP8 && V_PACK

// V_PACK=1: before anything else every thread of the launch helps write Vᵀ
// into the scratch buffer vp, [B*HKV, D, skv32] (skv32: SKV rounded up to
// 32), keeping the transposer's key order (slot 4t+i of each 16-key group
// holds key {2t, 2t+1, 8+2t, 9+2t}[i], keys past SKV zero), so that the
// producer loads it by TMA as a stored Vᵀ, K as it is, P packed as without
// V_PACK. A lane takes a (32-key span, 4-byte word of V's rows) pair at a
// time: 32 word loads, a 4x4 byte transpose per 4 keys, and four 32-byte
// stores, one per row of Vᵀ; the rows are padded to skv32 keys. A warp's
// lanes take 8 consecutive words (lane % 8) of 4 consecutive spans (lane / 8),
// so that one store instruction writes whole 128-byte lines of 8 rows and one
// load reads whole 32-byte sectors of 4 rows (32 words of one span to a warp
// had each store touch 32 lines, and the pass waited on its stores). Warps claim blocks of
// 8 words by kVPackSpans spans (evotune_sm90::grid_prepass, as gemm_sm90's
// PACK=1 does), the loads of a block's pairs all in flight before its first
// store.
constexpr int kVPackIters = 2;                // pairs per lane per claimed block
constexpr int kVPackWords = 8;                // words of V's rows per block
constexpr int kVPackSpans = 4 * kVPackIters;  // 32-key spans per block
static_assert(kD / 4 % kVPackWords == 0, "whole groups of 8 words per row of V");

// The 16 keys of group g (of a span) at word wd: 4 output words per row 4wd + j.
__device__ __forceinline__ void vt_group(const unsigned* v, uint4 (&out)[4]) {
  unsigned o[4][4];  // [t][j]: slot t of row 4wd + j
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const unsigned a = v[2 * t], b = v[2 * t + 1], c = v[8 + 2 * t], d = v[9 + 2 * t];
    const unsigned lo_ab = __byte_perm(a, b, 0x5140), hi_ab = __byte_perm(a, b, 0x7362);
    const unsigned lo_cd = __byte_perm(c, d, 0x5140), hi_cd = __byte_perm(c, d, 0x7362);
    o[t][0] = __byte_perm(lo_ab, lo_cd, 0x5410);
    o[t][1] = __byte_perm(lo_ab, lo_cd, 0x7632);
    o[t][2] = __byte_perm(hi_ab, hi_cd, 0x5410);
    o[t][3] = __byte_perm(hi_ab, hi_cd, 0x7632);
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = make_uint4(o[0][j], o[1][j], o[2][j], o[3][j]);
}

// Blocks per key/value head: groups of kVPackSpans spans by word groups, the
// word group varying fastest; a block never spans two heads.
__device__ __forceinline__ unsigned vpack_blocks_per_head(int skv) {
  const int spans = (skv + 31) / 32;
  return (unsigned)((spans + kVPackSpans - 1) / kVPackSpans * (kD / 4 / kVPackWords));
}

// Block blk of head bh: every lane of the warp takes part; the loads of all
// the block's pairs are in flight before its first store.
__device__ __forceinline__ void pack_vt_block(const unsigned char* __restrict__ V, unsigned char* __restrict__ vp,
                                              long long bh, long long blk, int skv, int lane) {
  constexpr int kGroups = kD / 4 / kVPackWords;
  const int skv32 = (skv + 31) / 32 * 32;
  const int wd = (int)(blk % kGroups) * kVPackWords + (lane & 7);
  const int sp0 = (int)(blk / kGroups) * kVPackSpans + (lane >> 3);
  unsigned v[kVPackIters][32];
#pragma unroll
  for (int i = 0; i < kVPackIters; ++i) {
    const int key0 = 32 * (sp0 + 4 * i);
    const unsigned char* src = V + (bh * skv + key0) * kD + 4 * wd;
#pragma unroll
    for (int k = 0; k < 32; ++k)
      v[i][k] = key0 + k < skv ? __ldg(reinterpret_cast<const unsigned*>(src + k * kD)) : 0u;
  }
#pragma unroll
  for (int i = 0; i < kVPackIters; ++i) {
    const int key0 = 32 * (sp0 + 4 * i);
    if (key0 >= skv32) continue;
    uint4 lo[4], hi[4];
    vt_group(v[i], lo);
    vt_group(v[i] + 16, hi);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint4* dst = reinterpret_cast<uint4*>(vp + (bh * kD + 4 * wd + j) * skv32 + key0);
      dst[0] = lo[j];
      dst[1] = hi[j];
    }
  }
}

// Every thread of the CTA takes part; returns once vp is complete and
// visible to this CTA's TMA loads.
__device__ __forceinline__ void pack_vt(const unsigned char* __restrict__ V, unsigned char* __restrict__ vp,
                                        int bh_count, int skv, unsigned* sync) {
  const unsigned bph = vpack_blocks_per_head(skv);
  evotune_sm90::grid_prepass(sync, (long long)bh_count * bph, [&](long long blk, int lane) {
    pack_vt_block(V, vp, blk / bph, blk % bph, skv, lane);
  });
}

#endif  // SDPA_FP8 && V_PACK

// ------------------------------------------------------------ consumer math

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

// Independent accumulation chains of a row's max and sum in the softmax.
// Two chains make the FP8 kernels 0-4% faster on an H200; the 16-bit ones
// 1-6% slower (ptxas schedules their softmax worse), so they keep one.
constexpr int kChains = kFP8 ? 2 : 1;
// Joins n partial results as a balanced tree.
template <int N, class Op>
__device__ __forceinline__ float join(float (&v)[N], Op op) {
#pragma unroll
  for (int w = 1; w < N; w *= 2)
#pragma unroll
    for (int i = 0; i + w < N; i += 2 * w) v[i] = op(v[i], v[i + w]);
  return v[0];
}

// Four floats as e4m3 (saturating, round to nearest), a in the low byte.
__device__ __forceinline__ unsigned pack4_e4m3(float a, float b, float c, float d) {
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(d), "f"(c));
  return (unsigned)lo | ((unsigned)hi << 16);
}

// The input type's MMAs, one k-slice each: Q·Kᵀ with Q from registers (rs)
// or shared memory (ss) and K K-major; P·V with P from registers and V
// MN-major (16 bits) or Vᵀ K-major (FP8). `accumulate` 0 overwrites.
__device__ __forceinline__ void mma_qk_rs(float (&s)[kSAcc], const unsigned (&a)[4], unsigned long long db,
                                          int accumulate) {
#if SDPA_FP8
  evotune_sm90::wgmma_f8_rs<kBN>(s, a, db, accumulate);
#else
  evotune_sm90::wgmma_rs<kBN, kBF16, 0>(s, a, db, accumulate);
#endif
}
__device__ __forceinline__ void mma_qk_ss(float (&s)[kSAcc], unsigned long long da, unsigned long long db,
                                          int accumulate) {
#if SDPA_FP8
  evotune_sm90::wgmma_f8_ss<kBN>(s, da, db, accumulate);
#else
  evotune_sm90::wgmma_ss_d<kBN, kBF16, 0>(s, da, db, accumulate);
#endif
}
__device__ __forceinline__ void mma_pv(float (&o)[kOAcc], const unsigned (&a)[4], unsigned long long db) {
#if SDPA_FP8
  evotune_sm90::wgmma_f8_rs<kD>(o, a, db, 1);
#else
  evotune_sm90::wgmma_rs<kD, kBF16, 1>(o, a, db, 1);
#endif
}

// The Q and K tiles' descriptor (K-major, rows of kSw bytes in 8-row atoms).
// A macro: ptxas scheduled the 16-bit main loop differently when it was an
// inline function.
#if SDPA_FP8
#define SDPA_DESC_QK(saddr) \
  (kSw == 64 ? evotune_sm90::make_desc_sw64((saddr), 16, 512) : evotune_sm90::make_desc_sw128((saddr), 16, 1024))
#else
#define SDPA_DESC_QK(saddr) evotune_sm90::make_desc_sw128((saddr), 16, 1024)
#endif

// Per-thread state of one warpgroup's 64 rows: this thread holds rows
// g = lane/4 (h = 0) and g + 8 (h = 1) of its warp's 16, and in the wgmma
// accumulator layout element 4j + 2h + e sits at column 8j + 2*(lane%4) + e.
struct RowState {
  float m[2];  // running max of the scaled scores (log2 units)
  float l[2];  // running sum of this thread's probabilities (quad-reduced at the end)
};

template <class T, int N>
__device__ __forceinline__ void fence_all(T (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) evotune_sm90::fence_operand(a[i]);
}
template <class T, int N, int M>
__device__ __forceinline__ void fence_all(T (&a)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_all(a[i]);
}

struct Consumer {
  const Problem& p;
  const Smem& sm;
  const void* tm_o;  // O_TMA: O as [sequences, L, D]
  int wg, wg_tid, warp, lane;
  float scale_log2;        // the softmax scale in log2 units (FP8: times the q and k descales)
  unsigned long long dq0;  // Q descriptor of this warpgroup's rows, panel 0, k-slice 0
  unsigned qf[Q_IN_REGS ? kQK : 1][4];  // Q_IN_REGS: Q A-fragments
#if SDPA_FP8
  float o_scale;                    // the v descale
  const float *qds, *kds, *vds;     // FP8_DESCALE_PER_HEAD: factors per (batch, key/value head)

  // The unit's scales: the per-tensor ones times its key/value head's factors.
  __device__ __forceinline__ void unit_scales(Work& w) const {
    w.sl2 = scale_log2;
    w.os = o_scale;
    if (FP8_DESCALE_PER_HEAD) {
      w.sl2 *= __ldg(qds + w.kv) * __ldg(kds + w.kv);
      w.os *= __ldg(vds + w.kv);
    }
  }
#endif
#if defined(EVOTUNE_SM90_TIMELINE)
  int tl_taken = 0, tl_done = 0;  // units taken and finished (the timeline's unit indices)
#endif
  // Timeline build: a stamp in the first unit's key-tile loop (slots 23-27).
  __device__ __forceinline__ void tl_first_unit(int slot) const {
#if defined(EVOTUNE_SM90_TIMELINE)
    if (tl_taken == 1) evotune_sm90::tl_mark(slot);
#endif
  }
  __device__ __forceinline__ float sl2(const Work& w) const {
#if SDPA_FP8
    return w.sl2;
#else
    (void)w;
    return scale_log2;
#endif
  }

  __device__ __forceinline__ void release(unsigned bar) const {
    __syncwarp();
    if (lane == 0) evotune_sm90::mbar_arrive(bar);
  }

  // Q_IN_REGS: this warp's 16 rows of Q as mma A fragments (ldmatrix through
  // the swizzle: 16-byte chunk c of row r sits at c ^ (r & 7) in the 128-byte
  // one, c ^ ((r >> 1) & 3) in the 64-byte one). A k-slice is 32 bytes of the
  // row in both widths, so the b16 ldmatrix gives FP8 fragments too.
  __device__ __forceinline__ void load_q_fragments() {
    if constexpr (Q_IN_REGS) {
      const int r = wg * 64 + warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      constexpr int kSlices = kSw / 32;  // k-slices per panel row
#pragma unroll
      for (int kk = 0; kk < kQK; ++kk) {
        const int chunk = (kk % kSlices) * 2 + (lane >> 4);
        const int swz = kSw == 128 ? (r & 7) : ((r >> 1) & 3);
        const unsigned addr = sm.q + (kk / kSlices) * kBM * kSw + r * kSw + ((chunk ^ swz) << 4);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(qf[kk][0]), "=r"(qf[kk][1]), "=r"(qf[kk][2]), "=r"(qf[kk][3])
                     : "r"(addr));
      }
    }
  }

  // S = Q·K_stᵀ, issued and committed (not waited for). The fences keep the
  // register operands live and in place across the asynchronous MMAs (without
  // them ptxas reused Q's registers once the loop had issued its last read).
  __device__ __forceinline__ void issue_s(float (&s)[kSAcc], int st) {
    using namespace evotune_sm90;
    const unsigned long long dk = SDPA_DESC_QK(sm.k_tile(st));
    constexpr int kSlices = kSw / 32;  // k-slices per panel row
    if constexpr (Q_IN_REGS) fence_all(qf);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kQK; ++kk) {
      const unsigned long long db = dk + (((kk / kSlices) * kBN * kSw + (kk % kSlices) * 32) >> 4);
      if constexpr (Q_IN_REGS) {
        mma_qk_rs(s, qf[kk], db, kk > 0);
      } else {
        mma_qk_ss(s, dq0 + (((kk / kSlices) * kBM * kSw + (kk % kSlices) * 32) >> 4), db, kk > 0);
      }
    }
    wgmma_commit();
    if constexpr (Q_IN_REGS) fence_all(qf);
  }

  // O += P·V_st, issued and committed.
  __device__ __forceinline__ static void issue_pv(float (&o)[kOAcc], unsigned (&pf)[kPK][4], const Smem& sm, int st) {
    using namespace evotune_sm90;
    fence_all(pf);
    // 16 bits: V is MN-major, atoms of 64 D-columns x 8 keys; the next 64
    // columns are the next panel (kBN*128 bytes on), the next 8 keys 1024
    // bytes on. FP8: Vᵀ is K-major (keys along the kVPanel-byte rows), a k32
    // slice 32 bytes of a row, the next kVPanel keys the next panel (kD*kVPanel
    // bytes on).
#if SDPA_FP8
    const unsigned long long dv =
        kVPanel == 64 ? make_desc_sw64(sm.v_tile(st), 16, 512) : make_desc_sw128(sm.v_tile(st), 16, 1024);
#else
    const unsigned long long dv = make_desc_sw128(sm.v_tile(st), kBN * 128, 1024);
#endif
    constexpr int kVSlices = kVPanel / 32;  // FP8: k32 slices per panel row
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk)
      mma_pv(o, pf[kk],
             dv + ((kFP8 ? (kk / kVSlices) * kD * kVPanel + (kk % kVSlices) * 32 : kk * 16 * 128) >> 4));
    wgmma_commit();
    fence_all(pf);
  }

  // Masks key tile t of the unit (tile row r0 = the warpgroup's first row).
  __device__ __forceinline__ void mask(float (&s)[kSAcc], const Work& w, int t) const {
    const int c = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.m0 + wg * 64 + warp * 16 + (lane >> 2) + 8 * h;
      int limit = p.SKV;
      if (IS_CAUSAL) {
        const int q = PACK_GQA ? r % p.SQ : r;
        limit = min(limit, q + p.SKV - p.SQ + 1);
      }
      if constexpr (kVT) {
        // Column 8j + 2c + e holds key 16(j/2) + 4c + 2(j%2) + e (K's rows permuted).
        limit -= t * kBN + 4 * c;
#pragma unroll
        for (int j = 0; j < kSAcc / 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (16 * (j >> 1) + 2 * (j & 1) + e >= limit) s[4 * j + 2 * h + e] = neg_inf();
      } else {
        limit -= t * kBN + 2 * c;
#pragma unroll
        for (int j = 0; j < kSAcc / 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (8 * j + e >= limit) s[4 * j + 2 * h + e] = neg_inf();
      }
    }
  }

  // Online softmax of one key tile: updates the running max, turns s into
  // probabilities, returns the rescale factors of the old O and l.
  __device__ __forceinline__ void softmax(float (&s)[kSAcc], RowState& rs, float (&alpha)[2], const Work& w) const {
    const float scale_log2 = sl2(w);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The max and the sum run as kChains independent chains, joined at the
      // end: one chain would make the row's softmax a series of dependent
      // FMNMX and FADD (ptxas does not reassociate them).
      float part[kChains];
#pragma unroll
      for (int c = 0; c < kChains; ++c) part[c] = neg_inf();
#pragma unroll
      for (int j = 0; j < kSAcc / 4; ++j)
        part[j % kChains] = fmaxf(part[j % kChains], fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      float raw = join<kChains>(part, [](float a, float b) { return fmaxf(a, b); });  // max of the raw scores (scale > 0 keeps the order)
      raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 1));
      raw = fmaxf(raw, __shfl_xor_sync(0xffffffffu, raw, 2));
      const float mx = fmaxf(rs.m[h], raw * scale_log2);
      const float base = mx == neg_inf() ? 0.f : mx;  // a row with no key yet
      alpha[h] = ex2(rs.m[h] - base);
      rs.m[h] = mx;
      // FP8: P times 2^8, for its e4m3 rounding (the row sums carry it too).
      const float bias = kFP8 ? 8.f - base : -base;
#pragma unroll
      for (int c = 0; c < kChains; ++c) part[c] = 0.f;
#pragma unroll
      for (int j = 0; j < kSAcc / 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float v = ex2(fmaf(s[4 * j + 2 * h + e], scale_log2, bias));
          s[4 * j + 2 * h + e] = v;
          part[j % kChains] += v;
        }
      rs.l[h] = rs.l[h] * alpha[h] + join<kChains>(part, [](float a, float b) { return a + b; });
    }
  }

  __device__ __forceinline__ static void rescale(float (&o)[kOAcc], const float (&alpha)[2]) {
    // FP8: skipped where no row of the warp has a new max (most tiles after
    // the first few), a warp-uniform branch.
    if (kFP8 && !__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
    for (int j = 0; j < kOAcc / 4; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        o[4 * j + 2 * h] *= alpha[h];
        o[4 * j + 2 * h + 1] *= alpha[h];
      }
  }

  // P in the A-fragment layout: slice kk covers columns 16kk .. 16kk+15, i.e.
  // accumulator groups 2kk (a0 rows g, a1 rows g+8) and 2kk+1 (a2, a3).
  // FP8: slice kk covers accumulator groups 4kk .. 4kk+3; a0 (row g) takes
  // keys {2t, 2t+1} of groups 4kk and 4kk+1, a2 those of 4kk+2 and 4kk+3, a1
  // and a3 the same of row g+8 (Vᵀ holds the keys in this order).
  __device__ __forceinline__ static void pack_p(const float (&s)[kSAcc], unsigned (&pf)[kPK][4]) {
#pragma unroll
    for (int kk = 0; kk < kPK; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (kFP8) {
          const int b = 16 * kk + 8 * (i >> 1) + 2 * (i & 1);
          pf[kk][i] = pack4_e4m3(s[b], s[b + 1], s[b + 4], s[b + 5]);
        } else {
          pf[kk][i] = evotune_ptx::pack2(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
        }
      }
  }

  __device__ __forceinline__ void turn_begin() const {
    if constexpr (kPingPong) evotune_sm90::named_bar_sync(kBarTurn + wg, 256);
  }
  __device__ __forceinline__ void turn_end() const {
    if constexpr (kPingPong) evotune_sm90::named_bar_arrive(kBarTurn + (wg ^ 1), 256);
  }

  // The overlapped loop's three parts. first: S of a unit's first key tile
  // (stage ring) alone, then its softmax.
  __device__ __forceinline__ void first(float (&s)[kSAcc], const Ring& ring, const Work& w, RowState& rs,
                                        float (&alpha)[2]) {
    using namespace evotune_sm90;
    turn_begin();
    mbar_wait_spin(sm.k_full + 8 * ring.stage, ring.phase);
#if defined(EVOTUNE_SM90_TIMELINE)
    if (tl_taken == 1) tl_mark(22);
#endif
    issue_s(s, ring.stage);
    turn_end();
    wgmma_wait<0>();
    fence_all(s);
    release(sm.k_empty + 8 * ring.stage);
    if (!Q_IN_REGS && w.t_end - w.t_begin == 1) release(sm.q_empty);
    if (w.t_begin >= w.mask_from) mask(s, w, w.t_begin);
    softmax(s, rs, alpha, w);
  }

  // step: S of key tile t of unit w (stage ring) issued beside P·V of the
  // tile before (stage prev, P in pf), then the softmax of S (row state rs)
  // while P·V runs; returns when P·V has completed. The tile before may be
  // the previous unit's last (UNIT_OVERLAP).
  __device__ __forceinline__ void step(float (&s)[kSAcc], float (&o)[kOAcc], unsigned (&pf)[kPK][4], const Ring& ring,
                                       const Ring& prev, const Work& w, int t, RowState& rs, float (&alpha)[2]) {
    using namespace evotune_sm90;
    turn_begin();
    mbar_wait_spin(sm.k_full + 8 * ring.stage, ring.phase);
    issue_s(s, ring.stage);
    mbar_wait_spin(sm.v_full + 8 * prev.stage, prev.phase);
    issue_pv(o, pf, sm, prev.stage);
    turn_end();
    wgmma_wait<1>();
    fence_all(s);
    release(sm.k_empty + 8 * ring.stage);
    if (!Q_IN_REGS && t == w.t_end - 1) release(sm.q_empty);
    if (t >= w.mask_from) mask(s, w, t);
    softmax(s, rs, alpha, w);
    wgmma_wait<0>();
    fence_all(o);
    release(sm.v_empty + 8 * prev.stage);
  }

  // drain: P·V of the last tile (stage ring) alone.
  __device__ __forceinline__ void drain(float (&o)[kOAcc], unsigned (&pf)[kPK][4], const Ring& ring) {
    using namespace evotune_sm90;
    turn_begin();
    mbar_wait_spin(sm.v_full + 8 * ring.stage, ring.phase);
    issue_pv(o, pf, sm, ring.stage);
    turn_end();
    wgmma_wait<0>();
    fence_all(o);
    release(sm.v_empty + 8 * ring.stage);
  }

  // The key tiles of one unit: O and the row state accumulate; Q is released
  // once its last use has completed, every stage once its P·V has.
  __device__ __forceinline__ void attend(float (&o)[kOAcc], RowState& rs, const Work& w, Ring& ring) {
    using namespace evotune_sm90;
    float s[kSAcc];
    unsigned pf[kPK][4];
    float alpha[2];
    const int n = w.t_end - w.t_begin;
    if constexpr (OVERLAP) {
      first(s, ring, w, rs, alpha);
      tl_first_unit(23);
      pack_p(s, pf);
      for (int i = 1; i < n; ++i) {
        const Ring prev = ring;
        ring.next();
        step(s, o, pf, ring, prev, w, w.t_begin + i, rs, alpha);
        if (i <= 2) tl_first_unit(23 + i);
        if (i == n - 1) tl_first_unit(26);
        rescale(o, alpha);
        pack_p(s, pf);
      }
      drain(o, pf, ring);
      tl_first_unit(27);
      ring.next();
    } else {
      for (int i = 0; i < n; ++i) {
        mbar_wait_spin(sm.k_full + 8 * ring.stage, ring.phase);
        issue_s(s, ring.stage);
        wgmma_wait<0>();
        fence_all(s);
        release(sm.k_empty + 8 * ring.stage);
        if (!Q_IN_REGS && i == n - 1) release(sm.q_empty);
        const int t = w.t_begin + i;
        if (t >= w.mask_from) mask(s, w, t);
        softmax(s, rs, alpha, w);
        rescale(o, alpha);
        pack_p(s, pf);
        mbar_wait_spin(sm.v_full + 8 * ring.stage, ring.phase);
        issue_pv(o, pf, sm, ring.stage);
        wgmma_wait<0>();
        fence_all(o);
        release(sm.v_empty + 8 * ring.stage);
        ring.next();
      }
    }
  }

  // Split-KV: publish this split's partial rows, count the split in, and
  // merge all splits into o / rs if it arrived last. Returns whether to store.
  __device__ __forceinline__ bool merge_splits(float (&o)[kOAcc], RowState& rs, const Work& w, float* workspace,
                                               unsigned* counters, volatile int* last_flag) const {
    const int g = lane >> 2, c = lane & 3;
    const size_t tiles = (size_t)p.m_tiles * p.heads;
    const size_t o_base = ((size_t)w.tile * SPLIT_KV) * kBM;  // rows of this tile's split 0
    float* wml = workspace + tiles * SPLIT_KV * kBM * kD;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg * 64 + warp * 16 + g + 8 * h;
      if (w.m0 + r >= p.L) continue;  // a row past the sequence (decode: all but G*SQ): nothing to publish
      float* dst = workspace + (o_base + (size_t)w.z * kBM + r) * kD + 2 * c;
#pragma unroll
      for (int j = 0; j < kOAcc / 4; ++j)
        __stcg(reinterpret_cast<float2*>(dst + 8 * j), make_float2(o[4 * j + 2 * h], o[4 * j + 2 * h + 1]));
      if (c == 0) __stcg(reinterpret_cast<float2*>(wml + (o_base + (size_t)w.z * kBM + r) * 2), make_float2(rs.m[h], rs.l[h]));
    }
    // The warpgroup's barrier orders its partials before one thread's count;
    // the count is a GPU-scope release (publishes them, cumulatively) and an
    // acquire (the last split reads the others' partials after theirs). One
    // fence a warpgroup, as CUTLASS's semaphore: a __threadfence() in every
    // thread is an SC fence and an L1 invalidation each (MEMBAR.SC.GPU, CCTL.IVALL).
    evotune_sm90::named_bar_sync(kBarWg + wg, 128);
    if (wg_tid == 0) {
      unsigned* ctr = counters + (size_t)w.tile * kCWG + wg;
      unsigned prev;
      asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(prev) : "l"(ctr) : "memory");
      const int last = prev == (unsigned)(w.nsplit - 1);
      if (last) *ctr = 0u;  // every split has arrived: ready for the next launch
      *last_flag = last;
    }
    evotune_sm90::named_bar_sync(kBarWg + wg, 128);
    if (!*last_flag) return false;
    // M = max over splits, O = Σ 2^(m_z-M)·O_z, L = Σ 2^(m_z-M)·l_z.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg * 64 + warp * 16 + g + 8 * h;
      if (w.m0 + r >= p.L) continue;  // not stored: nothing to merge
      float mmax = rs.m[h];
#pragma unroll
      for (int zz = 0; zz < SPLIT_KV; ++zz)  // every split's max in flight at once
        if (zz < w.nsplit && zz != w.z) mmax = fmaxf(mmax, __ldcg(wml + (o_base + (size_t)zz * kBM + r) * 2));
      const float base = mmax == neg_inf() ? 0.f : mmax;
      const float f = ex2(rs.m[h] - base);
      float L = rs.l[h] * f;
#pragma unroll
      for (int j = 0; j < kOAcc / 4; ++j) {
        o[4 * j + 2 * h] *= f;
        o[4 * j + 2 * h + 1] *= f;
      }
      // The other splits two at a time, both one's loads in flight before
      // either's sums (k-th other split: k, or k + 1 from this one's on).
      const auto add = [&](const float2 (&v)[kOAcc / 4], float2 ml) {
        const float fz = ex2(ml.x - base);
        L += ml.y * fz;
#pragma unroll
        for (int j = 0; j < kOAcc / 4; ++j) {
          o[4 * j + 2 * h] += fz * v[j].x;
          o[4 * j + 2 * h + 1] += fz * v[j].y;
        }
      };
      const auto load = [&](int k, float2 (&v)[kOAcc / 4]) {
        const size_t row = o_base + (size_t)(k + (k >= w.z)) * kBM + r;
        const float* src = workspace + row * kD + 2 * c;
#pragma unroll
        for (int j = 0; j < kOAcc / 4; ++j) v[j] = __ldcg(reinterpret_cast<const float2*>(src + 8 * j));
        return __ldcg(reinterpret_cast<const float2*>(wml + row * 2));
      };
      const int others = w.nsplit - 1;
      int k = 0;
      for (; k + 1 < others; k += 2) {
        float2 v0[kOAcc / 4], v1[kOAcc / 4];
        const float2 ml0 = load(k, v0), ml1 = load(k + 1, v1);
        add(v0, ml0);
        add(v1, ml1);
      }
      if (k < others) {
        float2 v0[kOAcc / 4];
        const float2 ml0 = load(k, v0);
        add(v0, ml0);
      }
      rs.l[h] = L;
    }
    return true;
  }

  __device__ __forceinline__ void store(const float (&o)[kOAcc], const RowState& rs, const Work& w,
                                        evotune_elem_t* __restrict__ O) const {
    if constexpr (O_TMA) {
      store_tma(o, rs, w);
      return;
    }
    const int g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.m0 + wg * 64 + warp * 16 + g + 8 * h;
      if (r >= p.L) continue;
#if SDPA_FP8
      const float inv = rs.l[h] > 0.f ? w.os / rs.l[h] : 0.f;
#else
      const float inv = rs.l[h] > 0.f ? 1.f / rs.l[h] : 0.f;
#endif
      evotune_elem_t* dst = O + (size_t)(w.row_base + r) * kD + 2 * c;
#pragma unroll
      for (int j = 0; j < kOAcc / 4; ++j)
        *reinterpret_cast<unsigned*>(dst + 8 * j) = evotune_ptx::pack2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    }
  }

  // O_TMA: the warpgroup's 64 rows normalised into its staging area (each
  // thread's pairs as 4-byte stores, the 8 rows of a store phase on 8
  // different 16-byte chunks of the swizzle), then one thread stores them by
  // TMA, a box per 64-column panel; rows past L are clipped by the map. The
  // staging is reused once the previous unit's store has read it.
  __device__ __forceinline__ void store_tma(const float (&o)[kOAcc], const RowState& rs, const Work& w) const {
    using namespace evotune_sm90;
    const unsigned stage = sm.o + (unsigned)(wg * kOStage);
    if (wg_tid == 0) bulk_wait<0>();
    named_bar_sync(kBarWg + wg, 128);
    const int g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warp * 16 + g + 8 * h;  // row of the warpgroup's 64
#if SDPA_FP8
      const float inv = rs.l[h] > 0.f ? w.os / rs.l[h] : 0.f;
#else
      const float inv = rs.l[h] > 0.f ? 1.f / rs.l[h] : 0.f;
#endif
#pragma unroll
      for (int j = 0; j < kOAcc / 4; ++j) {
        const int col = 8 * j + 2 * c;  // (bytes 2 * col of the row)
        const unsigned at = stage + (unsigned)((col / 64) * 64 * 128 + r * 128 +
                                               ((((col % 64) / 8) ^ (r & 7)) << 4) + (col % 8) * 2);
        const unsigned v = evotune_ptx::pack2(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(v) : "memory");
      }
    }
    fence_proxy_async();  // the writes, before the TMA engine reads them
    named_bar_sync(kBarWg + wg, 128);
    if (wg_tid == 0) {
#pragma unroll
      for (int pn = 0; pn < kD / 64; ++pn)
        tma_store_3d(tm_o, pn * 64, w.m0 + wg * 64, w.seq, stage + (unsigned)(pn * 64 * 128));
      bulk_commit();
    }
  }

  // Before the CTA exits: its last stores have read their staging.
  __device__ __forceinline__ void stores_done() const {
    if constexpr (O_TMA)
      if (wg_tid == 0) evotune_sm90::bulk_wait<0>();
  }

  // The next unit the producer handed over with its Q tile, ready to attend
  // (Q fragments loaded where kept): false when none is left. A unit without
  // key tiles (its queries see no key) is finished here: O = 0.
  __device__ __forceinline__ bool take(Work& w, unsigned& q_phase, evotune_elem_t* __restrict__ O,
                                       unsigned* counters) {
    for (;;) {
      evotune_sm90::mbar_wait(sm.q_full, q_phase);
      q_phase ^= 1u;
      const int u = get_unit(counters);
      if (u >= p.units) return false;
      w = decode(p, u, FastDiv{p, sm.divs});
#if SDPA_FP8
      unit_scales(w);
#endif
      if (w.t_end > w.t_begin) {
        if (Q_IN_REGS) {
          load_q_fragments();
          release(sm.q_empty);
        }
#if defined(EVOTUNE_SM90_TIMELINE)
        if (tl_taken < kTlUnits) evotune_sm90::tl_mark(3 + 2 * tl_taken);
        ++tl_taken;
#endif
        return true;
      }
      release(sm.q_empty);
      store_zero(w, O);
    }
  }

  __device__ __forceinline__ void store_zero(const Work& w, evotune_elem_t* __restrict__ O) const {
    const int g = lane >> 2, c = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.m0 + wg * 64 + warp * 16 + g + 8 * h;
      if (r >= p.L) continue;
      evotune_elem_t* dst = O + (size_t)(w.row_base + r) * kD + 2 * c;
#pragma unroll
      for (int j = 0; j < kOAcc / 4; ++j) *reinterpret_cast<unsigned*>(dst + 8 * j) = 0u;
    }
  }

  // A unit's epilogue: the row sums reduced across the quad, the key splits
  // merged, O normalised and stored.
  __device__ __forceinline__ void finish(float (&o)[kOAcc], RowState& rs, const Work& w,
                                         evotune_elem_t* __restrict__ O, float* workspace, unsigned* counters,
                                         volatile int* last_flags) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rs.l[h] += __shfl_xor_sync(0xffffffffu, rs.l[h], 1);
      rs.l[h] += __shfl_xor_sync(0xffffffffu, rs.l[h], 2);
    }
    if (SPLIT_KV > 1 && w.nsplit > 1 && !merge_splits(o, rs, w, workspace, split_arrivals(counters), last_flags + wg))
      return;
    store(o, rs, w, O);
  }

  // Timeline: a unit finished (its epilogue done, O's stores issued).
  __device__ __forceinline__ void tl_finished() {
#if defined(EVOTUNE_SM90_TIMELINE)
    if (tl_done < kTlUnits) evotune_sm90::tl_mark(4 + 2 * tl_done);
    ++tl_done;
#endif
  }

  __device__ __forceinline__ static void zero(float (&o)[kOAcc], RowState& rs) {
#pragma unroll
    for (int i = 0; i < kOAcc; ++i) o[i] = 0.f;
    rs = RowState{{neg_inf(), neg_inf()}, {0.f, 0.f}};
  }

  // One unit after the other: each drains its last P·V and stores O before
  // the next unit's first Q·Kᵀ.
  __device__ __forceinline__ void run_units(evotune_elem_t* __restrict__ O, float* workspace, unsigned* counters,
                                            volatile int* last_flags) {
    Ring ring;
    unsigned q_phase = 0;
    Work w;
    while (take(w, q_phase, O, counters)) {
      float o[kOAcc];
      RowState rs;
      zero(o, rs);
      attend(o, rs, w, ring);
      finish(o, rs, w, O, workspace, counters, last_flags);
      tl_finished();
    }
  }

  // UNIT_OVERLAP: the units as one stream of key tiles. The next unit's first
  // Q·Kᵀ is issued beside this unit's last P·V, its softmax runs under it,
  // and this unit's epilogue follows; the tensor cores never wait for an
  // epilogue or a unit's first softmax.
  __device__ __forceinline__ void run_chained(evotune_elem_t* __restrict__ O, float* workspace, unsigned* counters,
                                              volatile int* last_flags) {
    Ring ring;
    unsigned q_phase = 0;
    Work w;
    if (!take(w, q_phase, O, counters)) return;
    float o[kOAcc];
    float s[kSAcc];
    unsigned pf[kPK][4];
    float alpha[2];
    RowState rs;
    zero(o, rs);
    first(s, ring, w, rs, alpha);
    pack_p(s, pf);
    int t = w.t_begin + 1;
    for (;;) {
      const Ring prev = ring;
      if (t < w.t_end) {
        ring.next();
        step(s, o, pf, ring, prev, w, t, rs, alpha);
        rescale(o, alpha);
        pack_p(s, pf);
        ++t;
        continue;
      }
      Work next;
      if (!take(next, q_phase, O, counters)) break;
      ring.next();
      RowState rn{{neg_inf(), neg_inf()}, {0.f, 0.f}};
      step(s, o, pf, ring, prev, next, next.t_begin, rn, alpha);
      finish(o, rs, w, O, workspace, counters, last_flags);
      tl_finished();
      zero(o, rs);
      rs = rn;
      w = next;
      pack_p(s, pf);
      t = w.t_begin + 1;
    }
    drain(o, pf, ring);
    finish(o, rs, w, O, workspace, counters, last_flags);
    tl_finished();
  }

  __device__ __forceinline__ void run(evotune_elem_t* __restrict__ O, float* workspace, unsigned* counters,
                                      volatile int* last_flags) {
    using namespace evotune_sm90;
    if (kPingPong && wg == 1) named_bar_arrive(kBarTurn + 0, 256);  // warpgroup 0 goes first
    if constexpr (UNIT_OVERLAP)
      run_chained(O, workspace, counters, last_flags);
    else
      run_units(O, workspace, counters, last_flags);
    // The turn that warpgroup 1 hands over after its last GEMMs: taken, so
    // that every arrival on a named barrier is matched.
    if (kPingPong && wg == 0) named_bar_sync(kBarTurn + 0, 256);
    stores_done();
#if defined(EVOTUNE_SM90_TIMELINE)
    tl_mark(15);
    tl_mark(20, (unsigned long long)tl_taken + 1);
#endif
  }
};

}  // namespace sdpa_sm90

#if SDPA_FP8
// Q, K and V in e4m3 (bytes); `group` (H / HKV) is the reference's, the
// kernel derives it.
extern "C" __global__ void __launch_bounds__(sdpa_sm90::kThreads, CTAS_PER_SM)
    sdpa_fp8_sm90(const __grid_constant__ EvotuneTmap tm_q, const __grid_constant__ EvotuneTmap tm_k,
                  const __grid_constant__ EvotuneTmap tm_v, const __grid_constant__ EvotuneTmap tm_o,
                  const unsigned char* __restrict__ Q,
                  const unsigned char* __restrict__ K, const unsigned char* __restrict__ V,
                  evotune_elem_t* __restrict__ O, float* __restrict__ workspace, unsigned* __restrict__ counters,
                  int B, int H, int HKV, int SQ, int SKV, int group, float scale, float q_descale, float k_descale,
                  float v_descale, const float* __restrict__ q_descales, const float* __restrict__ k_descales,
                  const float* __restrict__ v_descales, const __grid_constant__ EvotuneTmap tm_vp,
                  unsigned char* __restrict__ v_packed, unsigned* __restrict__ pack_sync) {
  (void)group;
  (void)tm_vp;
  (void)v_packed;
  (void)pack_sync;
#else
extern "C" __global__ void __launch_bounds__(sdpa_sm90::kThreads, CTAS_PER_SM)
    sdpa_fwd_sm90(const __grid_constant__ EvotuneTmap tm_q, const __grid_constant__ EvotuneTmap tm_k,
                  const __grid_constant__ EvotuneTmap tm_v, const __grid_constant__ EvotuneTmap tm_o,
                  const evotune_elem_t* __restrict__ Q,
                  const evotune_elem_t* __restrict__ K, const evotune_elem_t* __restrict__ V,
                  evotune_elem_t* __restrict__ O, float* __restrict__ workspace, unsigned* __restrict__ counters,
                  int B, int H, int HKV, int SQ, int SKV, float scale) {
#endif
#if EVOTUNE_SM90A
  using namespace sdpa_sm90;
  using namespace evotune_sm90;
  (void)Q;
  (void)K;
  (void)V;
  tl_start();
  extern __shared__ __align__(128) unsigned char sdpa_smem[];
  // 128-byte swizzle atoms sit on 1024-byte boundaries; the spec adds the slack.
  const unsigned raw = smem_u32(sdpa_smem);
  const unsigned base = (raw + 1023u) & ~1023u;
  Smem sm;
  sm.q = base;
  sm.ring = base + kQBytes;
  sm.o = base + kOOffset;
  sm.q_full = base + kBarOffset;
  sm.q_empty = sm.q_full + 8;
  sm.k_full = sm.q_full + 16;
  sm.v_full = sm.k_full + 8 * STAGES;
  sm.k_empty = sm.v_full + 8 * STAGES;
  sm.v_empty = sm.k_empty + 8 * STAGES;
#if SDPA_FP8 && !SDPA_VT_TMA
  sm.raw = base + kRawOffset;
  sm.raw_full = sm.v_empty + 8 * STAGES;
  sm.raw_empty = sm.raw_full + 8 * kVRaw;
#endif
  volatile int* last_flags =
      reinterpret_cast<volatile int*>(sdpa_smem + (base - raw) + kBarOffset + 16 + 32 * STAGES + 16 * kVRaw);
  sm.divs = base + kBarOffset + 16 + 32 * STAGES + 16 * kVRaw + 16;
  static_assert(16 + 32 * STAGES + 16 * kVRaw + 16 + 8 * kDivs <= 256, "barriers, flags and divisors fit the 256-byte area");

  if (threadIdx.x == kConsumerThreads) {
    tma_prefetch_desc(&tm_q);
    tma_prefetch_desc(&tm_k);
    tma_prefetch_desc(&tm_v);
#if SDPA_FP8 && V_PACK
    tma_prefetch_desc(&tm_vp);
#endif
    if (O_TMA) tma_prefetch_desc(&tm_o);
    // The spec's smem expression must match this layout: fail loudly, never
    // write past the allocation.
    unsigned dyn;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (unsigned)kSmemBytes) __trap();
    mbar_init(sm.q_full, 1);
    mbar_init(sm.q_empty, kWarpArrivals + kTransposers);
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(sm.k_full + 8 * st, 1);
      mbar_init(sm.v_full + 8 * st, kTransposing ? kTransposers : 1);
      mbar_init(sm.k_empty + 8 * st, kWarpArrivals);
      mbar_init(sm.v_empty + 8 * st, kWarpArrivals);
    }
#if SDPA_FP8 && !SDPA_VT_TMA
    for (int b = 0; b < kVRaw; ++b) {
      mbar_init(sm.raw_full + 8 * b, 1);
      mbar_init(sm.raw_empty + 8 * b, kTransposers);
    }
#endif
    fence_mbar_init();
    if constexpr (kEarly)
      early_loads(make_problem(opaque(B), opaque(H), opaque(HKV), opaque(SQ), opaque(SKV)), sm, &tm_q, &tm_k, &tm_v,
                  counters);
  }
  if (threadIdx.x < kDivs)  // consumer warp 0's first lanes, idle until the barrier
    put_div(make_problem(opaque(B), opaque(H), opaque(HKV), opaque(SQ), opaque(SKV)),
            reinterpret_cast<uint2*>(sdpa_smem + (sm.divs - raw)), (int)threadIdx.x);
  __syncthreads();

  tl_mark(2);
#if SDPA_FP8 && V_PACK
  pack_vt(V, v_packed, B * HKV, SKV, pack_sync);
  tl_mark(21);
  const EvotuneTmap* tm_vload = &tm_vp;
#else
  const EvotuneTmap* tm_vload = &tm_v;
#endif
  const Problem p = make_problem(B, H, HKV, SQ, SKV);
  // Warp-uniform as far as the compiler can tell (a broadcast).
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x >> 7, 0);
  if (wg == kCWG) {
    if constexpr (kSetMaxNReg) setmaxnreg_dec<kRegProducer>();
    if (threadIdx.x == kConsumerThreads) producer(p, sm, &tm_q, &tm_k, tm_vload, counters);
#if SDPA_FP8 && !SDPA_VT_TMA
    const int pw = ((int)threadIdx.x - kConsumerThreads) >> 5;
    if (pw > 0) transposer(p, sm, counters, pw - 1, (int)threadIdx.x & 31);
#endif
  } else {
    if constexpr (kSetMaxNReg) setmaxnreg_inc<kRegConsumer>();
#if SDPA_FP8
    Consumer c{p, sm, &tm_o, wg, (int)threadIdx.x & 127, ((int)threadIdx.x & 127) >> 5, (int)threadIdx.x & 31,
               scale * q_descale * k_descale * 1.4426950408889634f, SDPA_DESC_QK(sm.q + wg * 64 * kSw), {}, v_descale,
               q_descales, k_descales, v_descales};
#else
    Consumer c{p, sm, &tm_o, wg, (int)threadIdx.x & 127, ((int)threadIdx.x & 127) >> 5, (int)threadIdx.x & 31,
               scale * 1.4426950408889634f, make_desc_sw128(sm.q + wg * 64 * 128, 16, 1024), {}};
#endif
    c.run(O, workspace, counters, last_flags);
  }
#else
  // sdpa_fwd_sm90 and sdpa_fp8_sm90 need sm_90a (wgmma, setmaxnreg); nothing to run elsewhere.
  __trap();
#endif
}
