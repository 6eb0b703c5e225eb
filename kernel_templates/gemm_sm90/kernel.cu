// evotune built-in Hopper GEMM: C[M,N] = A[M,K] · B[K,N], all row-major, fp16 or
// bf16 inputs, fp32 accumulation, output in the input type. sm_90a only.
// With GEMM_TB=1 (the problem's TB) B is stored transposed, N rows of K
// elements (the weight W of x @ W.T): its tile is then K-major like A's
// (BLOCK_K/64 sub-tiles of BLOCK_N rows x 128 bytes), loaded the way A is
// (TMA when K % 8 == 0, packed or copied by the producer threads otherwise),
// and the wgmma reads B without its transpose bit. With GEMM_TA=1 (the
// problem's TA) A is stored transposed, K rows of M elements (column-major
// A): its tile is then M-major like B's (BLOCK_M/64 boxes of 64 columns by
// BLOCK_K k-rows), loaded the way B is (TMA when M % 8 == 0, packed or copied
// by the producer threads otherwise), and the wgmma reads A with its
// transpose bit.
//
// Design (warp-specialised, CUTLASS-sm90 / FlashAttention-3 style).
//  * Roles. Threads 0 .. 128*CONSUMER_WG-1 are consumer warpgroups; after them
//    comes the producer: one warp (PRODUCER=0) or a whole warpgroup that hands
//    registers to the consumers with setmaxnreg (PRODUCER=1). Each role is one
//    branch of a single if/else.
//  * Pipeline. A STAGES-deep shared-memory ring; a stage holds the A tile
//    (BLOCK_M x BLOCK_K, K-major, as BLOCK_K/64 sub-tiles of BLOCK_M rows x 128
//    bytes) and the B tile (BLOCK_K x BLOCK_N, N-major, as BLOCK_N/64 boxes of
//    BLOCK_K rows x 128 bytes), all in the TMA/wgmma 128-byte swizzle (16-byte
//    chunk c of row r sits at chunk c ^ (r & 7); every sub-tile 1024-aligned).
//    Stage s has a "full" mbarrier (TMA bytes + fallback arrivals) and an
//    "empty" mbarrier (one arrival per consuming warpgroup per source CTA).
//  * Loads. TMA (cp.async.bulk.tensor, tensor maps passed by value) when the
//    operand's row stride is a multiple of 16 bytes (use_tma_a: K % 8 == 0,
//    use_tma_b: N % 8 == 0). Otherwise that operand falls back to the producer
//    threads copying it with cp.async (16/8/4 bytes, whatever the row stride
//    allows; for odd strides 2-byte loads packed into 16-byte shared stores)
//    into the same swizzled layout, with zero fill outside the matrix; those
//    threads wait for their copies, fence the async proxy and arrive on the
//    full barrier STAGES-2 k-tiles later. Or (PACK=1) the launch first copies
//    each such operand into a scratch buffer with padded rows, which TMA then
//    reads (see "packing" below).
//  * Math. Each consumer warpgroup waits on the full barrier, issues
//    wgmma.mma_async m64nBLOCK_Nk16 (A and B straight from shared memory via
//    descriptors, B transposed: it is N-major) for its 64 or 128 rows, keeps one
//    k-tile of wgmmas in flight and releases the stage before last to the
//    producer. Accumulators stay in registers (fp32).
//  * Epilogue. Accumulators to C through per-warp 16x64 shared-memory
//    staging tiles: written with stmatrix and copied out by TMA bulk stores
//    that run on while the warp goes on (EPILOGUE=2: two tiles per warp that
//    alternate; EPILOGUE=3: staging for the whole C tile, so the warp never
//    waits and the stores drain under the next tile's MMAs; the tensor map
//    clips M/N tails), or read back for 16-byte coalesced stores (EPILOGUE=1,
//    and 2-4 when N % 8 != 0); or straight from registers with 4-byte
//    stores (EPILOGUE=0); predicated for M/N tails. EPILOGUE=4 stages a
//    warpgroup's rows as BLOCK_N/64 boxes of 64 columns and hands them to a
//    storer warp on the producer side (named barriers, one pair per consumer
//    warpgroup), which issues one TMA store per box and waits for them to be
//    read; the consumers only stage, fence and go on to the next tile's
//    MMAs. Where the producer side copies operands itself (K or N % 8 != 0),
//    a consumer thread issues the boxes instead. EPILOGUE=5 is 4 with one
//    warpgroup's staging that the two cooperative warpgroups take in turn
//    (warpgroup 1 stages once the storer has seen warpgroup 0's boxes read,
//    while warpgroup 0 already runs the next tile's MMAs): half the shared
//    memory, so a 128x256 tile keeps 4 stages; without a storer it stores
//    as EPILOGUE=1.
//  * Scheduling. Work units are (cluster tile, K split); cluster c takes units
//    c, c+G, c+2G, ... (G = clusters in the grid), so PERSISTENT=1 launches
//    min(units, SMs) CTAs that loop while the producer runs ahead into the next
//    unit. Units are rasterised in groups of SWIZZLE tile-rows for L2 reuse.
//    SCHEDULE=1 (ping-pong): the two consumer warpgroups take alternate units,
//    each a whole BLOCK_M x BLOCK_N tile, and take turns on the tensor cores
//    (named barriers), so one's epilogue overlaps the other's MMAs.
//  * Clusters (CLUSTER_M x CLUSTER_N CTAs): CTAs sharing a tile column share
//    B, those sharing a tile row share A; each loads its slice of the shared
//    operand and multicasts it to the others. Consumers release a stage on
//    every CTA that writes into it. Tiles past the matrix still run the
//    pipeline (their peers need their loads) and skip the stores.
//  * Split-K (SPLIT_K > 1): the K range is cut into SPLIT_K slices of whole
//    k-tiles; each slice writes its fp32 partial tile to `workspace`, and the
//    unit arriving last at the tile's counter (in `counters`) adds the others,
//    writes C and re-arms the counter for the next launch (no memset).
//  * Stream-K (PERSISTENT=2, cooperative, no cluster, no split): when the
//    tiles do not fill whole waves of G CTAs, the tiles of the partial wave
//    (all tiles, if under one wave) become a stream of k-tile iterations cut
//    evenly over the CTAs; the whole waves stay data-parallel and come after
//    the stream. A CTA's range crosses tiles and is run last tile first, so
//    that it starts at k = 0 beside its neighbours (they share A panels in
//    L2). The segment holding a tile's last k-tile owns the tile; the
//    segments before it (each the first thing an earlier CTA runs) write
//    their accumulators to their CTA's workspace slot and count themselves in
//    at the tile's counter; the owner, reaching the tile last, waits for
//    them (about never: they were published first), adds the partials into
//    its registers in CTA order (deterministic) and stores C. The wait needs
//    all G CTAs resident (G <= SMs, one CTA per SM).
//
// Tunables (macros; spec.toml lists their values):
//   BLOCK_M      rows of a tile: 64 x consumer warpgroups (cooperative), or the
//                tile of one warpgroup (ping-pong: 64 or 128).
//   BLOCK_N      columns of a tile = the wgmma N (64, 128, 192, 256).
//   BLOCK_K      K depth of one stage (64: one 128-byte swizzle row; 128: two).
//   STAGES       shared-memory ring depth.
//   CONSUMER_WG  consumer warpgroups (1 or 2).
//   SCHEDULE     0 cooperative (the warpgroups split a tile's rows), 1 ping-pong.
//   PRODUCER     0 one producer warp, 1 a producer warpgroup with setmaxnreg.
//   REG_SPLIT    setmaxnreg targets with PRODUCER=1: 0 = 40 / 232, 1 = 24 / 240
//                (producer / consumer registers per thread).
//   CLUSTER_M/N  thread-block cluster shape over tiles (1x1, 2x1 or 1x2), TMA
//                multicast of the shared operand.
//   SWIZZLE      tile-rows per rasterisation group.
//   PERSISTENT   0 one CTA per unit (pair of units for ping-pong), 1 one per SM,
//                2 one per SM with the partial wave as stream-K.
//   SPLIT_K      K slices per tile, reduced serially through workspace.
//   EPILOGUE     0 direct register stores, 1 staged through shared memory,
//                2 staged with stmatrix and stored by TMA (asynchronous),
//                3 as 2 with the whole tile staged (the stores overlap the
//                next tile's MMAs), 4 as 3 with the stores issued by a storer
//                warp (the producer warpgroup's second warp, or a second
//                producer-side warp with PRODUCER=0), 5 as 4 with one
//                warpgroup's staging shared by the two in turn.
//   PACK         operands with rows not 16-byte aligned: 0 copied by the
//                producer threads each k-tile, 1 packed once per launch into
//                padded scratch copies and loaded by TMA, 2 (B's rows
//                misaligned, A's aligned, a producer warpgroup) B loaded by
//                TMA as it is, 16-byte aligned windows of every 8th row, and
//                shifted into place in shared memory by the producer
//                warpgroup's other warps ("realigning B", below); the
//                producer warpgroup keeps 56 registers (the consumers 224).
//   RAW_SLOTS    PACK=2: k-tiles of B's raw windows in flight (2..4).
//   SKINNY       0, or the CUDA-core path for a few rows (below) in place of
//                everything above but SPLIT_K, as columns per lane x 100 +
//                warps per CTA (208: two columns per lane, 8 warps; 8xx:
//                8 contiguous columns per lane by 16-byte loads, the vector
//                path for aligned B, 816 with 4 rows of A per CTA).
//   L2_HINT      TMA loads marked evict-first in L2 (bit 0: A, bit 1: B): for
//                an operand streamed once (A of a skinny-N GEMM), so that it
//                neither evicts the reused operand nor forces write-backs of
//                dirty lines other kernels left in L2.
//   L2_PROMO_B   (host side: B's tensor map) L2 promotion of B's loads, 256 or
//                128 bytes; the kernel does not read it.
//
// Launch (spec.toml): SKINNY > 0, a grid of cdiv(N, 32 * columns per lane) x
// cdiv(M, 16) x SPLIT_K CTAs of 32 * warps threads; otherwise a 1-D grid of whole clusters, block = 128*CONSUMER_WG +
// (PRODUCER ? 128 : EPILOGUE >= 4 ? 64 : 32), dynamic shared memory = 1024 (alignment slack) +
// STAGES * stage bytes + epilogue staging + 256 (barriers).
//
// Build option (not a tunable; off in the product, which compiles without
// it): EVOTUNE_SM90_TIMELINE adds per-CTA time stamps for tools/timeline.py,
// which defines it in a copy of the spec (see tl_mark below for the stamps).

#include "evotune_ptx.cuh"
#include "evotune_sm90.cuh"

#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 256
#endif
#ifndef BLOCK_K
#define BLOCK_K 64
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CONSUMER_WG
#define CONSUMER_WG 2
#endif
#ifndef SCHEDULE
#define SCHEDULE 0
#endif
#ifndef PRODUCER
#define PRODUCER 0
#endif
#ifndef REG_SPLIT
#define REG_SPLIT 0
#endif
#ifndef CLUSTER_M
#define CLUSTER_M 1
#endif
#ifndef CLUSTER_N
#define CLUSTER_N 1
#endif
#ifndef SWIZZLE
#define SWIZZLE 8
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef EPILOGUE
#define EPILOGUE 1
#endif
#ifndef L2_HINT
#define L2_HINT 0
#endif
#ifndef PACK
#define PACK 0
#endif
#ifndef RAW_SLOTS
#define RAW_SLOTS 2
#endif
#ifndef SKINNY
#define SKINNY 0
#endif
// Problem layout (spec.toml [defines], from the problem's TB and TA): 1 when B
// is stored transposed, N rows of K elements; 1 when A is, K rows of M.
#ifndef GEMM_TB
#define GEMM_TB 0
#endif
#ifndef GEMM_TA
#define GEMM_TA 0
#endif

