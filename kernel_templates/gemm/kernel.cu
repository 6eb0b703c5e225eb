// evotune built-in GEMM: C[M,N] = A[M,K] · B[K,N], all row-major, fp16 or bf16
// inputs, fp32 accumulation, output in the input type.
//
// Design. Each CTA computes a BLOCK_M x BLOCK_N tile of C (or, with split-K, a
// slice of its K range). Its WARPS_M x WARPS_N warps each own a warp tile of
// (BLOCK_M/WARPS_M) x (BLOCK_N/WARPS_N) built from mma.sync.m16n8k16 tensor-core
// instructions with fp32 accumulators in registers. Operand tiles stream from
// global to shared memory through a STAGES-deep cp.async pipeline (16-byte
// copies with zero-fill for the M/N/K edges when the row stride is a multiple
// of 8 elements and the pointer is 16-byte aligned; otherwise a CTA-uniform
// fallback of predicated element loads). Shared tiles are stored with an XOR
// swizzle of 16-byte chunks so that both the cp.async stores and the ldmatrix
// reads are free of bank conflicts; A fragments come from ldmatrix.x4, B
// fragments from ldmatrix.x4.trans (B is K x N row-major, the mma wants it
// "col"), and fragments are double-buffered in registers so that the
// ldmatrix of k-step s+1 overlaps the mma of k-step s. CTAs are rasterised in
// groups of SWIZZLE tile-rows so that concurrently running CTAs share A and B
// panels in L2. Split-K runs SPLIT_K CTAs per output tile (gridDim.z): each
// writes its fp32 partial tile to `workspace`, and the CTA that arrives last
// at the tile's counter (in `counters`) adds the others' partials, writes C
// and puts the counter back to zero for the next launch.
// With GEMM_TB=1 (the problem's TB) B is stored transposed, N rows of K
// elements (the weight W of x @ W.T): its tile is then K-major like A's,
// copied the way A's is, and its fragments come from ldmatrix.x4 without
// .trans. With GEMM_TA=1 (its TA) A is stored transposed, K rows of M
// (column-major A): its tile is then M-major like B's, copied the way B's
// is, and its fragments come from ldmatrix.x4.trans.
//
// Tunables (macros; the spec lists their values):
//   BLOCK_M, BLOCK_N  CTA tile of C.
//   BLOCK_K           K depth of one pipeline stage (16, 32 or 64).
//   WARPS_M, WARPS_N  warp grid; the warp tile must be a multiple of 16 x 16.
//   STAGES            shared-memory pipeline depth (2..5).
//   SPLIT_K           CTAs sharing one output tile's K range (1 = no split).
//   SWIZZLE           tile-rows per rasterisation group (1 = row-major order).
//   MIN_BLOCKS        __launch_bounds__ min blocks per SM (caps registers).
//
// Launch: grid = (cdiv(M,BLOCK_M)*cdiv(N,BLOCK_N), 1, SPLIT_K),
// block = 32*WARPS_M*WARPS_N, dynamic shared memory =
// STAGES*(BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N)*2 bytes; workspace holds
// SPLIT_K*M*N floats and counters one zero-initialised u32 per output tile
// (both unused when SPLIT_K == 1).

// Without a dtype macro (a plain nvcc build) the kernel is fp16.
#if !defined(EVOTUNE_DTYPE_FP16) && !defined(EVOTUNE_DTYPE_BF16)
#define EVOTUNE_DTYPE_FP16 1
#endif

#include "evotune_ptx.cuh"

#ifndef BLOCK_M
#define BLOCK_M 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef BLOCK_K
#define BLOCK_K 32
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef WARPS_N
#define WARPS_N 2
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SPLIT_K
#define SPLIT_K 1
#endif
#ifndef SWIZZLE
#define SWIZZLE 8
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
// Problem layout (spec.toml [defines], from the problem's TB): 1 when B is
// stored transposed, N rows of K elements.
#ifndef GEMM_TB
#define GEMM_TB 0
#endif
#ifndef GEMM_TA
#define GEMM_TA 0
#endif

