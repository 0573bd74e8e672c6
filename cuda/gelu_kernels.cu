// gelu_kernels.cu: the handwritten tanh-GELU kernels (forward, backward, fused bias + GELU).
//
// No torch headers here: the file sees raw device pointers, an element count and a stream,
// so it compiles in seconds and can be read on its own. The scalar math lives in
// gelu_math.h and is shared with the CPU twin (gelu_cpu.cpp).
//
// Layout of the work:
//   * Storage types fp32, fp16 and bf16 are handled as raw bit patterns; each element is
//     widened to fp32 with the conversion intrinsics (__half2float, __bfloat162float, ...),
//     because the flags torch passes to nvcc switch off the implicit conversion operators.
//   * The fast path moves 16 bytes per load and per store (4 floats or 8 halves), the
//     widest single memory instruction, so each thread issues as few memory operations as
//     possible. It needs every pointer aligned to 16 bytes (and, with a bias, a bias length
//     that is a multiple of the pack width); anything else takes the scalar path, which
//     gives the same numbers.
//   * Elements that do not fill a whole pack (the tail) are done one by one by the same
//     launch.
//   * Indices are 64-bit and the loops are grid-stride loops, so a grid sized to fill the
//     GPU once covers any n, including tensors with more than 2^31 elements.
//   * The bias column is advanced incrementally (one add and one compare per step) instead
//     of a 64-bit modulo per element, which is slow on a GPU.
#include "gelu_kernels.h"

#include <atomic>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gelu_math.h"