namespace evotune_gemm_sm90 {

#if defined(EVOTUNE_DTYPE_BF16)
constexpr bool kBF16 = true;
#else
constexpr bool kBF16 = false;
#endif

constexpr int kCWG = CONSUMER_WG;
constexpr bool kPingPong = SCHEDULE == 1;
constexpr int kWgRows = kPingPong ? BLOCK_M : BLOCK_M / kCWG;  // rows one consumer warpgroup owns
constexpr int kMIters = kWgRows / 64;                          // m64 wgmmas per k16 step
constexpr int kAcc = BLOCK_N / 2;                              // fp32 accumulators per m64 block
constexpr int kKSteps = BLOCK_K / 16;
constexpr int kNBoxes = BLOCK_N / 64;  // B boxes of 64 columns
constexpr bool kStorer = EPILOGUE >= 4;  // a storer warp issues the TMA stores (when A and B come by TMA)
constexpr bool kSharedStaging = EPILOGUE == 5;  // one warpgroup's staging, the warpgroups in turn
constexpr int kProducerThreads = PRODUCER ? 128 : (kStorer ? 64 : 32);  // EPILOGUE=4/5: + the storer warp
constexpr int kConsumerThreads = 128 * kCWG;
constexpr int kThreads = kConsumerThreads + kProducerThreads;
constexpr int kCS = CLUSTER_M * CLUSTER_N;
constexpr bool kStreamK = PERSISTENT == 2;
// The producer's leader issues the first loads right after the set-up (no
// cluster, both operands by TMA); not with a 24-register producer, which
// cannot hold the extra loop state without spilling.
constexpr bool kSetupLoads = kCS == 1 && !(PRODUCER == 1 && REG_SPLIT == 1);
// How many: one k-tile. On the H200 it measured best against none and a
// whole ring, before or after the other warps are released (a thread's first
// TMA loads wait for the tensor maps to arrive; the consumers should not).
constexpr int kSetupKTiles = 1;
constexpr bool kEvictFirstA = (L2_HINT & 1) != 0;  // TMA loads of A marked evict-first in L2
constexpr bool kEvictFirstB = (L2_HINT & 2) != 0;

constexpr int kSubBytesA = BLOCK_M * 128;  // one 64-wide K sub-tile of A
constexpr int kStageBytesA = BLOCK_M * BLOCK_K * 2;
// TA=1: A's tile is M-major like B's, BLOCK_M/64 boxes of 64 columns (m) by
// BLOCK_K k-rows of 128 swizzled bytes; an m64 block of a warpgroup is one box.
constexpr bool kTA = GEMM_TA != 0;
constexpr int kBoxBytesA = BLOCK_K * 128;  // TA=1: one 64-wide M box of A
constexpr int kMBoxes = BLOCK_M / 64;
constexpr int kBoxBytesB = BLOCK_K * 128;  // one 64-wide N box of B
// TB=1: B's tile is K-major like A's, BLOCK_N rows of 128-byte swizzled rows
// per 64-wide K sub-tile.
constexpr bool kTB = GEMM_TB != 0;
constexpr int kSubBytesB = BLOCK_N * 128;  // TB=1: one 64-wide K sub-tile of B
constexpr int kStageBytesB = BLOCK_K * BLOCK_N * 2;
constexpr int kStageBytes = kStageBytesA + kStageBytesB;
constexpr int kEpiTileBytes = 16 * 64 * 2;  // a 16 x 64 staging tile
// Per warp: one staging tile (EPILOGUE=1), two that TMA stores drain while
// the warp fills the other (EPILOGUE=2), or one per 16 x 64 piece of the
// warp's part of the tile (EPILOGUE=3: its stores drain during the next
// tile's MMAs). EPILOGUE=4 has the same bytes, laid out per warpgroup as
// BLOCK_N/64 boxes of kWgRows x 64 (warp w's rows at mi*64 + 16w).
// EPILOGUE=5 has one warpgroup's boxes (its EPILOGUE=1 fallback, a tile per
// warp, fits in them).
constexpr int kEpiWarpTiles = kSharedStaging ? 1 : (EPILOGUE >= 3 ? kMIters * kNBoxes : (EPILOGUE == 2 ? 2 : 1));
constexpr int kEpiWgBytes = kWgRows * BLOCK_N * 2;  // EPILOGUE=4/5: one warpgroup's staging
constexpr int kEpiWarpBytes = kEpiWarpTiles * kEpiTileBytes;
constexpr int kEpiBytes = kSharedStaging ? kEpiWgBytes : (EPILOGUE ? (kConsumerThreads / 32) * kEpiWarpBytes : 0);
// PACK=2: B's raw windows, kRawSlots k-tiles of them, each BLOCK_N/64
// columns x 8 residues of BLOCK_K/8 rows of 72 elements (realigning B, below).
constexpr bool kRealignB = PACK == 2;
constexpr int kRawSlots = RAW_SLOTS;
constexpr int kRawRowBytes = 72 * 2;
constexpr int kRawBoxBytes = (BLOCK_K / 8) * kRawRowBytes;
constexpr int kRawSlotBytes = kNBoxes * 8 * kRawBoxBytes;
constexpr int kRawBytes = kRealignB ? kRawSlots * kRawSlotBytes : 0;
constexpr int kBarOffset = STAGES * kStageBytes + kEpiBytes + kRawBytes;
// Barriers, flags, the schedule; PACK=2 adds the raw slots' full and empty barriers.
constexpr int kBarArea = 256 + (kRealignB ? 64 : 0);
constexpr int kSmemBytes = 1024 + kBarOffset + kBarArea;

// PACK=2's realigner warps need more than 40 (56 + 2 x 224 = 3 x 168).
[[maybe_unused]] constexpr int kRegProducer = REG_SPLIT == 0 ? (kRealignB ? 56 : 40) : 24;
[[maybe_unused]] constexpr int kRegConsumer = REG_SPLIT == 0 ? (kRealignB ? 224 : 232) : 240;
// Arrivals that free a stage: each consuming warpgroup, once per CTA whose
// loads land in this CTA (same cluster row or column, this CTA included).
[[maybe_unused]] constexpr int kEmptyArrivals = (kPingPong ? 1 : kCWG) * (CLUSTER_M + CLUSTER_N - 1);
// Fallback producers arrive on k-tile i's full barrier after issuing i+kLag.
// Consumers free k-tile j only once k-tile j+1 is full, so the producer may
// run at most STAGES-2 k-tiles ahead of its announcements without deadlock.
constexpr int kLag = STAGES - 2;
// A producer warpgroup runs on 24-40 registers: no unrolling of its copy loops.
constexpr int kFillUnroll = PRODUCER ? 1 : 2;

// Named barrier ids (0 is __syncthreads).
constexpr int kBarConsumers = 1;  // all consumer threads (cooperative split-K)
constexpr int kBarWg = 2;         // + wg: one warpgroup (ping-pong split-K)
constexpr int kBarOrder = 4;      // + wg: ping-pong turn of warpgroup wg
constexpr int kBarEpiFull = 6;    // + wg: EPILOGUE=4/5, warpgroup wg's boxes staged (consumers arrive, storer syncs)
constexpr int kBarEpiFree = 8;    // + wg: EPILOGUE=4/5, the staging is free for wg (storer arrives)
constexpr int kEpiBarThreads = 128 + 32;  // a consumer warpgroup and the storer warp
constexpr int kBarSetup = 10;             // set-up done (the producer's leader warp arrives, all others sync)

static_assert(BLOCK_K == 64 || BLOCK_K == 128, "BLOCK_K is 64 or 128 (128-byte swizzle rows)");
static_assert(BLOCK_N % 64 == 0 && BLOCK_N >= 64 && BLOCK_N <= 256, "BLOCK_N is 64, 128, 192 or 256");
static_assert(kWgRows == 64 || kWgRows == 128, "a consumer warpgroup owns 64 or 128 rows");
static_assert(kPingPong ? (kCWG == 2) : (kWgRows * kCWG == BLOCK_M), "tile rows split over the warpgroups");
static_assert(PRODUCER == 0 || kCWG == 2, "a producer warpgroup goes with two consumer warpgroups");
static_assert(STAGES >= 2 && STAGES <= 8, "2..8 stages");
static_assert(EPILOGUE >= 0 && EPILOGUE <= 5, "EPILOGUE 0..5");
static_assert(!kSharedStaging || (!kPingPong && kCWG == 2), "EPILOGUE=5: two cooperative warpgroups");
static_assert(!kSharedStaging || kEpiWgBytes >= (kConsumerThreads / 32) * kEpiTileBytes, "EPILOGUE=5 fallback fits");
static_assert(CLUSTER_M >= 1 && CLUSTER_M <= 2 && CLUSTER_N >= 1 && CLUSTER_N <= 2, "cluster dims 1 or 2");
// Pairs only: in a 2x2 cluster, when no multicast couples the CTAs (both
// operands by thread copies), a CTA can run a whole ring ahead of a peer that
// is not its source, and its release then completes that peer's empty phase
// early. In a pair each CTA is the other's source, so that cannot happen.
static_assert(CLUSTER_M * CLUSTER_N <= 2, "clusters of at most 2 CTAs");
static_assert(!kStreamK || (!kPingPong && kCS == 1 && SPLIT_K == 1), "stream-K: cooperative, no cluster, no split");
static_assert(EPILOGUE != 4 || SPLIT_K == 1, "the storer warp serves whole tiles (no split-K)");
static_assert(((kTA ? BLOCK_K : BLOCK_M) / CLUSTER_N) % 8 == 0 && ((kTB ? BLOCK_N : BLOCK_K) / CLUSTER_M) % 8 == 0,
              "multicast slices keep 8-row atoms");
static_assert(kSmemBytes <= 232448, "over 227 KB of shared memory");
static_assert(!kRealignB || (!kTA && !kTB && CLUSTER_M == 1 && PRODUCER == 1 && REG_SPLIT == 0),
              "PACK=2: row-major A and B, B not multicast, a 56-register producer warpgroup");
static_assert(kRawSlots >= 2 && kRawSlots * 16 <= 64, "2..4 raw slots (their barriers fit their area)");

// Timeline build option (EVOTUNE_SM90_TIMELINE, evotune_sm90.cuh; defined
// by tools/timeline.py in a copy of the spec): thread 0 of each CTA stamps
// into its row of 32: 0 entry, 1 SM id, then per unit i < 4 the end of its MMAs
// (2 + 2i) and of its epilogue (3 + 2i); for the last unit, the epilogue's
// start (10), its first staged piece fenced (EPILOGUE=2) or all pieces
// (EPILOGUE=3) (11), the stores issued (12); in the first unit, its first
// k-tile landed (13) and its middle one (14); 15 the consumers' exit; 16 the
// producer's first loads issued, 17 thread 0 past the set-up barrier, 18 the
// producer about to issue them, 19 the producer's leader starting; for units
// 0 and 1, the cycles thread 0 waited on full barriers (+ 1), in all k-tiles
// (20 + 2i) and in the first four (21 + 2i).
using evotune_sm90::tl_mark;
using evotune_sm90::tl_mark_any;
using evotune_sm90::tl_start;

// Where this launch's work comes from: tiles, K split, grid of clusters.
struct Sched {
  int M, N, K;
  int tiles_m, tiles_n;  // C tiles
  int ctm, ctn;          // cluster tiles (tiles grouped CLUSTER_M x CLUSTER_N)
  int tiles_c;           // ctm * ctn
  int units;             // tiles_c * SPLIT_K
  int kt_total, kt_per;  // k-tiles in K, per split
  int cluster, clusters; // this cluster, clusters in the grid
  int rank_m, rank_n;    // this CTA's position in its cluster
  int count;             // units this CTA (cluster) runs
  // Stream-K: the first sk_tiles tiles (raster order) are a stream of k-tiles
  // cut over sk_ctas CTAs; this CTA's range [sk_b, sk_e) in sk_segs segments.
  int sk_tiles, sk_ctas, sk_segs;
  long long sk_iters, sk_b, sk_e;
};

// Shared-memory area after the stages and staging tiles: STAGES full and
// STAGES empty mbarriers, two split-K flags (16 bytes), the Sched.
static_assert(16 * STAGES + 16 + sizeof(Sched) <= 256, "barriers, flags and the schedule fit the 256-byte area");

struct Unit {
  int tile_m, tile_n, split;
  int kt_begin, k_tiles;
  bool live;  // the tile lies inside C (false only for cluster padding)
  // Stream-K: the tile's index, and this segment's part in finishing it:
  // -1 publishes a partial, 0 stores the whole tile, p > 0 adds the partials
  // of the p CTAs before it and stores.
  int tile, peers;
};

__device__ __forceinline__ Sched make_sched(int M, int N, int K) {
  Sched s;
  s.M = M;
  s.N = N;
  s.K = K;
  s.tiles_m = (M + BLOCK_M - 1) / BLOCK_M;
  s.tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
  s.ctm = (s.tiles_m + CLUSTER_M - 1) / CLUSTER_M;
  s.ctn = (s.tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  s.tiles_c = s.ctm * s.ctn;
  s.units = s.tiles_c * SPLIT_K;
  s.kt_total = (K + BLOCK_K - 1) / BLOCK_K;
  s.kt_per = (s.kt_total + SPLIT_K - 1) / SPLIT_K;
  s.cluster = blockIdx.x / kCS;
  s.clusters = gridDim.x / kCS;
  const int rank = kCS > 1 ? (int)evotune_sm90::cluster_ctarank() : 0;
  s.rank_m = rank % CLUSTER_M;
  s.rank_n = rank / CLUSTER_M;
  s.count = s.cluster < s.units ? (s.units - s.cluster + s.clusters - 1) / s.clusters : 0;
  s.sk_tiles = s.sk_ctas = s.sk_segs = 0;
  s.sk_iters = s.sk_b = s.sk_e = 0;
  if constexpr (kStreamK) {
    const int T = s.tiles_c, G = s.clusters, c = s.cluster;
    s.sk_tiles = T < G ? T : T % G;
    s.sk_ctas = min(G, 2 * s.sk_tiles);
    s.sk_iters = (long long)s.sk_tiles * s.kt_total;
    if (c < s.sk_ctas) {
      s.sk_b = (long long)c * s.sk_iters / s.sk_ctas;
      s.sk_e = (long long)(c + 1) * s.sk_iters / s.sk_ctas;
    }
    if (s.sk_e > s.sk_b) s.sk_segs = (int)((s.sk_e - 1) / s.kt_total - s.sk_b / s.kt_total + 1);
    const int dp_first = s.sk_tiles + c;  // data-parallel tiles after the stream: dp_first, + G, ...
    s.count = s.sk_segs + (dp_first < T ? (T - dp_first + G - 1) / G : 0);
  }
  return s;
}

// Unit u → this CTA's tile. Splits outermost; cluster tiles rasterised in
// groups of SWIZZLE cluster-rows (down a group, then across).
__device__ __forceinline__ Unit decode(const Sched& s, int u) {
  Unit w;
  w.split = u / s.tiles_c;
  const int t = u - w.split * s.tiles_c;
  const int group_size = SWIZZLE * s.ctn;
  const int g = t / group_size;
  const int first = g * SWIZZLE;
  const int rows = min(s.ctm - first, SWIZZLE);
  const int in = t - g * group_size;
  w.tile_m = (first + in % rows) * CLUSTER_M + s.rank_m;
  w.tile_n = (in / rows) * CLUSTER_N + s.rank_n;
  w.kt_begin = w.split * s.kt_per;
  w.k_tiles = max(0, min(s.kt_total - w.kt_begin, s.kt_per));
  w.live = w.tile_m < s.tiles_m && w.tile_n < s.tiles_n;
  w.tile = t;
  w.peers = 0;
  return w;
}

// The CTA whose stream range holds iteration g (ranges start at
// floor(c * iters / ctas)).
__device__ __forceinline__ int sk_owner(const Sched& s, long long g) {
  return (int)(((g + 1) * s.sk_ctas - 1) / s.sk_iters);
}

// This CTA's (cluster's) i-th unit, 0 <= i < s.count.
__device__ __forceinline__ Unit unit_at(const Sched& s, int i) {
  if constexpr (!kStreamK) {
    return decode(s, s.cluster + i * s.clusters);
  } else {
    if (i >= s.sk_segs) return decode(s, s.sk_tiles + s.cluster + (i - s.sk_segs) * s.clusters);
    // Last tile first; the segment with the tile's last k-tile owns it.
    const long long kt = s.kt_total;
    const int t = (int)((s.sk_e - 1) / kt) - i;
    const long long t0 = t * kt, t1 = t0 + kt;
    const long long gb = max(s.sk_b, t0), ge = min(s.sk_e, t1);
    Unit w = decode(s, t);
    w.kt_begin = (int)(gb - t0);
    w.k_tiles = (int)(ge - gb);
    w.peers = ge != t1 ? -1 : s.cluster - sk_owner(s, t0);
    return w;
  }
}

// Ring position: stage index and phase parity of the k-tile it counts.
struct Ring {
  int stage = 0;
  unsigned phase = 0;
  __device__ __forceinline__ void next() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1u;
    }
  }
  __device__ __forceinline__ void skip(int n) {
    stage += n;
    phase ^= (unsigned)((stage / STAGES) & 1);
    stage %= STAGES;
  }
};