namespace evotune_gemm {

constexpr int kThreads = 32 * WARPS_M * WARPS_N;
constexpr int kWarpM = BLOCK_M / WARPS_M;  // warp tile rows
constexpr int kWarpN = BLOCK_N / WARPS_N;  // warp tile cols
constexpr int kMI = kWarpM / 16;           // m16 fragments per warp
constexpr int kNI = kWarpN / 8;            // n8 fragments per warp (loaded in pairs)
constexpr int kKS = BLOCK_K / 16;          // k16 steps per stage
constexpr bool kTA = GEMM_TA != 0;
constexpr int kChA = kTA ? BLOCK_M / 8 : BLOCK_K / 8;  // 16-byte chunks per A smem row (TA=1: rows of k)
constexpr bool kTB = GEMM_TB != 0;
constexpr int kChB = kTB ? BLOCK_K / 8 : BLOCK_N / 8;  // 16-byte chunks per B smem row (TB=1: rows of n)
constexpr int kStageBytesA = BLOCK_M * BLOCK_K * 2;
constexpr int kStageBytesB = BLOCK_K * BLOCK_N * 2;
constexpr int kStageBytes = kStageBytesA + kStageBytesB;
// Fragment buffers alternate per k-step; with one k-step per stage the tile
// loop is unrolled twice to keep that parity static.
constexpr int kTileUnroll = (kKS == 1) ? 2 : 1;

static_assert(BLOCK_K == 16 || BLOCK_K == 32 || BLOCK_K == 64, "BLOCK_K must be 16, 32 or 64");
static_assert(BLOCK_N % 32 == 0 && BLOCK_N <= 256, "BLOCK_N must be 32, 64, 128 or 256");
static_assert(kWarpM % 16 == 0 && kWarpM * WARPS_M == BLOCK_M, "warp tile rows must be a multiple of 16");
static_assert(kWarpN % 16 == 0 && kWarpN * WARPS_N == BLOCK_N, "warp tile cols must be a multiple of 16");
static_assert(kThreads <= 1024, "at most 1024 threads");
static_assert(STAGES >= 2, "at least two pipeline stages");
static_assert(SPLIT_K >= 1 && SWIZZLE >= 1, "SPLIT_K and SWIZZLE are >= 1");
static_assert(kThreads % kChB == 0 && kThreads % kChA == 0, "a thread keeps one chunk column");

// Physical 16-byte chunk of logical chunk `chunk` in row `row` of a tile whose
// rows hold CH chunks. Any 8 consecutive rows (aligned to 8) of one logical
// chunk land in 8 distinct 16-byte bank groups, which is what ldmatrix reads
// at once; the XOR stays inside a row, so stores of whole rows stay dense.
template <int CH>
__device__ __forceinline__ int swz(int row, int chunk) {
  if constexpr (CH >= 8) {
    return chunk ^ (row & 7);
  } else {
    return chunk ^ ((row / (8 / CH)) & (CH - 1));
  }
}

__device__ __forceinline__ void st_shared_v4(void* p, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.shared.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(evotune_ptx::smem_addr(p)), "r"(a), "r"(b), "r"(c),
               "r"(d)
               : "memory");
}

constexpr int kRpiA = kThreads / kChA;  // A rows copied per pass of the CTA
constexpr int kRpiB = kThreads / kChB;  // B rows copied per pass
constexpr int kRowsB = kTB ? BLOCK_N : BLOCK_K;  // rows of B's tile in shared memory
constexpr int kRowsA = kTA ? BLOCK_K : BLOCK_M;  // and of A's
constexpr int kItersA = (kRowsA + kRpiA - 1) / kRpiA;
constexpr int kItersB = (kRowsB + kRpiB - 1) / kRpiB;

