// gelu_kernels.h: launchers for the handwritten GELU kernels.
//
// A plain interface with no torch types: raw device pointers, a 64-bit element count and
// the CUDA stream to launch on. The binding (gelu_binding.cpp) turns tensors into these
// arguments; anything else (a benchmark in C, another framework) can call them directly.
//
// Contract shared by all launchers:
//   * every pointer is a device pointer to `n` densely packed elements of `dtype`
//     (the bias: `bias_len` elements); outputs must not overlap inputs;
//   * n == 0 launches nothing and returns cudaSuccess;
//   * the math runs in fp32 whatever the storage type;
//   * pointers aligned to 16 bytes take the 128-bit vectorised path, others a scalar path
//     (same results, slower);
//   * `fast` selects the hardware tanh (tanh.approx.f32) instead of tanhf;
//   * the return value is the launch status (cudaGetLastError after the launch);
//     errors raised while the kernel runs surface at the next synchronisation.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum AndreaDType {
  ANDREA_FLOAT32 = 0,
  ANDREA_FLOAT16 = 1,
  ANDREA_BFLOAT16 = 2,
} AndreaDType;

// y = gelu(x)
cudaError_t andrea_gelu_forward(AndreaDType dtype, const void* x, void* y, int64_t n,
                                bool fast, cudaStream_t stream);

// dx = dy * gelu'(x)
cudaError_t andrea_gelu_backward(AndreaDType dtype, const void* dy, const void* x, void* dx,
                                 int64_t n, bool fast, cudaStream_t stream);

// y = gelu(x + b), b broadcast along the last dimension: element i uses b[i % bias_len].
// n must be a multiple of bias_len (bias_len >= 1).
cudaError_t andrea_bias_gelu_forward(AndreaDType dtype, const void* x, const void* b, void* y,
                                     int64_t n, int64_t bias_len, bool fast,
                                     cudaStream_t stream);

// dx = dy * gelu'(x + b). The bias gradient is the sum of dx over the leading dimensions;
// the caller reduces it (see gelu_binding.cpp).
cudaError_t andrea_bias_gelu_backward(AndreaDType dtype, const void* dy, const void* x,
                                      const void* b, void* dx, int64_t n, int64_t bias_len,
                                      bool fast, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