// ------------------------------------------------------------ fallback loads

// Copies one W-byte piece global → shared. `avail` counts the piece's elements
// inside the matrix (<= 0: none); pieces outside become zeros without reading
// global memory. cp.async pieces lie wholly inside or outside (the row stride
// is a multiple of their width). ELEM: odd strides, where no two elements share
// an aligned word: 8 predicated 2-byte loads (independent, so in flight
// together) packed into one 16-byte shared store.
template <int W, bool ELEM>
__device__ __forceinline__ void copy_piece(unsigned dst, const evotune_elem_t* src, int avail) {
  if constexpr (ELEM) {
    static_assert(W == 16, "element pieces fill 16-byte chunks");
    const unsigned short* p = reinterpret_cast<const unsigned short*>(src);
    unsigned w[4];
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      const unsigned lo = e < avail ? (unsigned)__ldg(p + e) : 0u;
      const unsigned hi = e + 1 < avail ? (unsigned)__ldg(p + e + 1) : 0u;
      w[e / 2] = lo | (hi << 16);
    }
    asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  } else if constexpr (W == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(avail > 0 ? 16u : 0u)
                 : "memory");
  } else {
    static_assert(W == 8 || W == 4, "cp.async widths");
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(src), "n"(W),
                 "r"(avail > 0 ? (unsigned)W : 0u)
                 : "memory");
  }
}

// Widest piece the row stride allows (rows start 16-byte aligned only when
// the stride is a multiple of 8 elements).
__device__ __forceinline__ int piece_bytes(int stride) {
  return (stride % 8 == 0) ? 16 : (stride % 4 == 0) ? 8 : (stride % 2 == 0) ? 4 : 2;
}

// A K-major tile (ROWS rows from r0, k0..k0+BLOCK_K) of a matrix of `rows`
// rows of K elements into a stage region of BLOCK_K/64 sub-tiles of ROWS x
// 128 bytes, W-byte pieces, thread `ptid` of kProducerThreads. Same swizzled
// placement as TMA. A's tile, and with TB=1 B's (Bᵀ's rows).
template <int ROWS, int W, bool ELEM = false>
__device__ __forceinline__ void fill_k_major(unsigned dst, const evotune_elem_t* __restrict__ src, int rows, int K,
                                             int r0, int k0, int ptid) {
  constexpr int kPPR = 128 / W;  // pieces per 128-byte row
  constexpr int kPerSub = ROWS * kPPR;
  constexpr int kTotal = kPerSub * (BLOCK_K / 64);
#pragma unroll kFillUnroll
  for (int p = ptid; p < kTotal; p += kProducerThreads) {
    const int sub = p / kPerSub;
    const int rem = p - sub * kPerSub;
    const int row = rem / kPPR;
    const int byte = (rem % kPPR) * W;
    const unsigned d = dst + sub * (ROWS * 128) + row * 128 + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15));
    const int r = r0 + row;
    const int k = k0 + sub * 64 + (byte >> 1);
    const int avail = r < rows ? K - k : 0;
    copy_piece<W, ELEM>(d, avail > 0 ? src + (long long)r * K + k : src, avail);
  }
}

// The same with the widest pieces K allows.
template <int ROWS>
__device__ __forceinline__ void fill_k_major_any(unsigned dst, const evotune_elem_t* __restrict__ src, int rows, int K,
                                                 int r0, int k0, int ptid) {
  switch (piece_bytes(K)) {
    case 16: fill_k_major<ROWS, 16>(dst, src, rows, K, r0, k0, ptid); break;
    case 8: fill_k_major<ROWS, 8>(dst, src, rows, K, r0, k0, ptid); break;
    case 4: fill_k_major<ROWS, 4>(dst, src, rows, K, r0, k0, ptid); break;
    default: fill_k_major<ROWS, 16, true>(dst, src, rows, K, r0, k0, ptid); break;
  }
}

// An MN-major tile (k0..k0+BLOCK_K rows, COLS columns from c0) of a matrix
// of K rows of `cols` elements into a stage region of COLS/64 boxes of
// BLOCK_K x 128 bytes, W-byte pieces, thread `ptid` of kProducerThreads. Same
// swizzled placement as TMA. B's tile, and with TA=1 A's (Aᵀ's rows).
template <int COLS, int W, bool ELEM = false>
__device__ __forceinline__ void fill_mn_major(unsigned dst_b, const evotune_elem_t* __restrict__ B, int N, int K,
                                              int n0, int k0, int ptid) {
  constexpr int kPPR = 128 / W;
  constexpr int kPerBox = BLOCK_K * kPPR;
  constexpr int kTotal = kPerBox * (COLS / 64);
#pragma unroll kFillUnroll
  for (int p = ptid; p < kTotal; p += kProducerThreads) {
    const int box = p / kPerBox;
    const int rem = p - box * kPerBox;
    const int kr = rem / kPPR;
    const int byte = (rem % kPPR) * W;
    const unsigned dst =
        dst_b + box * (BLOCK_K * 128) + kr * 128 + ((((byte >> 4) ^ (kr & 7)) << 4) | (byte & 15));
    const int k = k0 + kr;
    const int n = n0 + box * 64 + (byte >> 1);
    const int avail = k < K ? N - n : 0;
    copy_piece<W, ELEM>(dst, avail > 0 ? B + (long long)k * N + n : B, avail);
  }
}

// The same with the widest pieces the row length allows.
template <int COLS>
__device__ __forceinline__ void fill_mn_major_any(unsigned dst, const evotune_elem_t* __restrict__ src, int cols,
                                                  int K, int c0, int k0, int ptid) {
  switch (piece_bytes(cols)) {
    case 16: fill_mn_major<COLS, 16>(dst, src, cols, K, c0, k0, ptid); break;
    case 8: fill_mn_major<COLS, 8>(dst, src, cols, K, c0, k0, ptid); break;
    case 4: fill_mn_major<COLS, 4>(dst, src, cols, K, c0, k0, ptid); break;
    default: fill_mn_major<COLS, 16, true>(dst, src, cols, K, c0, k0, ptid); break;
  }
}


// ------------------------------------------------------------ packing (PACK=1)

// An operand whose row stride is not a multiple of 16 bytes cannot be loaded
// by TMA. With PACK=1 the launch first copies it into a scratch buffer whose
// rows are padded to a multiple of 8 elements (a_packed, b_packed); the tensor
// maps over those buffers keep the true column count, so the padding is never
// read, and the main loop runs on TMA loads as for an aligned problem. The
// copy is cut into blocks of kPackVecs 8-element vectors within one row,
// which the launch's warps claim and run before anything else
// (evotune_sm90::grid_prepass).
constexpr int kPackVecs = 256;  // vectors per claimed block: 4 KB, 8 per lane

struct PackMatrix {
  const unsigned short* src;  // rows of `cols` elements
  unsigned short* dst;        // rows of vrow * 8 elements
  int cols, vrow, blocks_per_row;
  long long blocks;
};

__device__ __forceinline__ PackMatrix pack_matrix(const evotune_elem_t* src, evotune_elem_t* dst, int rows, int cols,
                                                  bool on) {
  PackMatrix m;
  m.src = reinterpret_cast<const unsigned short*>(src);
  m.dst = reinterpret_cast<unsigned short*>(dst);
  m.cols = cols;
  m.vrow = (cols + 7) / 8;
  m.blocks_per_row = (m.vrow + kPackVecs - 1) / kPackVecs;
  m.blocks = on ? (long long)rows * m.blocks_per_row : 0;
  return m;
}

// One block: this lane's 8 vectors of row r, from vector v0 of the row. All
// loads are issued before the first store.
__device__ __forceinline__ void pack_block(const PackMatrix& m, long long b, int lane) {
  const long long r = b / m.blocks_per_row;
  const int v0 = (int)(b - r * m.blocks_per_row) * kPackVecs;
  const unsigned short* src = m.src + r * m.cols;
  unsigned w[kPackVecs / 32][4];
#pragma unroll
  for (int i = 0; i < kPackVecs / 32; ++i) {
    const int c = (v0 + i * 32 + lane) * 8;
#pragma unroll
    for (int e = 0; e < 8; e += 2) {
      const unsigned lo = c + e < m.cols ? (unsigned)__ldg(src + c + e) : 0u;
      const unsigned hi = c + e + 1 < m.cols ? (unsigned)__ldg(src + c + e + 1) : 0u;
      w[i][e / 2] = lo | (hi << 16);
    }
  }
#pragma unroll
  for (int i = 0; i < kPackVecs / 32; ++i) {
    const int v = v0 + i * 32 + lane;
    if (v < m.vrow)
      asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(m.dst + (r * m.vrow + v) * 8), "r"(w[i][0]),
                   "r"(w[i][1]), "r"(w[i][2]), "r"(w[i][3])
                   : "memory");
  }
}

// Every thread of the CTA takes part; returns once both packed buffers are
// complete and visible to this CTA's TMA loads.
__device__ __forceinline__ void pack_operands(const PackMatrix& a, const PackMatrix& b, unsigned* sync) {
  evotune_sm90::grid_prepass(sync, a.blocks + b.blocks, [&](long long blk, int lane) {
    if (blk < a.blocks)
      pack_block(a, blk, lane);
    else
      pack_block(b, blk - a.blocks, lane);
  });
}

// ------------------------------------------------------------ realigning B (PACK=2)

// B's rows are misaligned when N % 8 != 0, which rules TMA out, but every
// eighth row is 16-byte aligned relative to the one 8 rows up (8N elements
// apart). Seen as a 2-D tensor of K/8 rows of 8N elements (its residue view,
// map tm_br: row q holds B's rows 8q .. 8q+7 end to end), B's row stride is a
// multiple of 16 bytes and TMA loads it; the column r*N + n of that view is
// B's element (8q + r, n). A box must start on a 16-byte boundary (one that
// does not stops the kernel with an illegal instruction on an H100), so for
// the 64 columns n0 .. n0+63 of residue r the box starts s_r = (r*N) % 8
// elements early and is 72 wide: the raw window, unswizzled, BLOCK_K/8 rows of
// it per residue. The producer warpgroup's leader issues the 8 windows per 64
// columns into a raw slot (RAW_SLOTS of them, with their own full and empty
// barriers), then A's tile into the stage (the windows wait only for their
// slot, so they run ahead of the ring); its warps 1-3 (the realigners) wait
// for the raw slot and the stage, copy each 16-byte piece of B's tile from its
// window shifted by s_r (two aligned 16-byte reads, word picks and half-word
// permutes fixed per residue), in B's natural row order and the 128-byte
// swizzle, fence, and arrive on the stage's full barrier. K % 8 == 0, so no
// row of B falls outside the view (rows past K/8 and columns past 8N read as
// zeros); columns past N in a window read the next row of B, which only
// reaches columns of C that are never stored. Elsewhere (a check shape whose
// rows are aligned, or odd K) PACK=2 loads as PACK=0.
__device__ __forceinline__ bool realign_b(int N, int K) { return kRealignB && N % 8 != 0 && K % 8 == 0; }

// The 16 bytes starting S elements into the 32 bytes x (8 words).
template <int S>
__device__ __forceinline__ uint4 shift_piece(const unsigned (&x)[8]) {
  constexpr int w = S / 2;
  if constexpr (S % 2 == 0)
    return make_uint4(x[w], x[w + 1], x[w + 2], x[w + 3]);
  else
    return make_uint4(__byte_perm(x[w], x[w + 1], 0x5432), __byte_perm(x[w + 1], x[w + 2], 0x5432),
                      __byte_perm(x[w + 2], x[w + 3], 0x5432), __byte_perm(x[w + 3], x[w + 4], 0x5432));
}

// Rows rho, rho + 4, ... (BLOCK_K/32 of them, this lane's) of one residue's
// window, piece c of each, two rows at a time: both 16-byte reads of each row
// issued first, then the pieces shifted by S and written to B's rows 8q + r
// in the swizzle.
template <int S>
__device__ __forceinline__ void realign_rows(unsigned src, unsigned dst, int r, int rho, int c) {
  constexpr int kGroups = BLOCK_K / 32;            // rows per lane (BLOCK_K/8 rows, 4 per pass of the warp)
  constexpr int kBatch = kGroups < 2 ? kGroups : 2;  // read ahead within the 56 registers
#pragma unroll
  for (int h = 0; h < kGroups; h += kBatch) {
    unsigned x[kBatch][8];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const unsigned a = src + (rho + 4 * (h + j)) * kRawRowBytes + c * 16;
      asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(x[j][0]), "=r"(x[j][1]), "=r"(x[j][2]), "=r"(x[j][3])
                   : "r"(a));
      asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                   : "=r"(x[j][4]), "=r"(x[j][5]), "=r"(x[j][6]), "=r"(x[j][7])
                   : "r"(a + 16));
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const uint4 v = shift_piece<S>(x[j]);
      // Row krow = 8 (rho + 4 (h + j)) + r; piece c sits at c ^ (krow & 7) = c ^ r.
      const unsigned d = dst + (8 * (rho + 4 * (h + j)) + r) * 128 + ((c ^ r) << 4);
      asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(d), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                   : "memory");
    }
  }
}