// Per-thread state of the global -> shared copies. A thread always copies the
// same 16-byte chunk column of A and of B, rows r0, r0+RPI, r0+2*RPI, ... of
// each tile; the pointers advance by one tile per load.
struct Loader {
  const evotune_elem_t* a_ptr;  // &A[m0 + ra][a_k]: its first A chunk of the next tile (TA=1: &Aᵀ[a_k][m0 + 8*ca])
  const evotune_elem_t* b_ptr;  // &B[b_k][n0 + 8*cb] (TB=1: &Bᵀ[n0 + rb][b_k])
  long long a_stride;           // elements between its A rows (kRpiA rows)
  long long b_stride;           // elements between its B rows (kRpiB rows)
  long long a_step;             // elements of one A tile (BLOCK_K columns; TA=1: BLOCK_K rows)
  long long b_step;             // elements of one B tile (BLOCK_K rows; TB=1: BLOCK_K columns)
  int a_rows;                   // rows of A from its first row to the end: M - m0 - ra (TA=1: columns, M - m0 - 8*ca)
  int a_k;                      // k of its A chunk in the next tile (TA=1: of its first row)
  int b_k;                      // k of its first B row in the next tile (TB=1: of its chunk)
  int b_cols;                   // columns of B from its chunk to the end: N - n0 - 8*cb (TB=1: rows, N - n0 - rb)
  unsigned a_sts;               // byte offset of its first A chunk within a stage
  unsigned b_sts;               // byte offset of its first B chunk within a stage
  bool a_live, b_live;          // false when the CTA has more threads than chunk rows
};

// Byte offset within a stage of a thread's chunk i, given that of chunk 0
// (row r0 < RPI). Rows of >= 8 chunks swizzle by row & 7; when RPI is not a
// multiple of 8 that changes with i by the compile-time XOR (i*RPI) & 7.
template <int CH, int RPI>
__device__ __forceinline__ unsigned chunk_offset(unsigned sts0, int i) {
  const unsigned flip = (CH >= 8) ? (unsigned)((i * RPI) & 7) : 0u;
  return (sts0 ^ (flip << 4)) + (unsigned)(i * RPI * CH * 16);
}

__device__ __forceinline__ Loader make_loader(const evotune_elem_t* A, const evotune_elem_t* B, int M, int N, int K,
                                              int m0, int n0, int k_begin, int tid) {
  Loader L;
  const int ca = tid % kChA, ra = tid / kChA;
  const int cb = tid % kChB, rb = tid / kChB;
  // TA=1: Aᵀ's rows, as B's; TB=1: Bᵀ's rows, as A's.
  L.a_ptr = kTA ? A + (long long)(k_begin + ra) * M + (m0 + ca * 8) : A + (long long)(m0 + ra) * K + (k_begin + ca * 8);
  L.b_ptr = kTB ? B + (long long)(n0 + rb) * K + (k_begin + cb * 8) : B + (long long)(k_begin + rb) * N + (n0 + cb * 8);
  L.a_stride = (long long)kRpiA * (kTA ? M : K);
  L.a_step = kTA ? (long long)BLOCK_K * M : (long long)BLOCK_K;
  L.b_stride = (long long)kRpiB * (kTB ? K : N);
  L.b_step = kTB ? (long long)BLOCK_K : (long long)BLOCK_K * N;
  L.a_rows = kTA ? M - m0 - ca * 8 : M - m0 - ra;
  L.a_k = kTA ? k_begin + ra : k_begin + ca * 8;
  L.b_k = kTB ? k_begin + cb * 8 : k_begin + rb;
  L.b_cols = kTB ? N - n0 - rb : N - n0 - cb * 8;
  L.a_sts = (unsigned)(ra * (kTA ? BLOCK_M : BLOCK_K) + swz<kChA>(ra, ca) * 8) * 2;
  L.b_sts = (unsigned)(kStageBytesA + (rb * (kTB ? BLOCK_K : BLOCK_N) + swz<kChB>(rb, cb) * 8) * 2);
  L.a_live = (kRowsA % kRpiA == 0) || ra < kRowsA;
  L.b_live = (kRowsB % kRpiB == 0) || rb < kRowsB;
  return L;
}