namespace andrea {
namespace {

constexpr int kThreads = 256;
constexpr int kPackBytes = 16;

// How one storage type is widened to fp32 and narrowed back (round to nearest even).
struct Float32 {
  using Bits = unsigned int;
  static __device__ __forceinline__ float widen(Bits b) { return __uint_as_float(b); }
  static __device__ __forceinline__ Bits narrow(float f) { return __float_as_uint(f); }
};

struct Float16 {
  using Bits = unsigned short;
  static __device__ __forceinline__ float widen(Bits b) { return __half2float(__ushort_as_half(b)); }
  static __device__ __forceinline__ Bits narrow(float f) { return __half_as_ushort(__float2half_rn(f)); }
};

struct BFloat16 {
  using Bits = unsigned short;
  static __device__ __forceinline__ float widen(Bits b) {
    return __bfloat162float(__ushort_as_bfloat16(b));
  }
  static __device__ __forceinline__ Bits narrow(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
};

// 16 bytes seen either as one 128-bit word (for the memory instruction) or as elements.
template <typename S>
union Pack {
  static constexpr int kWidth = kPackBytes / static_cast<int>(sizeof(typename S::Bits));
  uint4 raw;
  typename S::Bits v[kWidth];
};

// The per-element operation. Forward: gelu(x + b). Backward: dy * gelu'(x + b).
// Without a bias, b is 0 and the add disappears at compile time.
template <bool Fast, bool Backward>
__device__ __forceinline__ float apply(float x, float b, float dy) {
  const float h = x + b;
  if (Backward) {
    return gelu_backward<Fast>(dy, h);
  }
  return gelu_forward<Fast>(h);
}

// Kernel arguments in one place. dy is used only by Backward kernels, b only by Bias kernels.
template <typename S>
struct Args {
  const typename S::Bits* __restrict__ x;
  const typename S::Bits* __restrict__ dy;
  const typename S::Bits* __restrict__ b;
  typename S::Bits* __restrict__ out;
  int64_t n;
  int64_t bias_len;
};

// 128-bit path. Requires: x, dy, out (and b) 16-byte aligned; with Bias, bias_len % kWidth == 0,
// so a pack never straddles the end of a bias row and its bias values form one aligned pack too.
template <typename S, bool Fast, bool Backward, bool Bias>
__global__ void __launch_bounds__(kThreads) gelu_vectorized_kernel(Args<S> a) {
  using P = Pack<S>;
  constexpr int W = P::kWidth;
  const int64_t n_packs = a.n / W;
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;

  const uint4* __restrict__ x4 = reinterpret_cast<const uint4*>(a.x);
  const uint4* __restrict__ dy4 = reinterpret_cast<const uint4*>(a.dy);
  uint4* __restrict__ out4 = reinterpret_cast<uint4*>(a.out);

  // First element of this thread's first pack, as a column of the bias row.
  int64_t col = 0;
  int64_t col_step = 0;
  if (Bias) {
    col = (start * W) % a.bias_len;
    col_step = (stride * W) % a.bias_len;
  }

  for (int64_t p = start; p < n_packs; p += stride) {
    P xp, dyp, bp, yp;
    xp.raw = __ldg(x4 + p);
    if (Backward) {
      dyp.raw = __ldg(dy4 + p);
    }
    if (Bias) {
      bp.raw = __ldg(reinterpret_cast<const uint4*>(a.b + col));
      col += col_step;
      if (col >= a.bias_len) {
        col -= a.bias_len;
      }
    }
#pragma unroll
    for (int k = 0; k < W; ++k) {
      const float xv = S::widen(xp.v[k]);
      const float bv = Bias ? S::widen(bp.v[k]) : 0.0f;
      const float dv = Backward ? S::widen(dyp.v[k]) : 0.0f;
      yp.v[k] = S::narrow(apply<Fast, Backward>(xv, bv, dv));
    }
    out4[p] = yp.raw;
  }

  // Tail: the last n % W elements, one per thread.
  for (int64_t i = n_packs * W + start; i < a.n; i += stride) {
    const float bv = Bias ? S::widen(a.b[i % a.bias_len]) : 0.0f;
    const float dv = Backward ? S::widen(a.dy[i]) : 0.0f;
    a.out[i] = S::narrow(apply<Fast, Backward>(S::widen(a.x[i]), bv, dv));
  }
}

// Scalar path for pointers that are not 16-byte aligned (e.g. a view with a storage
// offset) or a bias length that is not a multiple of the pack width.
template <typename S, bool Fast, bool Backward, bool Bias>
__global__ void __launch_bounds__(kThreads) gelu_scalar_kernel(Args<S> a) {
  const int64_t start = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t col = 0;
  int64_t col_step = 0;
  if (Bias) {
    col = start % a.bias_len;
    col_step = stride % a.bias_len;
  }
  for (int64_t i = start; i < a.n; i += stride) {
    float bv = 0.0f;
    if (Bias) {
      bv = S::widen(a.b[col]);
      col += col_step;
      if (col >= a.bias_len) {
        col -= a.bias_len;
      }
    }
    const float dv = Backward ? S::widen(a.dy[i]) : 0.0f;
    a.out[i] = S::narrow(apply<Fast, Backward>(S::widen(a.x[i]), bv, dv));
  }
}

// Enough blocks to fill every SM once (8 blocks of 256 threads = 2048 threads, the most an
// SM of sm_80/sm_90 keeps resident); the grid-stride loops do the rest.
int max_blocks_for_current_device() {
  static std::atomic<int> cache[64];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    return 1;
  }
  if (device >= 0 && device < 64) {
    const int cached = cache[device].load(std::memory_order_relaxed);
    if (cached > 0) {
      return cached;
    }
  }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      sms <= 0) {
    sms = 1;
  }
  const int blocks = sms * 8;
  if (device >= 0 && device < 64) {
    cache[device].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

int grid_for(int64_t work_items) {
  const int64_t wanted = (work_items + kThreads - 1) / kThreads;
  const int64_t cap = max_blocks_for_current_device();
  const int64_t blocks = wanted < cap ? wanted : cap;
  return static_cast<int>(blocks < 1 ? 1 : blocks);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) % kPackBytes) == 0; }

template <typename S, bool Fast, bool Backward, bool Bias>
cudaError_t launch(const void* x, const void* dy, const void* b, void* out, int64_t n,
                   int64_t bias_len, cudaStream_t stream) {
  if (n <= 0) {
    return cudaSuccess;
  }
  if (Bias && bias_len <= 0) {
    return cudaErrorInvalidValue;
  }
  using Bits = typename S::Bits;
  Args<S> a;
  a.x = static_cast<const Bits*>(x);
  a.dy = static_cast<const Bits*>(dy);
  a.b = static_cast<const Bits*>(b);
  a.out = static_cast<Bits*>(out);
  a.n = n;
  a.bias_len = Bias ? bias_len : 1;

  constexpr int W = Pack<S>::kWidth;
  const bool vectorizable = aligned16(x) && aligned16(out) && (!Backward || aligned16(dy)) &&
                            (!Bias || (aligned16(b) && bias_len % W == 0));
  if (vectorizable) {
    const int64_t packs = n / W;
    const int64_t work = packs > 0 ? packs : n;
    gelu_vectorized_kernel<S, Fast, Backward, Bias><<<grid_for(work), kThreads, 0, stream>>>(a);
  } else {
    gelu_scalar_kernel<S, Fast, Backward, Bias><<<grid_for(n), kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

template <bool Backward, bool Bias>
cudaError_t dispatch(AndreaDType dtype, bool fast, const void* x, const void* dy, const void* b,
                     void* out, int64_t n, int64_t bias_len, cudaStream_t stream) {
  switch (dtype) {
    case ANDREA_FLOAT32:
      return fast ? launch<Float32, true, Backward, Bias>(x, dy, b, out, n, bias_len, stream)
                  : launch<Float32, false, Backward, Bias>(x, dy, b, out, n, bias_len, stream);
    case ANDREA_FLOAT16:
      return fast ? launch<Float16, true, Backward, Bias>(x, dy, b, out, n, bias_len, stream)
                  : launch<Float16, false, Backward, Bias>(x, dy, b, out, n, bias_len, stream);
    case ANDREA_BFLOAT16:
      return fast ? launch<BFloat16, true, Backward, Bias>(x, dy, b, out, n, bias_len, stream)
                  : launch<BFloat16, false, Backward, Bias>(x, dy, b, out, n, bias_len, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace
}  // namespace andrea

extern "C" {

cudaError_t andrea_gelu_forward(AndreaDType dtype, const void* x, void* y, int64_t n, bool fast,
                                cudaStream_t stream) {
  return andrea::dispatch<false, false>(dtype, fast, x, nullptr, nullptr, y, n, 1, stream);
}

cudaError_t andrea_gelu_backward(AndreaDType dtype, const void* dy, const void* x, void* dx,
                                 int64_t n, bool fast, cudaStream_t stream) {
  return andrea::dispatch<true, false>(dtype, fast, x, dy, nullptr, dx, n, 1, stream);
}

cudaError_t andrea_bias_gelu_forward(AndreaDType dtype, const void* x, const void* b, void* y,
                                     int64_t n, int64_t bias_len, bool fast,
                                     cudaStream_t stream) {
  return andrea::dispatch<false, true>(dtype, fast, x, nullptr, b, y, n, bias_len, stream);
}

cudaError_t andrea_bias_gelu_backward(AndreaDType dtype, const void* dy, const void* x,
                                      const void* b, void* dx, int64_t n, int64_t bias_len,
                                      bool fast, cudaStream_t stream) {
  return andrea::dispatch<true, true>(dtype, fast, x, dy, b, dx, n, bias_len, stream);
}

}  // extern "C"