// One realigner warp's share of a k-tile: the (64 columns, residue r) windows
// warp, warp + 3, ...; lane l takes piece l % 8 of rows l / 8 + 4j.
__device__ __forceinline__ void realign_ktile(unsigned raw, unsigned b_dst, int N, int warp, int lane) {
  const int rho = lane >> 3, c = lane & 7;
  for (int t = warp; t < kNBoxes * 8; t += 3) {
    const int box = t >> 3, r = t & 7;
    const unsigned src = raw + t * kRawBoxBytes, dst = b_dst + box * kBoxBytesB;
    switch ((r * N) & 7) {  // the window's shift, warp-uniform
      case 0: realign_rows<0>(src, dst, r, rho, c); break;
      case 1: realign_rows<1>(src, dst, r, rho, c); break;
      case 2: realign_rows<2>(src, dst, r, rho, c); break;
      case 3: realign_rows<3>(src, dst, r, rho, c); break;
      case 4: realign_rows<4>(src, dst, r, rho, c); break;
      case 5: realign_rows<5>(src, dst, r, rho, c); break;
      case 6: realign_rows<6>(src, dst, r, rho, c); break;
      default: realign_rows<7>(src, dst, r, rho, c); break;
    }
  }
}

// ------------------------------------------------------------ producer

// One TMA box into this CTA (kCopies == 1) or multicast to the CTAs in `mask`,
// optionally marked evict-first in L2.
template <int kCopies, bool kEvictFirst>
__device__ __forceinline__ void tma_load(unsigned dst, const EvotuneTmap* tm, int c0, int c1, unsigned bar,
                                         unsigned short mask) {
  using namespace evotune_sm90;
  if constexpr (kCopies > 1 && kEvictFirst)
    tma_load_2d_multicast_hint(dst, tm, c0, c1, bar, mask, l2_evict_first_policy());
  else if constexpr (kCopies > 1)
    tma_load_2d_multicast(dst, tm, c0, c1, bar, mask);
  else if constexpr (kEvictFirst)
    tma_load_2d_hint(dst, tm, c0, c1, bar, l2_evict_first_policy());
  else
    tma_load_2d(dst, tm, c0, c1, bar);
}

// One k-tile's TMA loads into ring stage `stage`: the full barrier's
// expected bytes, then this CTA's slices of the operands that come by TMA,
// multicast to the CTAs that share them.
__device__ __forceinline__ void issue_tma_ktile(const Sched& s, const EvotuneTmap* tm_a, const EvotuneTmap* tm_b,
                                                unsigned smem, int stage, int m0, int n0, int k0, bool tma_a,
                                                bool tma_b) {
  using namespace evotune_sm90;
  const unsigned full = smem + kBarOffset + 8 * stage;
  const unsigned a_dst = smem + stage * kStageBytes;
  const unsigned b_dst = a_dst + kStageBytesA;
  mbar_arrive_expect_tx(full, (tma_a ? (unsigned)kStageBytesA : 0u) + (tma_b ? (unsigned)kStageBytesB : 0u));
  if (tma_a) {
    // This CTA's slice of the A tile, rows rank_n * BLOCK_M/CLUSTER_N on (or
    // with TA=1 of every A box's k rows), to the CTAs of its cluster row
    // (rank = rank_m + CLUSTER_M * rank_n).
    unsigned short mask = 0;
#pragma unroll
    for (int j = 0; j < CLUSTER_N; ++j) mask |= (unsigned short)(1u << (s.rank_m + CLUSTER_M * j));
    if constexpr (kTA) {
      constexpr int kRows = BLOCK_K / CLUSTER_N;
#pragma unroll
      for (int box = 0; box < kMBoxes; ++box)
        tma_load<CLUSTER_N, kEvictFirstA>(a_dst + box * kBoxBytesA + s.rank_n * kRows * 128, tm_a, m0 + box * 64,
                                          k0 + s.rank_n * kRows, full, mask);
    } else {
      constexpr int kRows = BLOCK_M / CLUSTER_N;
#pragma unroll
      for (int sub = 0; sub < BLOCK_K / 64; ++sub)
        tma_load<CLUSTER_N, kEvictFirstA>(a_dst + sub * kSubBytesA + s.rank_n * kRows * 128, tm_a, k0 + sub * 64,
                                          m0 + s.rank_n * kRows, full, mask);
    }
  }
  if (tma_b) {
    // This CTA's slice of the B tile, to its cluster column: of every B box's
    // k rows, or with TB=1 of the tile's n rows in every K sub-tile.
    unsigned short mask = 0;
#pragma unroll
    for (int j = 0; j < CLUSTER_M; ++j) mask |= (unsigned short)(1u << (j + CLUSTER_M * s.rank_n));
    if constexpr (kTB) {
      constexpr int kRows = BLOCK_N / CLUSTER_M;
#pragma unroll
      for (int sub = 0; sub < BLOCK_K / 64; ++sub)
        tma_load<CLUSTER_M, kEvictFirstB>(b_dst + sub * kSubBytesB + s.rank_m * kRows * 128, tm_b, k0 + sub * 64,
                                          n0 + s.rank_m * kRows, full, mask);
    } else {
      constexpr int kRows = BLOCK_K / CLUSTER_M;
#pragma unroll
      for (int box = 0; box < kNBoxes; ++box)
        tma_load<CLUSTER_M, kEvictFirstB>(b_dst + box * kBoxBytesB + s.rank_m * kRows * 128, tm_b, n0 + box * 64,
                                          k0 + s.rank_m * kRows, full, mask);
    }
  }
}

// Matrix sizes, pointers and flags come straight from the kernel parameters
// (constant bank) so that a 24-register producer warpgroup need not hold them.
// The first `pre` k-tiles of the first unit were issued right after the
// set-up (by the leader, before its own set-up here).
__device__ __forceinline__ void producer(const Sched& s, const EvotuneTmap* tm_a, const EvotuneTmap* tm_b,
                                         const evotune_elem_t* __restrict__ A, const evotune_elem_t* __restrict__ B,
                                         int M, int N, int K, unsigned smem, bool tma_a, bool tma_b, int ptid,
                                         int pre) {
  using namespace evotune_sm90;
  const unsigned full0 = smem + kBarOffset, empty0 = full0 + 8 * STAGES;
  const bool fallback = !tma_a || !tma_b;
  const bool leader = ptid == 0;
  if (!fallback && !leader) return;  // pure TMA: one thread issues everything
  if (leader) tl_mark_any(19);
  if (leader && pre == 0) {
    if (tma_a) tma_prefetch_desc(tm_a);
    if (tma_b) tma_prefetch_desc(tm_b);
  }

  if constexpr (!kSetupLoads) pre = 0;
  Ring ring;       // stage being filled
  ring.skip(pre);  // the set-up filled the first pre stages (pure TMA only)
  int issued = 0;  // k-tiles issued so far (for the fallback lag)
  for (int i = 0; i < s.count; ++i) {
    const Unit w = unit_at(s, i);
    const int m0 = w.tile_m * BLOCK_M, n0 = w.tile_n * BLOCK_N;
    for (int kt = i == 0 ? pre : 0; kt < w.k_tiles; ++kt) {
      const int k0 = (w.kt_begin + kt) * BLOCK_K;
      const unsigned a_dst = smem + ring.stage * kStageBytes;
      const unsigned b_dst = a_dst + kStageBytesA;
      mbar_wait(empty0 + 8 * ring.stage, ring.phase ^ 1u);  // every reader (in every CTA) released it
      if (leader && i == 0 && kt == 0) tl_mark_any(18);
      if (leader && (tma_a || tma_b)) issue_tma_ktile(s, tm_a, tm_b, smem, ring.stage, m0, n0, k0, tma_a, tma_b);
      if (leader && i == 0 && kt == 0) tl_mark_any(16);
      if (fallback) {
        // Whole tiles of the non-TMA operands, this CTA only (no multicast).
        if (!tma_a) {
          if constexpr (kTA)
            fill_mn_major_any<BLOCK_M>(a_dst, A, M, K, m0, k0, ptid);  // Aᵀ's rows, as B's
          else
            fill_k_major_any<BLOCK_M>(a_dst, A, M, K, m0, k0, ptid);
        }
        if (!tma_b) {
          if constexpr (kTB)
            fill_k_major_any<BLOCK_N>(b_dst, B, N, K, n0, k0, ptid);  // Bᵀ's rows, as A's
          else
            fill_mn_major_any<BLOCK_N>(b_dst, B, N, K, n0, k0, ptid);
        }
        evotune_ptx::cp_async_commit();
        if (++issued > kLag) {
          // The copies of k-tile issued-1-kLag (kLag stages back) have landed:
          // make them visible to the tensor cores' async proxy, then count
          // this thread in.
          evotune_ptx::cp_async_wait<kLag>();
          fence_proxy_async();
          mbar_arrive(full0 + 8 * (ring.stage >= kLag ? ring.stage - kLag : ring.stage + STAGES - kLag));
        }
      }
      ring.next();
    }
  }
  if (fallback) {
    // Announce the last min(issued, kLag) k-tiles, oldest first.
    evotune_ptx::cp_async_wait_all();
    fence_proxy_async();
    for (int j = min(issued, kLag); j > 0; --j)
      mbar_arrive(full0 + 8 * (ring.stage >= j ? ring.stage - j : ring.stage + STAGES - j));
  }
}

// PACK=2 with B's rows misaligned: the leader issues B's raw windows into a
// raw slot, then A's tile into the stage; warps 1-3 realign B into the stage
// (realigning B, above). Stage full: the leader's expect_tx arrival and one
// per realigner warp; raw full: the leader's; raw empty: one per realigner
// warp.
__device__ __forceinline__ void producer_realign(const Sched& s, const EvotuneTmap* tm_a, const EvotuneTmap* tm_br,
                                                 unsigned smem, int ptid) {
  using namespace evotune_sm90;
  const unsigned full0 = smem + kBarOffset, empty0 = full0 + 8 * STAGES;
  const unsigned raw_full0 = smem + kBarOffset + 256, raw_empty0 = raw_full0 + 8 * kRawSlots;
  const unsigned raw0 = smem + STAGES * kStageBytes + kEpiBytes;
  const int warp = ptid >> 5, lane = ptid & 31;
  if (warp == 0 && lane != 0) return;
  if (ptid == 0) {
    tma_prefetch_desc(tm_a);
    tma_prefetch_desc(tm_br);
  }
  Ring ring;          // stage being filled
  int slot = 0;       // raw slot being filled
  unsigned rph = 0;   // its phase
  for (int i = 0; i < s.count; ++i) {
    const Unit w = unit_at(s, i);
    const int m0 = w.tile_m * BLOCK_M, n0 = w.tile_n * BLOCK_N;
    for (int kt = 0; kt < w.k_tiles; ++kt) {
      const int k0 = (w.kt_begin + kt) * BLOCK_K;
      const unsigned raw = raw0 + slot * kRawSlotBytes;
      if (warp == 0) {
        // B's windows first: they wait only for their raw slot, A for the stage.
        mbar_wait(raw_empty0 + 8 * slot, rph ^ 1u);
        mbar_arrive_expect_tx(raw_full0 + 8 * slot, (unsigned)kRawSlotBytes);
#pragma unroll
        for (int box = 0; box < kNBoxes; ++box)
#pragma unroll
          for (int r = 0; r < 8; ++r)
            tma_load<1, kEvictFirstB>(raw + (box * 8 + r) * kRawBoxBytes, tm_br, (r * s.N + n0 + box * 64) & ~7,
                                      k0 / 8, raw_full0 + 8 * slot, 0);
        mbar_wait(empty0 + 8 * ring.stage, ring.phase ^ 1u);
        issue_tma_ktile(s, tm_a, tm_a, smem, ring.stage, m0, n0, k0, true, false);  // A only
      } else {
        mbar_wait(raw_full0 + 8 * slot, rph);
        mbar_wait(empty0 + 8 * ring.stage, ring.phase ^ 1u);
        realign_ktile(raw, smem + ring.stage * kStageBytes + kStageBytesA, s.N, warp - 1, lane);
        fence_proxy_async();  // the generic-proxy stores, visible to the wgmma reads
        __syncwarp();
        if (lane == 0) {
          mbar_arrive(full0 + 8 * ring.stage);
          mbar_arrive(raw_empty0 + 8 * slot);
        }
      }
      ring.next();
      if (++slot == kRawSlots) {
        slot = 0;
        rph ^= 1u;
      }
    }
  }
}

// ------------------------------------------------------------ consumers

// Releases a stage: one arrival per source CTA (thread j of the warpgroup's
// first warp signals cluster rank j when that CTA loads into this one).
__device__ __forceinline__ void release_stage(unsigned empty, const Sched& s, int wg_tid) {
  using namespace evotune_sm90;
  if constexpr (kCS == 1) {
    if (wg_tid == 0) mbar_arrive(empty);
  } else {
    if (wg_tid < kCS) {
      const int rm = wg_tid % CLUSTER_M, rn = wg_tid / CLUSTER_M;
      if (rm == s.rank_m || rn == s.rank_n) mbar_arrive_cluster(empty, (unsigned)wg_tid);
    }
  }
}