// One thread's chunks of a K-major tile (A's, and with TB=1 Bᵀ's): rows r0,
// r0 + RPI, ... (ITERS of them; `rows` left in the matrix from r0, `stride`
// elements apart), at k..k+7 (`k_end` the K slice's end), into `stage` from
// byte offset `sts`. vec: 16-byte cp.async with zero-fill (the row stride is
// a multiple of 8 elements, so a chunk is wholly inside or outside the
// matrix); otherwise predicated 2-byte loads packed into 16-byte shared stores.
template <int CH, int RPI, int ITERS>
__device__ __forceinline__ void copy_k_major(unsigned char* stage, unsigned sts, const evotune_elem_t* ptr,
                                             long long stride, int rows, int k, int k_end, bool vec) {
  if (vec) {
    const bool k_ok = k < k_end;
#pragma unroll
    for (int i = 0; i < ITERS; ++i)
      evotune_ptx::cp_async_16(stage + chunk_offset<CH, RPI>(sts, i), ptr + i * stride, k_ok && i * RPI < rows);
  } else {
    const unsigned short* src = reinterpret_cast<const unsigned short*>(ptr);
#pragma unroll 1
    for (int i = 0; i < ITERS; ++i) {
      const bool row_ok = i * RPI < rows;
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        const unsigned lo = (row_ok && k + e < k_end) ? (unsigned)src[i * stride + e] : 0u;
        const unsigned hi = (row_ok && k + e + 1 < k_end) ? (unsigned)src[i * stride + e + 1] : 0u;
        w[e / 2] = lo | (hi << 16);
      }
      st_shared_v4(stage + chunk_offset<CH, RPI>(sts, i), w[0], w[1], w[2], w[3]);
    }
  }
}

// One thread's chunks of an MN-major tile (B's, and with TA=1 Aᵀ's): k rows
// k, k + RPI, ... (ITERS of them, `stride` elements apart; `k_end` the K
// slice's end), its chunk `cols` columns before the matrix's end, into
// `stage` from byte offset `sts`. vec: as copy_k_major's.
template <int CH, int RPI, int ITERS>
__device__ __forceinline__ void copy_mn_major(unsigned char* stage, unsigned sts, const evotune_elem_t* ptr,
                                              long long stride, int cols, int k, int k_end, bool vec) {
  if (vec) {
    const bool n_ok = cols > 0;
#pragma unroll
    for (int i = 0; i < ITERS; ++i)
      evotune_ptx::cp_async_16(stage + chunk_offset<CH, RPI>(sts, i), ptr + i * stride, n_ok && k + i * RPI < k_end);
  } else {
    const unsigned short* src = reinterpret_cast<const unsigned short*>(ptr);
#pragma unroll 1
    for (int i = 0; i < ITERS; ++i) {
      const bool row_ok = k + i * RPI < k_end;
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 8; e += 2) {
        const unsigned lo = (row_ok && e < cols) ? (unsigned)src[i * stride + e] : 0u;
        const unsigned hi = (row_ok && e + 1 < cols) ? (unsigned)src[i * stride + e + 1] : 0u;
        w[e / 2] = lo | (hi << 16);
      }
      st_shared_v4(stage + chunk_offset<CH, RPI>(sts, i), w[0], w[1], w[2], w[3]);
    }
  }
}

