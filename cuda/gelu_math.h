// gelu_math.h: the scalar tanh-GELU, shared by the CUDA kernels and the CPU twin.
//
//   gelu(x)  = 0.5 x (1 + tanh(u)),   u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),   t = tanh(u)
//
// Every function here is a plain inline function when the header is read by a C++
// compiler (g++ for the CPU twin) and a __host__ __device__ function under nvcc, so the
// same lines of arithmetic run on the GPU and on the CPU.
//
// Two tanh variants:
//   Precise: tanhf (CUDA's libdevice on the GPU, the C library on the CPU).
//   Fast:    the hardware tanh, PTX `tanh.approx.f32` (sm_75 and newer), and in the
//            derivative 1 - tanh^2 from the hardware exp (see sech_squared_fast). Outside device
//            code for sm_75+ (the host, older GPUs) it falls back to the precise tanh, so
//            the fast variant is never less accurate than documented, only sometimes
//            more accurate.
// The math type is a template parameter: float on the GPU, float or double on the CPU
// (double is what gradcheck needs).
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define ANDREA_HD __host__ __device__ __forceinline__
#else
#define ANDREA_HD inline
#endif

namespace andrea {

// sqrt(2/pi) and the cubic coefficient, written out in full so float and double
// each round them once.
template <typename F>
struct GeluConst {
  static constexpr F kBeta = F(0.79788456080286535587989211986876);
  static constexpr F kKappa = F(0.044715);
  static constexpr F kKappa3 = F(3.0 * 0.044715);
};

ANDREA_HD float tanh_precise(float u) {
#if defined(__CUDA_ARCH__)
  return tanhf(u);
#else
  return std::tanh(u);
#endif
}

ANDREA_HD double tanh_precise(double u) {
#if defined(__CUDA_ARCH__)
  return ::tanh(u);
#else
  return std::tanh(u);
#endif
}

// Beyond |u| = 10 the correctly rounded fp32 tanh is exactly +-1 (1 - tanh(10) is 4e-9,
// under half an ulp of 1). The hardware tanh may sit a few ulps below 1 there, and the
// backward's (1 - t^2), multiplied by a large x, would amplify that; so the fast variant
// returns the exact +-1 in that range (one compare and one select; NaN passes through
// because the comparison is false for NaN).
ANDREA_HD float tanh_fast(float u) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 750)
  float t;
  asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
  return fabsf(u) >= 10.0f ? copysignf(1.0f, u) : t;
#else
  return tanh_precise(u);
#endif
}

// There is no double-precision hardware tanh: the fast variant of double is the precise one.
ANDREA_HD double tanh_fast(double u) { return tanh_precise(u); }

// 1 - tanh(u)^2 (= sech^2 u) for the derivative, given t = tanh(u).
// Precise: 1 - t*t, the formula PyTorch uses. Fast: the hardware tanh is off by up to a few
// ulps of 1 when |t| is close to 1, and 1 - t*t would turn that absolute error into a large
// relative one exactly where x is large (the derivative multiplies it by ~x^3). So the fast
// variant computes sech^2 u = 4e / (1 + e)^2 with e = exp(-2|u|) from the hardware exp,
// which keeps a relative error of a few ulps even when the result is tiny.
ANDREA_HD float sech_squared_fast(float u, float t) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 750)
  (void)t;
  const float e = __expf(-2.0f * fabsf(u));
  const float d = 1.0f + e;
  return __fdividef(4.0f * e, d * d);
#else
  (void)u;
  return 1.0f - t * t;
#endif
}

ANDREA_HD double sech_squared_fast(double u, double t) {
  (void)u;
  return 1.0 - t * t;
}

template <bool Fast, typename F>
ANDREA_HD F sech_squared(F u, F t) {
  if (Fast) {
    return sech_squared_fast(u, t);
  }
  return F(1) - t * t;
}

template <bool Fast, typename F>
ANDREA_HD F tanh_variant(F u) {
  if (Fast) {
    return tanh_fast(u);
  }
  return tanh_precise(u);
}

// The argument of tanh. The operation order follows PyTorch's own tanh-GELU
// (x^3 as x*x*x, then kappa*x^3 + x, then beta*(...)), so the precise variant agrees with
// F.gelu(approximate="tanh") to the last few ulps.
template <typename F>
ANDREA_HD F gelu_inner(F x) {
  const F x_cube = x * x * x;
  return GeluConst<F>::kBeta * (x + GeluConst<F>::kKappa * x_cube);
}

template <bool Fast, typename F>
ANDREA_HD F gelu_forward(F x) {
  const F t = tanh_variant<Fast>(gelu_inner(x));
  return F(0.5) * x * (F(1) + t);
}

// d gelu / dx, with t recomputed from x (the backward pass stores only x).
template <bool Fast, typename F>
ANDREA_HD F gelu_derivative(F x) {
  const F u = gelu_inner(x);
  const F t = tanh_variant<Fast>(u);
  const F x_sq = x * x;
  const F left = F(0.5) * (F(1) + t);
  const F right = F(0.5) * x * sech_squared<Fast>(u, t) * GeluConst<F>::kBeta *
                  (F(1) + GeluConst<F>::kKappa3 * x_sq);
  return left + right;
}

// dx = dy * gelu'(x): the whole backward of one element.
template <bool Fast, typename F>
ANDREA_HD F gelu_backward(F dy, F x) {
  return dy * gelu_derivative<Fast>(x);
}

}  // namespace andrea