// One tile's MMAs for one warpgroup: k_tiles stages from `ring` on.
__device__ __forceinline__ void mainloop(float (&acc)[kMIters][kAcc], Ring& ring, int k_tiles, const Sched& s,
                                         unsigned smem, unsigned full0, unsigned empty0, int row0_in_tile,
                                         int wg_tid, int unit) {
  using namespace evotune_sm90;
#pragma unroll
  for (int mi = 0; mi < kMIters; ++mi)
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      acc[mi][j] = 0.f;
      fence_operand(acc[mi][j]);
    }
  // Descriptors of stage 0's first k16 step; a stage, step or m64 block adds
  // its byte offset >> 4 to the address field (bits 0-13). Shared addresses
  // stay below 256 KB, so the field never carries into the next one, and the
  // loop adds constants instead of building descriptors (half the mainloop's
  // instructions).
  // B: N-major atoms of 64 columns x 8 k-rows; the next atom along N is the
  // next box (BLOCK_K*128 bytes), the next 8 k-rows 1024 bytes on.
  // A: K-major, rows of 128 bytes; k16 slice kk%4 starts 32 bytes in.
  // TA=1: A M-major as B (the warpgroup's m64 blocks are boxes row0/64 on).
  const unsigned long long da0 = kTA ? make_desc_sw128(smem + (row0_in_tile / 64) * kBoxBytesA, kBoxBytesA, 1024)
                                     : make_desc_sw128(smem + row0_in_tile * 128, 16, 1024);
  // TB=1: B K-major as A (BLOCK_N rows of 128 bytes per K sub-tile).
  const unsigned long long db0 = make_desc_sw128(smem + kStageBytesA, kTB ? 16 : kBoxBytesB, 1024);
  Ring prev = ring;  // stage of the previous k-tile, released one step late
#if defined(EVOTUNE_SM90_TIMELINE)
  long long waited = 0, waited_first = 0;  // cycles in the full-barrier waits: all, the first 4 k-tiles
#endif
  for (int kt = 0; kt < k_tiles; ++kt) {
#if defined(EVOTUNE_SM90_TIMELINE)
    const long long t_wait = clock64();
#endif
    mbar_wait(full0 + 8 * ring.stage, ring.phase);
#if defined(EVOTUNE_SM90_TIMELINE)
    const long long dt = clock64() - t_wait;
    waited += dt;
    if (kt < 4) waited_first += dt;
#endif
    if (unit == 0 && (kt == 0 || kt == k_tiles / 2)) tl_mark(kt == 0 ? 13 : 14);
    const unsigned long long so = (unsigned)(ring.stage * kStageBytes) >> 4;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      const unsigned long long db =
          db0 + so + ((kTB ? (kk / 4) * kSubBytesB + (kk % 4) * 32 : kk * 16 * 128) >> 4);
#pragma unroll
      for (int mi = 0; mi < kMIters; ++mi) {
        const unsigned long long da =
            da0 + so +
            ((kTA ? mi * kBoxBytesA + kk * 16 * 128 : (kk / 4) * kSubBytesA + mi * 64 * 128 + (kk % 4) * 32) >> 4);
        wgmma_ss<BLOCK_N, kBF16, kTB ? 0 : 1, kTA ? 1 : 0>(acc[mi], da, db);
      }
    }
    wgmma_commit();
    if (kt > 0) {
      wgmma_wait<1>();  // the previous k-tile's MMAs are done with their stage
      release_stage(empty0 + 8 * prev.stage, s, wg_tid);
      prev.next();
    }
    ring.next();
  }
  wgmma_wait<0>();
#pragma unroll
  for (int mi = 0; mi < kMIters; ++mi)
#pragma unroll
    for (int j = 0; j < kAcc; ++j) fence_operand(acc[mi][j]);
  if (k_tiles > 0) release_stage(empty0 + 8 * prev.stage, s, wg_tid);
#if defined(EVOTUNE_SM90_TIMELINE)
  if (unit < 2) {  // + 1: a stamp of 0 reads as "not stamped"
    tl_mark(20 + 2 * unit, (unsigned long long)waited + 1);
    tl_mark(21 + 2 * unit, (unsigned long long)waited_first + 1);
  }
#endif
}

// Accumulator fragment (wgmma D, m64nN): thread t of the warpgroup holds, for
// column group j (8 columns) and half h, acc[4j + 2h + e] at row
// 16*(t/32) + (t%32)/4 + 8h, column 8j + 2*(t%4) + e.

// Split-K: publish this warpgroup's part of the slice's fp32 partial tile (in
// the accumulator layout), count the slice in, and return whether it arrived
// last. Every slice writes its partial, so the last one can sum all of them
// with plain row-wise loads afterwards instead of adding into live
// accumulators (which would need another register per accumulator).
__device__ __forceinline__ bool splitk_publish(const float (&acc)[kMIters][kAcc], const Unit& w, const Sched& s,
                                               float* __restrict__ workspace, unsigned* __restrict__ counters,
                                               volatile unsigned* flag, int m_wg, int n0, int wg_tid, int bar_id,
                                               int bar_threads, bool first_thread) {
  const long long MN = (long long)s.M * s.N;
  const bool vec = (s.N % 2) == 0;
  const int lane = wg_tid & 31;
  const int row0 = m_wg + (wg_tid >> 5) * 16 + (lane >> 2);
  const int col0 = n0 + (lane & 3) * 2;
  float* ws = workspace + (long long)w.split * MN;
#pragma unroll
  for (int mi = 0; mi < kMIters; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + mi * 64 + h * 8;
      if (row >= s.M) continue;
      float* p = ws + (long long)row * s.N + col0;
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j) {
        const int col = col0 + j * 8;
        if (vec && col + 1 < s.N) {
          __stcg(reinterpret_cast<float2*>(p + j * 8), make_float2(acc[mi][4 * j + 2 * h], acc[mi][4 * j + 2 * h + 1]));
        } else {
          if (col < s.N) __stcg(p + j * 8, acc[mi][4 * j + 2 * h]);
          if (col + 1 < s.N) __stcg(p + j * 8 + 1, acc[mi][4 * j + 2 * h + 1]);
        }
      }
    }
  // Release: every thread's partials are visible GPU-wide before the count.
  __threadfence();
  evotune_sm90::named_bar_sync(bar_id, bar_threads);
  if (first_thread) {
    const int tile = w.tile_m * s.tiles_n + w.tile_n;
    __threadfence();
    const unsigned arrived = atomicAdd(&counters[tile], 1u);
    const unsigned last = (arrived == SPLIT_K - 1) ? 1u : 0u;
    if (last) counters[tile] = 0u;  // every slice has counted: re-arm for the next launch
    __threadfence();                // acquire side of the count
    *flag = last;
  }
  evotune_sm90::named_bar_sync(bar_id, bar_threads);
  const bool last = *flag != 0;
  if (last) __threadfence();
  return last;
}

// The last slice: C = sum of the SPLIT_K partials over this warpgroup's rows
// (from m_wg) of the tile, 4 columns per load where N allows it.
__device__ __forceinline__ void splitk_sum_store(evotune_elem_t* __restrict__ C, const float* __restrict__ workspace,
                                                 const Sched& s, int m_wg, int n0, int wg_tid) {
  const long long MN = (long long)s.M * s.N;
  const int rows = min(kWgRows, s.M - m_wg);
  const int cols = min(BLOCK_N, s.N - n0);
  if (s.N % 4 == 0) {
    constexpr int kQ = BLOCK_N / 4;  // float4 per tile row
#pragma unroll 2
    for (int idx = wg_tid; idx < rows * kQ; idx += 128) {
      const int r = idx / kQ, q = idx % kQ;
      if (4 * q >= cols) continue;  // cols is a multiple of 4 here
      const long long off = (long long)(m_wg + r) * s.N + n0 + 4 * q;
      float4 sum = __ldcg(reinterpret_cast<const float4*>(workspace + off));
      for (int z = 1; z < SPLIT_K; ++z) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(workspace + z * MN + off));
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
      uint2 out;
      out.x = evotune_ptx::pack2(sum.x, sum.y);
      out.y = evotune_ptx::pack2(sum.z, sum.w);
      *reinterpret_cast<uint2*>(C + off) = out;
    }
  } else {
#pragma unroll 1
    for (int idx = wg_tid; idx < rows * BLOCK_N; idx += 128) {
      const int r = idx / BLOCK_N, c = idx % BLOCK_N;
      if (c >= cols) continue;
      const long long off = (long long)(m_wg + r) * s.N + n0 + c;
      float sum = __ldcg(workspace + off);
      for (int z = 1; z < SPLIT_K; ++z) sum += __ldcg(workspace + z * MN + off);
      C[off] = evotune_ptx::from_float(sum);
    }
  }
}

// Stream-K partials: CTA c's slot holds its consumers' accumulators, float4 q
// of thread x at float4 index (c * kQ + q) * kConsumerThreads + x (coalesced).
constexpr int kAccQ = kMIters * kAcc / 4;

__device__ __forceinline__ void sk_publish(const float (&acc)[kMIters][kAcc], float* __restrict__ workspace,
                                           unsigned* __restrict__ counters, const Sched& s, int tile) {
  float4* p = reinterpret_cast<float4*>(workspace) + (long long)s.cluster * kAccQ * kConsumerThreads + threadIdx.x;
#pragma unroll
  for (int q = 0; q < kAccQ; ++q) {
    const int mi = (4 * q) / kAcc, j = (4 * q) % kAcc;
    __stcg(p + q * kConsumerThreads, make_float4(acc[mi][j], acc[mi][j + 1], acc[mi][j + 2], acc[mi][j + 3]));
  }
  __threadfence();  // release: every thread's partial is visible GPU-wide before the count
  evotune_sm90::named_bar_sync(kBarConsumers, kConsumerThreads);
  if (threadIdx.x == 0) atomicAdd(&counters[tile], 1u);
}

// The tile's owner: waits for the partials of the `peers` CTAs before it,
// adds them nearest first.
__device__ __forceinline__ void sk_gather(float (&acc)[kMIters][kAcc], const float* __restrict__ workspace,
                                          unsigned* __restrict__ counters, const Sched& s, int tile, int peers) {
  if (threadIdx.x == 0) {
    volatile unsigned* cnt = counters + tile;
    while (*cnt < (unsigned)peers) __nanosleep(64);
    __threadfence();  // acquire side of the count
    *cnt = 0u;        // every peer has counted: re-arm for the next launch
  }
  evotune_sm90::named_bar_sync(kBarConsumers, kConsumerThreads);
  for (int z = 1; z <= peers; ++z) {
    const float4* p =
        reinterpret_cast<const float4*>(workspace) + (long long)(s.cluster - z) * kAccQ * kConsumerThreads + threadIdx.x;
#pragma unroll
    for (int q = 0; q < kAccQ; ++q) {
      const int mi = (4 * q) / kAcc, j = (4 * q) % kAcc;
      const float4 v = __ldcg(p + q * kConsumerThreads);
      acc[mi][j] += v.x;
      acc[mi][j + 1] += v.y;
      acc[mi][j + 2] += v.z;
      acc[mi][j + 3] += v.w;
    }
  }
}