// Copies the next A and B tiles into `stage` (A at 0, B at kStageBytesA) and
// advances. vec: as the copies', per operand.
__device__ __forceinline__ void load_tiles(Loader& L, unsigned char* stage, int k_end, bool a_vec, bool b_vec) {
  if (L.a_live) {
    if constexpr (kTA)
      copy_mn_major<kChA, kRpiA, kItersA>(stage, L.a_sts, L.a_ptr, L.a_stride, L.a_rows, L.a_k, k_end, a_vec);
    else
      copy_k_major<kChA, kRpiA, kItersA>(stage, L.a_sts, L.a_ptr, L.a_stride, L.a_rows, L.a_k, k_end, a_vec);
  }
  if (L.b_live) {
    if constexpr (kTB)
      copy_k_major<kChB, kRpiB, kItersB>(stage, L.b_sts, L.b_ptr, L.b_stride, L.b_cols, L.b_k, k_end, b_vec);
    else
      copy_mn_major<kChB, kRpiB, kItersB>(stage, L.b_sts, L.b_ptr, L.b_stride, L.b_cols, L.b_k, k_end, b_vec);
  }
  L.a_ptr += L.a_step;
  L.a_k += BLOCK_K;
  L.b_ptr += L.b_step;
  L.b_k += BLOCK_K;
}

// ldmatrix the A and B fragments of k-step `kk` of a stage into registers.
// a_base / b_base: this lane's byte offsets (swizzle included) of the first
// A fragment of k-step 0 and the first B fragment pair. Bits 4-6 of an
// offset hold the swizzled chunk and the row part has none there, so moving
// 2*kk chunks along k (A) or 2*j chunks along n (B, j < 4) is a XOR of kk*32
// or j*32; B pairs nj >= 4 sit 8 chunks (128 bytes) further per group of 4.
__device__ __forceinline__ void load_frags(unsigned (&fa)[kMI][4], unsigned (&fb)[kNI][2], const unsigned char* stage,
                                           unsigned a_base, unsigned b_base, int kk) {
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
    if constexpr (kTA)  // Aᵀ's rows are k: as B's pairs, m16 block mi two chunks on
      evotune_ptx::ldmatrix_x4_trans(fa[mi][0], fa[mi][1], fa[mi][2], fa[mi][3],
                                     stage + (a_base ^ (unsigned)((mi % 4) * 32)) + (mi / 4) * 128 +
                                         kk * 16 * BLOCK_M * 2);
    else
      evotune_ptx::ldmatrix_x4(fa[mi][0], fa[mi][1], fa[mi][2], fa[mi][3],
                               stage + (a_base ^ (unsigned)(kk * 32)) + mi * 16 * BLOCK_K * 2);
  }
#pragma unroll
  for (int nj = 0; nj < kNI / 2; ++nj) {
    if constexpr (kTB)  // Bᵀ's rows are n: k-step kk is a XOR as A's, n16 pair nj 16 rows on
      evotune_ptx::ldmatrix_x4(fb[2 * nj][0], fb[2 * nj][1], fb[2 * nj + 1][0], fb[2 * nj + 1][1],
                               stage + (b_base ^ (unsigned)(kk * 32)) + nj * 16 * BLOCK_K * 2);
    else
      evotune_ptx::ldmatrix_x4_trans(fb[2 * nj][0], fb[2 * nj][1], fb[2 * nj + 1][0], fb[2 * nj + 1][1],
                                     stage + (b_base ^ (unsigned)((nj % 4) * 32)) + (nj / 4) * 128 +
                                         kk * 16 * BLOCK_N * 2);
  }
}

__device__ __forceinline__ void mma_tile(float (&acc)[kMI][kNI][4], const unsigned (&fa)[kMI][4],
                                         const unsigned (&fb)[kNI][2]) {
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi) {
#pragma unroll
    for (int j = 0; j < kNI; ++j) {
      // Serpentine order: consecutive mmas share an A or a B operand.
      const int ni = (mi & 1) ? kNI - 1 - j : j;
      evotune_ptx::mma_16816(acc[mi][ni], fa[mi], fb[ni]);
    }
  }
}

