// gelu_cpu.cpp: the CPU twin of the GELU kernels.
//
// It runs the arithmetic of gelu_math.h (the very lines the CUDA kernels run) over CPU
// tensors, so the loader, the binding and the handwritten math are exercised on machines
// without a GPU, CI included. It also defines the operator schemas; on a CUDA build
// gelu_binding.cpp adds the CUDA implementations of the same operators.
//
// dtypes: float32 and float64 (math in the storage precision: float64 is what gradcheck
// needs), float16 and bfloat16 (math in float32, as on the GPU).
// On the CPU the "fast" variant computes the precise tanh: the hardware tanh exists only on
// the GPU (see gelu_math.h).
//
// Includes are kept minimal on purpose (no <torch/extension.h>): the twin must build cold in a
// few seconds.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include "gelu_math.h"
#include "gelu_ops.h"

namespace andrea {
namespace {

// Elements per parallel chunk: big enough that starting a chunk costs little next to the
// tanh calls inside it.
constexpr int64_t kGrain = 1 << 14;

// Outside GPU device code the fast variant of gelu_math.h *is* the precise one (there is no
// hardware tanh to call), so the twin instantiates the loops once and accepts `fast` only to
// keep the operator signatures identical to the CUDA ones.
constexpr bool kFast = false;

template <typename T>
struct MathType {
  using type = float;
};
template <>
struct MathType<double> {
  using type = double;
};

template <typename T, bool Backward, bool Bias>
void cpu_loop(const T* x, const T* dy, const T* b, T* out, int64_t n, int64_t bias_len) {
  using F = typename MathType<T>::type;
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    int64_t col = Bias ? begin % bias_len : 0;
    for (int64_t i = begin; i < end; ++i) {
      F h = static_cast<F>(x[i]);
      if (Bias) {
        h += static_cast<F>(b[col]);
        if (++col == bias_len) {
          col = 0;
        }
      }
      const F r = Backward ? gelu_backward<kFast>(static_cast<F>(dy[i]), h) : gelu_forward<kFast>(h);
      out[i] = static_cast<T>(r);
    }
  });
}

template <bool Backward, bool Bias>
at::Tensor run(const at::Tensor& x_in, const at::Tensor* dy_in, const at::Tensor* b_in) {
  // Any strides in, dense memory inside: .contiguous() copies only when it has to.
  const at::Tensor x = x_in.contiguous();
  const at::Tensor dy = Backward ? dy_in->contiguous() : at::Tensor();
  const at::Tensor b = Bias ? b_in->contiguous() : at::Tensor();
  // new_empty (a Tensor method) instead of at::empty_like: its header drags in ATen/Context.h
  // and a second of compile time.
  at::Tensor out = x.new_empty(x.sizes());
  const int64_t n = x.numel();
  if (n == 0) {
    return out;
  }
  const int64_t bias_len = Bias ? b.numel() : 1;

#define ANDREA_CPU_CASE(ST, T)                                                              \
  case ST: {                                                                                \
    const T* xp = x.const_data_ptr<T>();                                                    \
    const T* dyp = Backward ? dy.const_data_ptr<T>() : nullptr;                             \
    const T* bp = Bias ? b.const_data_ptr<T>() : nullptr;                                   \
    T* op = out.mutable_data_ptr<T>();                                                      \
    cpu_loop<T, Backward, Bias>(xp, dyp, bp, op, n, bias_len);                              \
    break;                                                                                  \
  }

  switch (x.scalar_type()) {
    ANDREA_CPU_CASE(at::kFloat, float)
    ANDREA_CPU_CASE(at::kDouble, double)
    ANDREA_CPU_CASE(at::kHalf, c10::Half)
    ANDREA_CPU_CASE(at::kBFloat16, c10::BFloat16)
    default:
      TORCH_CHECK_TYPE(false, "unsupported dtype ", x.scalar_type());
  }
#undef ANDREA_CPU_CASE
  return out;
}

at::Tensor gelu_fwd_cpu(const at::Tensor& x, bool /*fast*/) {
  check_input(x, "gelu_fwd", "x", true);
  return run<false, false>(x, nullptr, nullptr);
}

at::Tensor gelu_bwd_cpu(const at::Tensor& dy, const at::Tensor& x, bool /*fast*/) {
  check_input(x, "gelu_bwd", "x", true);
  check_like(dy, "dy", x, "gelu_bwd");
  return run<true, false>(x, &dy, nullptr);
}

at::Tensor bias_gelu_fwd_cpu(const at::Tensor& x, const at::Tensor& b, bool /*fast*/) {
  check_input(x, "bias_gelu_fwd", "x", true);
  check_bias(b, x, "bias_gelu_fwd");
  return run<false, true>(x, nullptr, &b);
}

at::Tensor bias_gelu_bwd_cpu(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& b,
                             bool /*fast*/) {
  check_input(x, "bias_gelu_bwd", "x", true);
  check_like(dy, "dy", x, "bias_gelu_bwd");
  check_bias(b, x, "bias_gelu_bwd");
  return run<true, true>(x, &dy, &b);
}

}  // namespace
}  // namespace andrea

ANDREA_TORCH_LIBRARY(ANDREA_OPS_NS, m) {
  m.def(andrea::kSchemaGeluFwd);
  m.def(andrea::kSchemaGeluBwd);
  m.def(andrea::kSchemaBiasGeluFwd);
  m.def(andrea::kSchemaBiasGeluBwd);
}

ANDREA_TORCH_LIBRARY_IMPL(ANDREA_OPS_NS, CPU, m) {
  m.impl("gelu_fwd", &andrea::gelu_fwd_cpu);
  m.impl("gelu_bwd", &andrea::gelu_bwd_cpu);
  m.impl("bias_gelu_fwd", &andrea::bias_gelu_fwd_cpu);
  m.impl("bias_gelu_bwd", &andrea::bias_gelu_bwd_cpu);
}