__device__ __forceinline__ void st_global_v4(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// One warp's 16 x 64 piece of C (columns 64c.. of its m64 block's
// accumulators `a`) into the staging tile at `buf` (16 rows of 128 bytes,
// 1024-aligned, 128-byte swizzle): four stmatrix.x4, each a 16 x 16 block
// (column groups j, j+1; rows 0-7 and 8-15).
__device__ __forceinline__ void stage_piece(const float (&a)[kAcc], int c, unsigned buf, int lane) {
  const int q = lane >> 3;
  const int row = (lane & 7) + 8 * (q & 1);  // the row whose address this lane gives
#pragma unroll
  for (int jj = 0; jj < 8; jj += 2) {
    const int j = c * 8 + jj;
    const unsigned r0 = evotune_ptx::pack2(a[4 * j], a[4 * j + 1]);
    const unsigned r1 = evotune_ptx::pack2(a[4 * j + 2], a[4 * j + 3]);
    const unsigned r2 = evotune_ptx::pack2(a[4 * j + 4], a[4 * j + 5]);
    const unsigned r3 = evotune_ptx::pack2(a[4 * j + 6], a[4 * j + 7]);
    const int chunk = jj + (q >> 1);
    evotune_sm90::stmatrix_x4(buf + row * 128 + ((chunk ^ (row & 7)) << 4), r0, r1, r2, r3);
  }
}

// Writes this warpgroup's rows of the tile to C (rows from m_wg, columns from
// n0), predicated on the matrix edges.
__device__ __forceinline__ void store_tile(const float (&acc)[kMIters][kAcc], evotune_elem_t* __restrict__ C,
                                           const EvotuneTmap* tm_c, const Sched& s, int m_wg, int n0,
                                           unsigned epi_smem, int wg_tid, unsigned& epi_seq, int wg, bool storer) {
  const int warp = wg_tid >> 5, lane = wg_tid & 31;
  if ((EPILOGUE == 4 && s.N % 8 == 0) || (kSharedStaging && storer)) {
    using namespace evotune_sm90;
    // This warpgroup's staging: BLOCK_N/64 boxes of kWgRows x 64, warp w's
    // 16-row pieces at rows mi*64 + 16w (every piece 2048-aligned, so the
    // 128-byte swizzle is the same as in a 16-row tile).
    const unsigned wg_buf = epi_smem + (kSharedStaging ? 0 : wg * kEpiWgBytes);
    // The staging is free once the previous tile's stores have read it: the
    // storer says so on kBarEpiFree (long since: a mainloop ran between);
    // without a storer, thread 0 of the warpgroup waits for its own stores.
    // EPILOGUE=5: warpgroup 1 waits for warpgroup 0's boxes of this tile to
    // be read, warpgroup 0 for warpgroup 1's of the previous tile.
    if (storer) {
      if (epi_seq > 0 || (kSharedStaging && wg > 0)) named_bar_sync(kBarEpiFree + wg, kEpiBarThreads);
    } else {
      if (wg_tid == 0) bulk_wait<0>();
      named_bar_sync(kBarWg + wg, 128);
    }
    ++epi_seq;
#pragma unroll
    for (int mi = 0; mi < kMIters; ++mi)
#pragma unroll
      for (int c = 0; c < kNBoxes; ++c) {
        stage_piece(acc[mi], c, wg_buf + c * (kWgRows * 128) + (mi * 64 + warp * 16) * 128, lane);
      }
    fence_proxy_async();  // each thread's writes, visible to the TMA engine
    tl_mark(11);
    if (storer) {
      named_bar_arrive(kBarEpiFull + wg, kEpiBarThreads);
    } else {
      named_bar_sync(kBarWg + wg, 128);
      if (wg_tid == 0) {
#pragma unroll
        for (int c = 0; c < kNBoxes; ++c) tma_store_2d(tm_c, n0 + c * 64, m_wg, wg_buf + c * (kWgRows * 128));
        bulk_commit();
      }
    }
    tl_mark(12);
  } else if (EPILOGUE >= 2 && EPILOGUE <= 3 && s.N % 8 == 0) {  // tm_c is encoded exactly when N % 8 == 0 (spec.toml)
    using namespace evotune_sm90;
    // Per warp, 16 rows x 64 columns at a time: four stmatrix.x4 (each a
    // 16 x 16 block: column groups j, j+1, rows 0-7 and 8-15) into a staging
    // tile in the 128-byte swizzle, then one TMA store by lane 0.
    // EPILOGUE=2: two staging tiles alternate; before refilling one, lane 0
    // waits until the store issued from it two tiles ago has read it.
    // EPILOGUE=3: every piece has its own staging tile; lane 0 waits once,
    // for the previous tile's stores to have read theirs (long done: a whole
    // mainloop ran since), and leaves this tile's stores to drain.
    const unsigned buf0 = epi_smem + (threadIdx.x >> 5) * kEpiWarpBytes;
    if constexpr (EPILOGUE == 3) {
      if (lane == 0) bulk_wait<0>();
      __syncwarp();
    }
#pragma unroll
    for (int mi = 0; mi < kMIters; ++mi) {
#pragma unroll
      for (int c = 0; c < kNBoxes; ++c) {
        const unsigned buf =
            EPILOGUE == 3 ? buf0 + (mi * kNBoxes + c) * kEpiTileBytes : buf0 + (epi_seq & 1u) * kEpiTileBytes;
        if constexpr (EPILOGUE == 2) {
          ++epi_seq;
          if (lane == 0) bulk_wait<1>();
          __syncwarp();
        }
        stage_piece(acc[mi], c, buf, lane);
        if constexpr (EPILOGUE == 2) {
          fence_proxy_async();  // this lane's writes, visible to the TMA engine
          __syncwarp();
          if (mi == 0 && c == 0) tl_mark(11);
          if (lane == 0) {
            tma_store_2d(tm_c, n0 + c * 64, m_wg + mi * 64 + warp * 16, buf);
            bulk_commit();
          }
        }
      }
    }
    if constexpr (EPILOGUE == 3) {
      // One fence and one store group for all of the warp's pieces.
      fence_proxy_async();
      __syncwarp();
      tl_mark(11);
      if (lane == 0) {
#pragma unroll
        for (int mi = 0; mi < kMIters; ++mi)
#pragma unroll
          for (int c = 0; c < kNBoxes; ++c)
            tma_store_2d(tm_c, n0 + c * 64, m_wg + mi * 64 + warp * 16, buf0 + (mi * kNBoxes + c) * kEpiTileBytes);
        bulk_commit();
      }
    }
    tl_mark(12);
  } else if constexpr (EPILOGUE >= 1) {
    // Per warp: its 16 rows x 64 columns at a time through shared memory
    // (16-byte chunks XOR-swizzled by row, conflict-free both ways), then
    // whole 128-byte row segments to global memory.
    const unsigned buf = epi_smem + (threadIdx.x >> 5) * kEpiWarpBytes;  // this warp's own tile (any warpgroup)
    const bool vec = (s.N % 8) == 0;
    const int r_lo = lane >> 2;
#pragma unroll
    for (int mi = 0; mi < kMIters; ++mi) {
#pragma unroll
      for (int c = 0; c < kNBoxes; ++c) {
#pragma unroll
        for (int jj = 0; jj < 8; ++jj)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int j = c * 8 + jj;
            const unsigned addr = buf + (r_lo + 8 * h) * 128 + ((jj ^ r_lo) << 4) + (lane & 3) * 4;
            const unsigned v = evotune_ptx::pack2(acc[mi][4 * j + 2 * h], acc[mi][4 * j + 2 * h + 1]);
            asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
          }
        __syncwarp();
        const int row0 = m_wg + mi * 64 + warp * 16;
        const int col0 = n0 + c * 64;
        if (vec) {
#pragma unroll
          for (int p = 0; p < 4; ++p) {
            const int idx = p * 32 + lane;
            const int lr = idx >> 3, ch = idx & 7;
            uint4 v;
            asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
                         : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                         : "r"(buf + lr * 128 + ((ch ^ (lr & 7)) << 4))
                         : "memory");
            const int row = row0 + lr, col = col0 + ch * 8;
            if (row < s.M && col < s.N) st_global_v4(C + (long long)row * s.N + col, v);  // N % 8 == 0
          }
        } else {
          // Rows not 16-byte aligned: each row's 64 columns as two runs of
          // 32 2-byte stores (lane = column), so that one store instruction
          // writes whole 32-byte sectors instead of two bytes of each of 16.
          const int rows = min(16, s.M - row0);
#pragma unroll 4
          for (int lr = 0; lr < rows; ++lr) {
            unsigned short* crow = reinterpret_cast<unsigned short*>(C + (long long)(row0 + lr) * s.N + col0);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int e = lane + 32 * h;
              unsigned short v;
              asm volatile("ld.shared.u16 %0, [%1];\n"
                           : "=h"(v)
                           : "r"(buf + lr * 128 + (((e >> 3) ^ (lr & 7)) << 4) + (e & 7) * 2)
                           : "memory");
              if (col0 + e < s.N) crow[e] = v;
            }
          }
        }
        __syncwarp();
      }
    }
  } else {
    const bool vec = (s.N % 2) == 0;
#pragma unroll
    for (int mi = 0; mi < kMIters; ++mi)
#pragma unroll
      for (int j = 0; j < kAcc / 4; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = m_wg + mi * 64 + warp * 16 + (lane >> 2) + 8 * h;
          const int col = n0 + j * 8 + (lane & 3) * 2;
          if (row >= s.M) continue;
          evotune_elem_t* p = C + (long long)row * s.N + col;
          const float x = acc[mi][4 * j + 2 * h], y = acc[mi][4 * j + 2 * h + 1];
          if (vec && col + 1 < s.N) {
            *reinterpret_cast<unsigned*>(p) = evotune_ptx::pack2(x, y);
          } else {
            if (col < s.N) p[0] = evotune_ptx::from_float(x);
            if (col + 1 < s.N) p[1] = evotune_ptx::from_float(y);
          }
        }
  }
}

// EPILOGUE=4/5's storer warp: for each unit whose tile the consumers store,
// in their order, waits for each storing warpgroup's boxes (kBarEpiFull),
// issues one TMA store per box, waits until the stores have read the staging
// and hands it back (kBarEpiFree): EPILOGUE=4 to each warpgroup after all of
// the tile's stores, EPILOGUE=5 to the next warpgroup in turn (warpgroup 0's
// turn comes with the next tile's stores, so no hand-back is left over).
// Its bulk groups are its own, so nobody else waits on them.
__device__ __forceinline__ void storer_warp(const Sched& s, const EvotuneTmap* tm_c, unsigned epi_smem) {
  using namespace evotune_sm90;
  const int lane = threadIdx.x & 31;
  if (lane == 0) tma_prefetch_desc(tm_c);
  const int count = __shfl_sync(0xffffffffu, s.count, 0);
  bool handed_back = false;  // EPILOGUE=5: warpgroup 0 stages again only after a tile's stores
  for (int i = 0; i < count; ++i) {
    const Unit w = unit_at(s, i);
    if (!w.live) continue;                     // cluster padding: nothing stored
    if (kStreamK && w.peers < 0) continue;     // a partial, published by the consumers
    const int wg_first = kPingPong ? (i & 1) : 0;
    const int wg_end = kPingPong ? wg_first + 1 : kCWG;
    for (int wg = wg_first; wg < wg_end; ++wg) {
      if (kSharedStaging && wg == 0 && handed_back) named_bar_arrive(kBarEpiFree + 0, kEpiBarThreads);
      named_bar_sync(kBarEpiFull + wg, kEpiBarThreads);
      if (lane == 0) {
        const int m_wg = w.tile_m * BLOCK_M + (kPingPong ? 0 : wg * kWgRows);
        const unsigned wg_buf = epi_smem + (kSharedStaging ? 0 : wg * kEpiWgBytes);
#pragma unroll
        for (int c = 0; c < kNBoxes; ++c)
          tma_store_2d(tm_c, w.tile_n * BLOCK_N + c * 64, m_wg, wg_buf + c * (kWgRows * 128));
      }
      if constexpr (kSharedStaging) {
        if (lane == 0) {
          bulk_commit();
          bulk_wait<0>();  // read: the next warpgroup may stage
        }
        __syncwarp();
        if (wg + 1 < kCWG) named_bar_arrive(kBarEpiFree + wg + 1, kEpiBarThreads);
        handed_back = true;  // warpgroup 0's turn: before the next tile's stores
      }
    }
    if constexpr (kSharedStaging) continue;
    if (lane == 0) {
      bulk_commit();
      bulk_wait<0>();  // read: the staging may be refilled
    }
    __syncwarp();
    for (int wg = wg_first; wg < wg_end; ++wg) named_bar_arrive(kBarEpiFree + wg, kEpiBarThreads);
  }
  // Nothing to wait for: each unit's stores were read before its hand-back,
  // and the consumers take the last hand-back before they exit.
}

__device__ __forceinline__ void consumer(const Sched& s, evotune_elem_t* __restrict__ C, const EvotuneTmap* tm_c,
                                         float* __restrict__ workspace,
                                         unsigned* __restrict__ counters, unsigned smem, unsigned full0,
                                         unsigned empty0, unsigned epi_smem, volatile unsigned* flags, int wg,
                                         bool storer) {
  const int wg_tid = threadIdx.x & 127;
  float acc[kMIters][kAcc];
  Ring ring;
  unsigned epi_seq = 0;  // staging tiles this warp has filled (EPILOGUE=2 alternates two)
  if constexpr (kPingPong) {
    // Warpgroup 0 takes the tensor cores first.
    if (wg == 1 && s.count > 0) evotune_sm90::named_bar_arrive(kBarOrder + 0, 256);
  }
  // Loop bounds broadcast from lane 0: provably warp-uniform, so the ring
  // state and the wgmma descriptors stay in uniform registers.
  const int count = __shfl_sync(0xffffffffu, s.count, 0);
  for (int i = 0; i < count; ++i) {
    // Decoded once, before the MMAs: decoding again after them would keep
    // the tensor cores idle for its shared-memory reads and divisions.
    const Unit w = unit_at(s, i);
    const int k_tiles = __shfl_sync(0xffffffffu, w.k_tiles, 0);
    if (kPingPong && (i & 1) != wg) {
      ring.skip(k_tiles);  // the other warpgroup's stages
      continue;
    }
    const int row0_in_tile = kPingPong ? 0 : wg * kWgRows;
    if constexpr (kPingPong) evotune_sm90::named_bar_sync(kBarOrder + wg, 256);
    mainloop(acc, ring, k_tiles, s, smem, full0, empty0, row0_in_tile, wg_tid, i);
    if (i < 4) tl_mark(2 + 2 * i);
    if constexpr (kPingPong) {
      // Hand the tensor cores to the other warpgroup if it has a next unit.
      if (i + 1 < s.count) evotune_sm90::named_bar_arrive(kBarOrder + (wg ^ 1), 256);
    }
    if (!w.live) continue;  // cluster padding: loads only
    if constexpr (kStreamK) {
      if (w.peers < 0) {
        sk_publish(acc, workspace, counters, s, w.tile);
        if (i < 4) tl_mark(3 + 2 * i);
        continue;
      }
      if (w.peers > 0) sk_gather(acc, workspace, counters, s, w.tile, w.peers);
    }
    const int m_wg = w.tile_m * BLOCK_M + row0_in_tile;
    const int n0 = w.tile_n * BLOCK_N;
    if constexpr (SPLIT_K > 1) {
      const int bar_id = kPingPong ? kBarWg + wg : kBarConsumers;
      const int bar_threads = kPingPong ? 128 : kConsumerThreads;
      const bool first = kPingPong ? (wg_tid == 0) : (threadIdx.x == 0);
      if (splitk_publish(acc, w, s, workspace, counters, flags + (kPingPong ? wg : 0), m_wg, n0, wg_tid, bar_id,
                         bar_threads, first))
        splitk_sum_store(C, workspace, s, m_wg, n0, wg_tid);
      continue;
    }
    tl_mark(10);
    store_tile(acc, C, tm_c, s, m_wg, n0, epi_smem, wg_tid, epi_seq, wg, storer);
    if (i < 4) tl_mark(3 + 2 * i);
  }
  // TMA stores still reading staging tiles must finish before the CTA's
  // shared memory goes away.
  if (EPILOGUE >= 2 && (wg_tid & 31) == 0) evotune_sm90::bulk_wait<0, true>();
  // EPILOGUE=4: the storer's last hand-back, i.e. its last stores have read
  // this warpgroup's staging.
  // (EPILOGUE=5 hands back only to a warpgroup that stages again.)
  if (EPILOGUE == 4 && storer && epi_seq > 0) evotune_sm90::named_bar_sync(kBarEpiFree + wg, kEpiBarThreads);
  tl_mark(15);
}