// One k-step: fragments of step KK are in buffer CUR; load step KK+1 (the
// next tile's step 0 after the barrier when KK is the last) into the other
// buffer, then issue the mmas of step KK. Templates rather than a loop so that
// fragment indices are compile-time constants whatever the unroller decides.
template <int KK, int CUR>
__device__ __forceinline__ void k_step(float (&acc)[kMI][kNI][4], unsigned (&fa)[2][kMI][4], unsigned (&fb)[2][kNI][2],
                                       unsigned char* smem, int& read_stage, unsigned a_base, unsigned b_base) {
  if constexpr (KK == kKS - 1) {
    // The next tile has landed for everyone, and everyone is done with the
    // fragments of this one.
    evotune_ptx::cp_async_wait<STAGES - 2>();
    __syncthreads();
    read_stage = (read_stage + 1 == STAGES) ? 0 : read_stage + 1;
  }
  load_frags(fa[CUR ^ 1], fb[CUR ^ 1], smem + read_stage * kStageBytes, a_base, b_base, (KK + 1) % kKS);
  mma_tile(acc, fa[CUR], fb[CUR]);
}

// All k-steps of one tile, the first with fragment buffer CUR0.
template <int CUR0>
__device__ __forceinline__ void compute_tile(float (&acc)[kMI][kNI][4], unsigned (&fa)[2][kMI][4],
                                             unsigned (&fb)[2][kNI][2], unsigned char* smem, int& read_stage,
                                             unsigned a_base, unsigned b_base) {
  k_step<0, CUR0>(acc, fa, fb, smem, read_stage, a_base, b_base);
  if constexpr (kKS >= 2) k_step<1, CUR0 ^ 1>(acc, fa, fb, smem, read_stage, a_base, b_base);
  if constexpr (kKS >= 4) {
    k_step<2, CUR0>(acc, fa, fb, smem, read_stage, a_base, b_base);
    k_step<3, CUR0 ^ 1>(acc, fa, fb, smem, read_stage, a_base, b_base);
  }
}

// Starts the copy of the next tile (if any) into the stage every thread
// finished reading before the last barrier; one commit group per call.
__device__ __forceinline__ void refill(Loader& ld, unsigned char* smem, int& write_stage, int& next_tile, int k_tiles,
                                       int k_end, bool a_vec, bool b_vec) {
  if (next_tile < k_tiles) load_tiles(ld, smem + write_stage * kStageBytes, k_end, a_vec, b_vec);
  evotune_ptx::cp_async_commit();
  ++next_tile;
  write_stage = (write_stage + 1 == STAGES) ? 0 : write_stage + 1;
}

// Writes two adjacent outputs (row, col), (row, col+1) of C, bounds-checked.
__device__ __forceinline__ void store_c_pair(evotune_elem_t* __restrict__ C, int M, int N, int row, int col, float x,
                                             float y, bool vec) {
  if (row >= M) return;
  evotune_elem_t* p = C + (long long)row * N + col;
  if (vec && col + 1 < N) {
    *reinterpret_cast<unsigned*>(p) = evotune_ptx::pack2(x, y);
  } else {
    if (col < N) p[0] = evotune_ptx::from_float(x);
    if (col + 1 < N) p[1] = evotune_ptx::from_float(y);
  }
}

}  // namespace evotune_gemm