// ---------------------------------------------------------------------------
// SKINNY > 0: C = A·B for a few rows of A (decode-sized M), on CUDA cores.
// Such a GEMM only streams B: 16 rows give 16 FMAs per element of B read
// once, far below what makes tensor cores pay, and B's rows may have any
// alignment (a vocabulary-sized N). A CTA owns up to 16 rows (blockIdx.y)
// and 32 * kSkCols columns (blockIdx.x; lane l takes columns l, l + 32, ...:
// each load instruction reads 64 contiguous bytes of a row, whatever its
// alignment). K runs in chunks of 16 * kSkWarps rows: the chunk's A rows are
// staged in shared memory as fp32 (k contiguous: one 16-byte broadcast read
// gives four k of a row), loaded into registers a chunk ahead, and warp w
// takes the chunk's rows 16w..16w+15 of B, all its loads issued before the
// chunk's A is staged. The warps' partial sums meet in shared memory (fp32
// atomics), and the CTA writes its piece of C. Correct for any M (more rows:
// more CTAs along y). SPLIT_K > 1 splits K across CTAs (blockIdx.z, slices
// of whole chunks), for GEMMs whose columns alone leave SMs idle (1 x 4096):
// each slice writes its partial tile to the workspace, and the slice that
// finishes last adds them up into C and re-arms the tile's counter.
//
// Measured slower on an H100 and dropped (docs/MEASUREMENTS.md):
//  * the next chunk's B loads in flight under this chunk's FMAs, in a second
//    register set: 526 against 427 us at 16 x 50257 x 4096;
//  * bulk copies of each row's piece into a shared-memory ring: 52 against
//    18 us at 1 x 4096 x 4096 (one TMA request per 256-byte row); a 2-D map
//    over B's rows by residue class dies with an illegal instruction (its
//    boxes start off 16-byte boundaries when N is odd; PACK=2 starts them on
//    the boundary before and shifts the windows in shared memory, which beats
//    this path on the tensor cores);
//  * B by 16-byte loads of the aligned vectors around each row's piece,
//    shifted into place by shuffles or from a per-warp cp.async ring in
//    shared memory: 485-611 against 396 us at 16 x 50257 x 4096 and 32
//    against 23.5 at 1 x 4096 x 4096 (the shift costs more instructions per
//    byte than the 2-byte loads, with few warps per SM to hide them);
//  * for aligned B (1 x 4096 x 4096), a producer warp's TMA ring feeding the
//    CUDA cores (18.2 us; its stream alone 17.3 us at 60% of DRAM peak),
//    against 18.7 us for the tensor-core tiles and cuBLAS's 15.2; and a
//    first version of the vector path (SKINNY=8xx, below) that staged A a
//    chunk at a time between two barriers and met the warps' sums by
//    shared-memory atomics (22.3 us). Without the barriers in the loop and
//    with the sums met by plain stores, the vector path is the one kept:
//    14.2-14.4 us against cuBLAS's 14.9 on an H200 (kernel time);
//  * 8 rows of A per CTA (12 warps, 168 registers) at M = 8, B read once:
//    63 against 61 us for 816's two CTAs of 4 rows reading it twice (and 43
//    for cuBLAS): at M = 8 the path is bound by its FMAs, not by B.

constexpr int kSkWarps = SKINNY > 0 ? SKINNY % 100 : 8;
constexpr int kSkCols = SKINNY > 0 ? SKINNY / 100 : 1;
constexpr int kSkTile = 32 * kSkCols;  // columns per CTA
// SKINNY = 8xx, the vector path (below): lane l takes 8 contiguous columns,
// a warp kSkVecRows consecutive rows of B per step, every load in flight.
constexpr bool kSkVec = kSkCols == 8;
constexpr int kSkVecRows = 8;
// Rows of A a CTA multiplies: the problem's M up to 16 (GEMM_SK_ROWS, a
// define, so that a GEMV keeps one row's accumulators, not 16).
#ifndef GEMM_SK_ROWS
#define GEMM_SK_ROWS 16
#endif
constexpr int kSkRows = GEMM_SK_ROWS;
static_assert(kSkRows >= 1 && kSkRows <= 16, "GEMM_SK_ROWS: 1..16");
constexpr int kSkChunk = (kSkVec ? kSkVecRows : 16) * kSkWarps;     // k-rows per pass of all warps
constexpr int kSkRedOffset = 16 * 16 * kSkWarps * 4;  // A's chunk (the vector path: the warps' sums), then the CTA's
constexpr int kSkSmemBytes = kSkRedOffset + 16 * kSkTile * 4 + 16;  // and a flag

__device__ __forceinline__ float sk_bits_to_float(unsigned short b) {
#if defined(EVOTUNE_DTYPE_BF16)
  return __uint_as_float((unsigned)b << 16);
#else
  return __half2float(__ushort_as_half(b));
#endif
}

// This CTA's place: its columns, rows and slice of K (whole chunks, SPLIT_K
// slices; the last ones may be empty).
struct SkCta {
  int n0, m0, rows, kbeg, kend;
};

// Where this CTA works; checks the launch against the layout, and zeroes the
// sums before any warp adds to them.
__device__ __forceinline__ SkCta sk_begin(float* red, int M, int K) {
  SkCta c;
  c.n0 = (int)blockIdx.x * kSkTile;
  c.m0 = (int)blockIdx.y * kSkRows;
  c.rows = min(kSkRows, M - c.m0);
  const int kper = (K + SPLIT_K - 1) / SPLIT_K;
  const int kslice = (kper + kSkChunk - 1) / kSkChunk * kSkChunk;
  c.kbeg = min(K, (int)blockIdx.z * kslice);
  c.kend = min(K, c.kbeg + kslice);
  if (threadIdx.x == 0) {  // the spec's smem expression must cover this layout, its grid all rows
    unsigned dyn;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (unsigned)kSkSmemBytes || (long long)gridDim.y * kSkRows < M) __trap();
  }
  for (int i = (int)threadIdx.x; i < 16 * kSkTile; i += 32 * kSkWarps) red[i] = 0.f;
  __syncthreads();  // (a K slice may be empty: no barrier in the loop)
  return c;
}

// The CTA's sums to C, or with SPLIT_K > 1 to this slice's partial tile,
// the last slice adding them up.
__device__ __forceinline__ void sk_finish(const float* red, int* last_flag, const SkCta& t,
                                          evotune_elem_t* __restrict__ C, float* __restrict__ workspace,
                                          unsigned* __restrict__ counters, int M, int N) {
  __syncthreads();
  if constexpr (SPLIT_K == 1) {
    for (int i = (int)threadIdx.x; i < 16 * kSkTile; i += (int)blockDim.x) {
      const int m = i / kSkTile, j = i % kSkTile;
      if (m < t.rows && t.n0 + j < N) C[(size_t)(t.m0 + m) * N + t.n0 + j] = evotune_ptx::from_float(red[i]);
    }
  } else {
    const size_t slice = (size_t)M * N;
    for (int i = (int)threadIdx.x; i < 16 * kSkTile; i += (int)blockDim.x) {
      const int m = i / kSkTile, j = i % kSkTile;
      if (m < t.rows && t.n0 + j < N) workspace[blockIdx.z * slice + (size_t)(t.m0 + m) * N + t.n0 + j] = red[i];
    }
    // The barrier orders the CTA's partial before thread 0's fence and count
    // (a release for the whole CTA); in the last slice, thread 0's fence
    // after the count and the barrier order the others' partials before the
    // reads. One thread fences, not every thread.
    __syncthreads();
    unsigned* counter = counters + blockIdx.y * gridDim.x + blockIdx.x;
    if (threadIdx.x == 0) {
      __threadfence();
      const unsigned done = atomicAdd(counter, 1u);
      *last_flag = done == SPLIT_K - 1;
      if (done == SPLIT_K - 1) {
        __threadfence();
        *counter = 0;  // re-armed for the next launch
      }
    }
    __syncthreads();
    if (*last_flag) {
      for (int i = (int)threadIdx.x; i < 16 * kSkTile; i += (int)blockDim.x) {
        const int m = i / kSkTile, j = i % kSkTile;
        if (m < t.rows && t.n0 + j < N) {
          const size_t at = (size_t)(t.m0 + m) * N + t.n0 + j;
          float sum = 0.f;
#pragma unroll
          for (int z = 0; z < SPLIT_K; ++z) sum += __ldcg(workspace + z * slice + at);
          C[at] = evotune_ptx::from_float(sum);
        }
      }
    }
  }
}

// acc[m][c] += sum over four k of a[m][k] * b[k][c], a's four k one 16-byte
// broadcast read per row (rows at a stride of `a_ld` floats).
template <int kC>
__device__ __forceinline__ void sk_fma4(float (&acc)[kSkRows][kC], const float* a, int a_ld, const float (&b)[4][kC],
                                        int rows) {
#pragma unroll
  for (int m = 0; m < kSkRows; ++m) {
    if (m < rows) {  // uniform: a few rows cost a few rows' FMAs
      const float4 x = *reinterpret_cast<const float4*>(a + m * a_ld);
#pragma unroll
      for (int c = 0; c < kC; ++c)
        acc[m][c] = fmaf(x.x, b[0][c], fmaf(x.y, b[1][c], fmaf(x.z, b[2][c], fmaf(x.w, b[3][c], acc[m][c]))));
    }
  }
}

// SKINNY < 1000: this warp's 16 rows of B in a chunk (zeros past the slice and N), every load issued at once.
__device__ __forceinline__ void sk_load_b(unsigned short (&b)[16][kSkCols], const unsigned short* __restrict__ Bb,
                                          int k0, int n0, int lane, int N, int kend) {
#pragma unroll
  for (int r = 0; r < 16; ++r)
#pragma unroll
    for (int c = 0; c < kSkCols; ++c) {
      const int n = n0 + lane + 32 * c;
      b[r][c] = (k0 + r < kend && n < N) ? __ldcs(Bb + (size_t)(k0 + r) * N + n) : (unsigned short)0;
    }
}

__device__ __forceinline__ void skinny_gemm(const evotune_elem_t* __restrict__ A, const evotune_elem_t* __restrict__ B,
                                            evotune_elem_t* __restrict__ C, float* __restrict__ workspace,
                                            unsigned* __restrict__ counters, int M, int N, int K,
                                            unsigned char* smem_raw) {
  float* as = reinterpret_cast<float*>(smem_raw);  // [16][kSkChunk]: A's rows m0.., this chunk's k
  float* red = reinterpret_cast<float*>(smem_raw + kSkRedOffset);  // [16][kSkTile]: the warps' sums
  int* last_flag = reinterpret_cast<int*>(red + 16 * kSkTile);
  const unsigned short* Bb = reinterpret_cast<const unsigned short*>(B);
  const unsigned short* Ab = reinterpret_cast<const unsigned short*>(A);
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const SkCta t = sk_begin(red, M, K);
  float acc[kSkRows][kSkCols];
#pragma unroll
  for (int m = 0; m < kSkRows; ++m)
#pragma unroll
    for (int c = 0; c < kSkCols; ++c) acc[m][c] = 0.f;
  // A's chunk goes through registers a chunk ahead (its loads in flight
  // under the previous chunk's FMAs): thread i holds elements i, i + threads, ...
  constexpr int kAPer = 16 * kSkChunk / (32 * kSkWarps);
  unsigned short a_next[kAPer];
  auto load_a = [&](int kc) {
#pragma unroll
    for (int j = 0; j < kAPer; ++j) {
      const int i = (int)threadIdx.x + j * 32 * kSkWarps, m = i / kSkChunk, k = i % kSkChunk;
      a_next[j] = (m < t.rows && kc + k < t.kend) ? Ab[(size_t)(t.m0 + m) * K + kc + k] : (unsigned short)0;
    }
  };
  load_a(t.kbeg);
  for (int kc = t.kbeg; kc < t.kend; kc += kSkChunk) {
    unsigned short b[16][kSkCols];
    sk_load_b(b, Bb, kc + 16 * warp, t.n0, lane, N, t.kend);  // in flight while A is staged
    __syncthreads();  // the previous chunk's A is read by every warp
#pragma unroll
    for (int j = 0; j < kAPer; ++j) as[(int)threadIdx.x + j * 32 * kSkWarps] = sk_bits_to_float(a_next[j]);
    load_a(kc + kSkChunk);
    __syncthreads();
#pragma unroll
    for (int r4 = 0; r4 < 16; r4 += 4) {
      float bf[4][kSkCols];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < kSkCols; ++c) bf[r][c] = sk_bits_to_float(b[r4 + r][c]);
      sk_fma4(acc, as + 16 * warp + r4, kSkChunk, bf, t.rows);
    }
  }
#pragma unroll
  for (int m = 0; m < kSkRows; ++m)
    if (m < t.rows)
#pragma unroll
      for (int c = 0; c < kSkCols; ++c) atomicAdd(red + m * kSkTile + lane + 32 * c, acc[m][c]);
  sk_finish(red, last_flag, t, C, workspace, counters, M, N);
}

// SKINNY = 8xx: the vector path, for B's rows 16-byte aligned (N % 8 == 0,
// the spec's constraint for the search). Lane l of every warp takes columns
// n0 + 8l .. n0 + 8l + 7 as one 16-byte load per row (a warp reads 512
// contiguous bytes of a row), and warp w the rows w * 8 .. w * 8 + 7 of each
// pass of 8 * warps rows: eight 16-byte loads in flight per lane, issued
// before any is used, and no barrier in the loop, so that the warps drift
// apart and keep the loads of a whole SM in flight. A is read from global
// memory, the same 8 k of a row by every lane (a 16-byte broadcast per
// row), up to four rows' loads issued together after B's. The stream this path is built on, one pass over B with this layout
// and no math, measured 13.9 us on an H200 at 1 x 4096 x 4096 (16 warps,
// SPLIT_K=8: 128 CTAs; event time), where a TMA ring took 17.2 and cuBLAS's
// GEMV 17.4 (tools/stream_probe.cu); the whole GEMM takes 14.2-14.4 us of
// kernel time. At M = 8 (two CTAs of 4 rows along y) it is 1.4x slower
// than cuBLAS's tensor-core kernel (61.4 against 43.3 us p50), at M = 4
// 1.07x (19.2 against 17.9): a path for the GEMV.
// B's rows not 16-byte aligned (the check shapes' odd N) take the same
// layout by 2-byte loads (and A's rows, when K % 8 != 0, by 2-byte loads):
// correct, not fast.

// Eight 16-bit elements of a row, at pos..pos+7, zeros from `end` on: one
// 16-byte load when aligned (then all eight are in, or none is asked for),
// else 2-byte loads. kStream: B, read once (evict-first); else A, read by
// every CTA of its K slice (cached).
template <bool kAligned, bool kStream>
__device__ __forceinline__ uint4 sk_load8(const unsigned short* __restrict__ row, int pos, int end) {
  if constexpr (kAligned) {
    const uint4* v = reinterpret_cast<const uint4*>(row + pos);
    return kStream ? __ldcs(v) : __ldg(v);
  } else {
    unsigned w[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const unsigned short* q = row + pos + 2 * c;
      const unsigned lo = pos + 2 * c < end ? (kStream ? __ldcs(q) : __ldg(q)) : 0u;
      const unsigned hi = pos + 2 * c + 1 < end ? (kStream ? __ldcs(q + 1) : __ldg(q + 1)) : 0u;
      w[c] = lo | hi << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// Eight 16-bit elements to fp32.
__device__ __forceinline__ void sk_unpack8(const uint4& v, float (&f)[8]) {
  const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    f[2 * c] = sk_bits_to_float((unsigned short)(w[c] & 0xffffu));
    f[2 * c + 1] = sk_bits_to_float((unsigned short)(w[c] >> 16));
  }
}

// Rows of A loaded together by the vector path.
constexpr int kSkAGroup = kSkRows < 4 ? kSkRows : 4;

// acc += A's rows (this CTA's, k0..k0+7) times B's rows k0..k0+7 at this lane's columns.
template <bool kAligned>
__device__ __forceinline__ void sk_vec_slice(float (&acc)[kSkRows][8], const evotune_elem_t* __restrict__ A,
                                             const evotune_elem_t* __restrict__ B, const SkCta& t, int n, int N,
                                             int K, int warp) {
  const unsigned short* Ab = reinterpret_cast<const unsigned short*>(A);
  const unsigned short* Bb = reinterpret_cast<const unsigned short*>(B);
  const bool on = n < N;
  for (int k0 = t.kbeg + kSkVecRows * warp; k0 < t.kend; k0 += kSkChunk) {
    uint4 b[kSkVecRows];
#pragma unroll
    for (int r = 0; r < kSkVecRows; ++r)
      b[r] = (on && k0 + r < t.kend) ? sk_load8<kAligned, true>(Bb + (size_t)(k0 + r) * N, n, N)
                                     : make_uint4(0u, 0u, 0u, 0u);
    // A's rows in groups of kSkAGroup, each group's loads issued together
    // (one round trip per group, not per row).
#pragma unroll
    for (int g0 = 0; g0 < kSkRows; g0 += kSkAGroup) {
      if (g0 < t.rows) {  // uniform
        uint4 a[kSkAGroup];
#pragma unroll
        for (int g = 0; g < kSkAGroup; ++g)  // (rows past kSkRows: t.rows <= kSkRows)
          a[g] = (g0 + g < t.rows && k0 < t.kend)
                     ? sk_load8<kAligned, false>(Ab + (size_t)(t.m0 + g0 + g) * K, k0, t.kend)
                     : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int r = 0; r < kSkVecRows; ++r) {
          float bf[8];
          sk_unpack8(b[r], bf);
#pragma unroll
          for (int g = 0; g < kSkAGroup; ++g) {
            float af[8];
            sk_unpack8(a[g], af);
            if (g0 + g < kSkRows)  // resolved at compile time
#pragma unroll
              for (int c = 0; c < 8; ++c) acc[g0 + g][c] = fmaf(af[r], bf[c], acc[g0 + g][c]);
          }
        }
      }
    }
  }
}

__device__ __forceinline__ void skinny_gemm_vec(const evotune_elem_t* __restrict__ A,
                                                const evotune_elem_t* __restrict__ B, evotune_elem_t* __restrict__ C,
                                                float* __restrict__ workspace, unsigned* __restrict__ counters, int M,
                                                int N, int K, unsigned char* smem_raw) {
  float* red = reinterpret_cast<float*>(smem_raw + kSkRedOffset);  // [16][kSkTile]: the warps' sums
  int* last_flag = reinterpret_cast<int*>(red + 16 * kSkTile);
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const SkCta t = sk_begin(red, M, K);
  const int n = t.n0 + 8 * lane;
  float acc[kSkRows][8];
#pragma unroll
  for (int m = 0; m < kSkRows; ++m)
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[m][c] = 0.f;
  if (N % 8 == 0 && K % 8 == 0 && ((reinterpret_cast<size_t>(A) | reinterpret_cast<size_t>(B)) & 15) == 0)
    sk_vec_slice<true>(acc, A, B, t, n, N, K, warp);
  else
    sk_vec_slice<false>(acc, A, B, t, n, N, K, warp);
  // The warps' sums meet row by row: each warp's in its own piece of shared
  // memory, then each column summed over the warps.
  float* part = reinterpret_cast<float*>(smem_raw);  // [kSkWarps][kSkTile]
#pragma unroll
  for (int m = 0; m < kSkRows; ++m) {
    if (m < t.rows) {  // uniform
      float4* mine = reinterpret_cast<float4*>(part + warp * kSkTile + 8 * lane);
      mine[0] = make_float4(acc[m][0], acc[m][1], acc[m][2], acc[m][3]);
      mine[1] = make_float4(acc[m][4], acc[m][5], acc[m][6], acc[m][7]);
      __syncthreads();
      for (int j = (int)threadIdx.x; j < kSkTile; j += 32 * kSkWarps) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kSkWarps; ++w) sum += part[w * kSkTile + j];
        red[m * kSkTile + j] = sum;
      }
      __syncthreads();
    }
  }
  sk_finish(red, last_flag, t, C, workspace, counters, M, N);
}

constexpr int kLaunchThreads = SKINNY > 0 ? 32 * kSkWarps : kThreads;

}  // namespace evotune_gemm_sm90

extern "C" __global__ void __launch_bounds__(evotune_gemm_sm90::kLaunchThreads, 1)
    gemm_sm90(const __grid_constant__ EvotuneTmap tm_a, const __grid_constant__ EvotuneTmap tm_b,
              const __grid_constant__ EvotuneTmap tm_c,
              const evotune_elem_t* __restrict__ A, const evotune_elem_t* __restrict__ B,
              evotune_elem_t* __restrict__ C, float* __restrict__ workspace, unsigned* __restrict__ counters, int M,
              int N, int K, int use_tma_a, int use_tma_b, const __grid_constant__ EvotuneTmap tm_ap,
              const __grid_constant__ EvotuneTmap tm_bp, evotune_elem_t* __restrict__ a_packed,
              evotune_elem_t* __restrict__ b_packed, unsigned* __restrict__ pack_sync, int pack_a, int pack_b,
              const __grid_constant__ EvotuneTmap tm_br) {
#if EVOTUNE_SM90A
  using namespace evotune_gemm_sm90;
  using namespace evotune_sm90;
  extern __shared__ __align__(128) unsigned char gemm_smem[];
  if constexpr (kSkVec) {
    skinny_gemm_vec(A, B, C, workspace, counters, M, N, K, gemm_smem);
    return;
  } else if constexpr (SKINNY > 0) {
    skinny_gemm(A, B, C, workspace, counters, M, N, K, gemm_smem);
    return;
  }
  // PACK=1: a misaligned operand is copied into its padded scratch buffer
  // first, and loaded by TMA from there (packing, above).
  if constexpr (PACK == 1) {
    if (pack_a || pack_b)
      pack_operands(kTA ? pack_matrix(A, a_packed, K, M, pack_a != 0) : pack_matrix(A, a_packed, M, K, pack_a != 0),
                    kTB ? pack_matrix(B, b_packed, N, K, pack_b != 0) : pack_matrix(B, b_packed, K, N, pack_b != 0),
                    pack_sync);
  }
  // 128-byte swizzle atoms must sit on 1024-byte boundaries (descriptor base
  // offset 0, TMA pattern = wgmma pattern); the spec adds 1024 bytes of slack.
  const unsigned raw = smem_u32(gemm_smem);
  const unsigned smem = (raw + 1023u) & ~1023u;
  const unsigned epi_smem = smem + STAGES * kStageBytes;
  const unsigned full0 = smem + kBarOffset;          // STAGES full barriers
  const unsigned empty0 = full0 + 8 * STAGES;        // STAGES empty barriers
  unsigned char* bar_area = gemm_smem + (smem - raw) + kBarOffset;
  volatile unsigned* flags = reinterpret_cast<volatile unsigned*>(bar_area + 16 * STAGES);  // split-K "last" flags
  // The schedule lives in shared memory: re-read where needed instead of
  // pinning ~16 registers across the MMAs.
  Sched* sched = reinterpret_cast<Sched*>(bar_area + 16 * STAGES + 16);
  const EvotuneTmap* ta = (PACK == 1 && pack_a) ? &tm_ap : &tm_a;
  const EvotuneTmap* tb = (PACK == 1 && pack_b) ? &tm_bp : &tm_b;
  const bool tma_a = use_tma_a != 0 || (PACK == 1 && pack_a), tma_b = use_tma_b != 0 || (PACK == 1 && pack_b);
  const bool realign = realign_b(N, K) && tma_a;  // PACK=2: B by its raw windows, realigned (A by TMA)
  // EPILOGUE=4 with both operands by TMA (then the producer side's second
  // warp is idle; tm_c exists only when N % 8 == 0): that warp issues the
  // stores.
  const bool storer = kStorer && tma_a && tma_b && N % 8 == 0;

  tl_start();
  // Set-up: the schedule and the ring's barriers. Without a cluster the
  // producer's leader does it, arrives on kBarSetup while everyone else waits
  // there, and issues the first unit's first k-tile (when both operands come
  // by TMA) before the producer's own set-up: the loads of a cold kernel go
  // out as soon as the kernel's parameters have arrived. A cluster's CTAs
  // meet in cluster_sync instead (peers multicast into each other's ring).
  const int setup_thread = kCS > 1 ? 0 : kConsumerThreads;
  // The leader's first loads (k-tiles of the first unit, where they start),
  // issued right after the set-up; its producer loop goes on from there.
  int pre = 0, pre_m0 = 0, pre_n0 = 0, pre_k0 = 0;
  if (threadIdx.x == setup_thread) {
    if (kCS == 1 && tma_a) tma_prefetch_desc(ta);  // the first loads need them
    if (kCS == 1 && tma_b) tma_prefetch_desc(tb);
    // The spec's smem expression must match this layout: fail loudly, never
    // write past the allocation.
    unsigned dyn;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (unsigned)kSmemBytes) __trap();
    const Sched sc = make_sched(M, N, K);
    *sched = sc;
    // Full: one expect_tx arrival when any operand comes by TMA, plus one per
    // producer thread when any operand falls back to thread copies, or (B
    // realigned) one per realigner warp.
    const unsigned full_count =
        realign ? 4u
                : ((tma_a || tma_b) ? 1u : 0u) + ((!tma_a || !tma_b) ? (unsigned)kProducerThreads : 0u);
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(full0 + 8 * st, full_count);
      mbar_init(empty0 + 8 * st, (unsigned)kEmptyArrivals);
    }
    if constexpr (kRealignB) {
      for (int sl = 0; sl < kRawSlots; ++sl) {
        mbar_init(full0 + 256 + 8 * sl, 1u);
        mbar_init(full0 + 256 + 8 * (kRawSlots + sl), 3u);
      }
    }
    fence_mbar_init();
    fence_proxy_async();
    // Without a cluster, with both operands by TMA: the first unit's first
    // k-tile goes out right after the barrier below, into a ring nobody has
    // used (its empty barriers need no wait).
    if (kSetupLoads && tma_a && tma_b && !realign && sc.count > 0) {
      const Unit w = unit_at(sc, 0);
      pre = min(kSetupKTiles, w.k_tiles);
      pre_m0 = w.tile_m * BLOCK_M;
      pre_n0 = w.tile_n * BLOCK_N;
      pre_k0 = w.kt_begin * BLOCK_K;
    }
  }
  if constexpr (kCS > 1) {
    cluster_sync();  // peers' barriers exist before anyone multicasts or arrives remotely
  } else {
    __syncwarp();  // the leader's writes, seen by its warp
    if ((int)threadIdx.x >> 5 == setup_thread >> 5)
      named_bar_arrive(kBarSetup, kThreads);
    else
      named_bar_sync(kBarSetup, kThreads);
  }
  // The leader's first loads, once the consumers are on their way.
  if (kSetupLoads && pre > 0) {
    tl_mark_any(18);
    for (int kt = 0; kt < pre; ++kt)
      issue_tma_ktile(*sched, ta, tb, smem, kt, pre_m0, pre_n0, pre_k0 + kt * BLOCK_K, true, true);
    tl_mark_any(16);
  }

  tl_mark(17);
  const Sched& s = *sched;
  // Warp-uniform as far as the compiler can tell (a broadcast), so that the
  // role branches are uniform and the consumers' descriptors and ring state
  // live in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, (int)threadIdx.x >> 7, 0);
  if (wg == kCWG) {
    if constexpr (PRODUCER == 1) setmaxnreg_dec<kRegProducer>();
    const int ptid = (int)threadIdx.x - kConsumerThreads;
    if (storer && ptid >= 32 && ptid < 64)
      storer_warp(s, &tm_c, epi_smem);
    else if (kRealignB && realign)
      producer_realign(s, ta, &tm_br, smem, ptid);
    else
      producer(s, ta, tb, A, B, M, N, K, smem, tma_a, tma_b, ptid, pre);
    if constexpr (kCS > 1) {
      __syncwarp();
      cluster_sync();  // no CTA exits while a peer may still arrive on its barriers
    }
  } else {
    if constexpr (PRODUCER == 1) setmaxnreg_inc<kRegConsumer>();
    consumer(s, C, &tm_c, workspace, counters, smem, full0, empty0, epi_smem, flags, wg, storer);
    if constexpr (kCS > 1) {
      __syncwarp();
      cluster_sync();
    }
  }
#else
  // gemm_sm90 needs sm_90a (wgmma, setmaxnreg); nothing to run elsewhere.
  __trap();
#endif
}