extern "C" __global__ void __launch_bounds__(evotune_gemm::kThreads, MIN_BLOCKS)
    gemm_kernel(const evotune_elem_t* __restrict__ A, const evotune_elem_t* __restrict__ B,
                evotune_elem_t* __restrict__ C, float* __restrict__ workspace, unsigned* __restrict__ counters, int M,
                int N, int K) {
  using namespace evotune_gemm;
  extern __shared__ __align__(128) unsigned char gemm_smem[];  // STAGES x [A tile | B tile]

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int warp_m = warp % WARPS_M;
  const int warp_n = warp / WARPS_M;

  // Rasterisation: walk SWIZZLE tile-rows down, then across, so that the CTAs
  // resident together touch SWIZZLE A panels and few B panels.
  const int tiles_m = (M + BLOCK_M - 1) / BLOCK_M;
  const int tiles_n = (N + BLOCK_N - 1) / BLOCK_N;
  int tile_m, tile_n;
  {
    const int pid = blockIdx.x;
    const int group_size = SWIZZLE * tiles_n;
    const int group = pid / group_size;
    const int first_m = group * SWIZZLE;
    const int rows_in_group = min(tiles_m - first_m, SWIZZLE);
    const int in_group = pid - group * group_size;
    tile_m = first_m + in_group % rows_in_group;
    tile_n = in_group / rows_in_group;
  }
  const int m0 = tile_m * BLOCK_M;
  const int n0 = tile_n * BLOCK_N;

  // This CTA's K range: whole BLOCK_K tiles, split evenly across gridDim.z.
  const int k_tiles_total = (K + BLOCK_K - 1) / BLOCK_K;
  const int tiles_per_split = (k_tiles_total + SPLIT_K - 1) / SPLIT_K;
  const int kt_begin = (SPLIT_K > 1 ? (int)blockIdx.z : 0) * tiles_per_split;
  const int k_tiles = max(0, min(k_tiles_total - kt_begin, tiles_per_split));
  const int k_begin = kt_begin * BLOCK_K;
  const int k_end = min(K, k_begin + tiles_per_split * BLOCK_K);

  // 16-byte cp.async needs every row start 16-byte aligned (CTA-uniform test).
  const bool a_vec = ((kTA ? M : K) % 8 == 0) && ((reinterpret_cast<unsigned long long>(A) & 15) == 0);
  const bool b_vec = ((kTB ? K : N) % 8 == 0) && ((reinterpret_cast<unsigned long long>(B) & 15) == 0);

  // Per-lane ldmatrix byte offsets within a stage (see load_frags). Fragment
  // row bases are multiples of 16, so the swizzle depends only on the lane.
  unsigned a_base, b_base;
  {
    if constexpr (kTA) {
      // Lanes 0-7 and 16-23 address k rows 0-7 and 8-15 of an m16 block's
      // columns 0-7, lanes 8-15 and 24-31 the same rows at columns 8-15:
      // matrices in the order of the A fragment (m 0-7, m 8-15 at k 0-7, then
      // at k 8-15).
      const int kr = (lane & 7) + ((lane >> 4) << 3);
      const int ca = (warp_m * kWarpM) / 8 + ((lane >> 3) & 1);
      a_base = (unsigned)(kr * BLOCK_M + swz<kChA>(kr, ca) * 8) * 2;
    } else {
      const int ra = warp_m * kWarpM + (lane & 15);
      a_base = (unsigned)(ra * BLOCK_K + swz<kChA>(ra, lane >> 4) * 8) * 2;
    }
    if constexpr (kTB) {
      // Lanes 0-7 and 16-23 address n rows 0-7 and 8-15 of an n16 pair at k
      // 0-7, lanes 8-15 and 24-31 the same rows at k 8-15: matrices in the
      // order of the .trans load's fragments.
      const int rb = warp_n * kWarpN + (lane & 7) + ((lane >> 4) << 3);
      b_base = (unsigned)(kStageBytesA + (rb * BLOCK_K + swz<kChB>(rb, (lane >> 3) & 1) * 8) * 2);
    } else {
      const int rb = lane & 15;
      const int cb = (warp_n * kWarpN) / 8 + (lane >> 4);
      b_base = (unsigned)(kStageBytesA + (rb * BLOCK_N + swz<kChB>(rb, cb) * 8) * 2);
    }
  }

  float acc[kMI][kNI][4];
#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;

  Loader ld = make_loader(A, B, M, N, K, m0, n0, k_begin, tid);

  // Prologue: tiles 0..STAGES-2 in flight, one commit group each (empty
  // groups too, so that wait_group counts stay in step with tiles).
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < k_tiles) load_tiles(ld, gemm_smem + s * kStageBytes, k_end, a_vec, b_vec);
    evotune_ptx::cp_async_commit();
  }
  evotune_ptx::cp_async_wait<STAGES - 2>();
  __syncthreads();

  unsigned fa[2][kMI][4];
  unsigned fb[2][kNI][2];
  int read_stage = 0;
  int write_stage = STAGES - 1;
  int next_tile = STAGES - 1;
  load_frags(fa[0], fb[0], gemm_smem, a_base, b_base, 0);

  // Main loop. With one k-step per tile the fragment buffer alternates per
  // tile, so tiles go in pairs to keep the buffer index static.
  for (int kt = 0; kt < k_tiles; kt += kTileUnroll) {
    refill(ld, gemm_smem, write_stage, next_tile, k_tiles, k_end, a_vec, b_vec);
    compute_tile<0>(acc, fa, fb, gemm_smem, read_stage, a_base, b_base);
    if constexpr (kTileUnroll == 2) {
      if (kt + 1 < k_tiles) {
        refill(ld, gemm_smem, write_stage, next_tile, k_tiles, k_end, a_vec, b_vec);
        compute_tile<1>(acc, fa, fb, gemm_smem, read_stage, a_base, b_base);
      }
    }
  }
  evotune_ptx::cp_async_wait_all();  // no copies outlive the CTA

  const int row_base = m0 + warp_m * kWarpM + (lane >> 2);
  const int col_base = n0 + warp_n * kWarpN + (lane & 3) * 2;
  const bool c_vec = (N % 2 == 0) && ((reinterpret_cast<unsigned long long>(C) & 3) == 0);

  if constexpr (SPLIT_K > 1) {
    __shared__ unsigned s_is_last;
    const long long MN = (long long)M * N;
    // Publish this slice's fp32 partial tile.
    float* ws = workspace + (long long)blockIdx.z * MN;
#pragma unroll
    for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
      for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + mi * 16 + h * 8;
          const int col = col_base + ni * 8;
          if (row < M) {
            float* p = ws + (long long)row * N + col;
            if (c_vec && col + 1 < N) {
              __stcg(reinterpret_cast<float2*>(p), make_float2(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]));
            } else {
              if (col < N) __stcg(p, acc[mi][ni][2 * h]);
              if (col + 1 < N) __stcg(p + 1, acc[mi][ni][2 * h + 1]);
            }
          }
        }
    // Release: every thread's partials are visible GPU-wide before the count.
    __threadfence();
    __syncthreads();
    const int tile_id = tile_m * tiles_n + tile_n;
    if (tid == 0) {
      __threadfence();
      const unsigned arrived = atomicAdd(&counters[tile_id], 1u);
      s_is_last = (arrived == SPLIT_K - 1) ? 1u : 0u;
      if (s_is_last) counters[tile_id] = 0u;  // every slice has counted: rearm for the next launch
      __threadfence();                         // acquire side of the count
    }
    __syncthreads();
    if (!s_is_last) return;
    __threadfence();
    // Last CTA of the tile: add the other slices' partials (L2 reads, never L1).
    for (int z = 0; z < SPLIT_K; ++z) {
      if (z == (int)blockIdx.z) continue;
      const float* wz = workspace + (long long)z * MN;
#pragma unroll
      for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < kNI; ++ni)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row_base + mi * 16 + h * 8;
            const int col = col_base + ni * 8;
            if (row < M) {
              const float* p = wz + (long long)row * N + col;
              if (c_vec && col + 1 < N) {
                const float2 v = __ldcg(reinterpret_cast<const float2*>(p));
                acc[mi][ni][2 * h] += v.x;
                acc[mi][ni][2 * h + 1] += v.y;
              } else {
                if (col < N) acc[mi][ni][2 * h] += __ldcg(p);
                if (col + 1 < N) acc[mi][ni][2 * h + 1] += __ldcg(p + 1);
              }
            }
          }
    }
  }

#pragma unroll
  for (int mi = 0; mi < kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < kNI; ++ni) {
      const int row = row_base + mi * 16;
      const int col = col_base + ni * 8;
      store_c_pair(C, M, N, row, col, acc[mi][ni][0], acc[mi][ni][1], c_vec);
      store_c_pair(C, M, N, row + 8, col, acc[mi][ni][2], acc[mi][ni][3], c_vec);
    }
}
