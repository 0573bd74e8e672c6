// gelu_ops.h: what the CPU twin (gelu_cpu.cpp) and the CUDA binding (gelu_binding.cpp) share:
// the operator namespace, the operator schemas and the argument checks.
//
// The operators are registered with the PyTorch dispatcher (TORCH_LIBRARY) rather than as a
// pybind11 module: the binding then needs only <ATen/core/Tensor.h> and <torch/library.h>,
// which compile in about a quarter of the time of <torch/extension.h>, and Python reaches
// the operators as torch.ops.<namespace>.<name>.
//
// Operators (all return new, contiguous tensors; inputs may have any strides):
//   gelu_fwd(x, fast)               -> gelu(x)
//   gelu_bwd(dy, x, fast)           -> dy * gelu'(x)
//   bias_gelu_fwd(x, b, fast)       -> gelu(x + b), b broadcast along the last dimension
//   bias_gelu_bwd(dy, x, b, fast)   -> dy * gelu'(x + b)   (the bias gradient is dx summed
//                                      over the leading dimensions; the caller does it)
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>

// The loader passes a namespace that is unique to each build (it contains a hash of the
// sources), so two builds never try to register the same names in one process.
#ifndef ANDREA_OPS_NS
#define ANDREA_OPS_NS andrea_gelu
#endif

// One level of indirection so that ANDREA_OPS_NS is expanded before TORCH_LIBRARY pastes it.
#define ANDREA_TORCH_LIBRARY(ns, m) TORCH_LIBRARY(ns, m)
#define ANDREA_TORCH_LIBRARY_IMPL(ns, key, m) TORCH_LIBRARY_IMPL(ns, key, m)

namespace andrea {

inline const char* kSchemaGeluFwd = "gelu_fwd(Tensor x, bool fast) -> Tensor";
inline const char* kSchemaGeluBwd = "gelu_bwd(Tensor dy, Tensor x, bool fast) -> Tensor";
inline const char* kSchemaBiasGeluFwd = "bias_gelu_fwd(Tensor x, Tensor b, bool fast) -> Tensor";
inline const char* kSchemaBiasGeluBwd =
    "bias_gelu_bwd(Tensor dy, Tensor x, Tensor b, bool fast) -> Tensor";

// x: a floating tensor of a supported dtype (TypeError otherwise).
inline void check_input(const at::Tensor& t, const char* op, const char* name, bool allow_double) {
  TORCH_CHECK_TYPE(t.defined(), op, ": argument '", name, "' is an undefined tensor");
  const auto st = t.scalar_type();
  const bool ok = st == at::kFloat || st == at::kHalf || st == at::kBFloat16 ||
                  (allow_double && st == at::kDouble);
  TORCH_CHECK_TYPE(ok, op, ": argument '", name, "' must have dtype ",
                   allow_double ? "float32, float64, float16 or bfloat16"
                                : "float32, float16 or bfloat16",
                   ", got ", st);
}

// other must match x in dtype (TypeError), device and shape (ValueError).
inline void check_like(const at::Tensor& other, const char* other_name, const at::Tensor& x,
                       const char* op) {
  TORCH_CHECK_TYPE(other.defined(), op, ": argument '", other_name, "' is an undefined tensor");
  TORCH_CHECK_TYPE(other.scalar_type() == x.scalar_type(), op, ": argument '", other_name,
                   "' must have the dtype of x (", x.scalar_type(), "), got ",
                   other.scalar_type());
  TORCH_CHECK_VALUE(other.device() == x.device(), op, ": argument '", other_name,
                    "' must be on the device of x (", x.device(), "), got ", other.device());
  TORCH_CHECK_VALUE(other.sizes() == x.sizes(), op, ": argument '", other_name,
                    "' must have the shape of x ", x.sizes(), ", got ", other.sizes());
}

// b: a 1-D bias with one entry per element of x's last dimension.
inline void check_bias(const at::Tensor& b, const at::Tensor& x, const char* op) {
  TORCH_CHECK_TYPE(b.defined(), op, ": argument 'b' is an undefined tensor");
  TORCH_CHECK_VALUE(x.dim() >= 1, op, ": argument 'x' must have at least 1 dimension, got a ",
                    "0-d tensor");
  TORCH_CHECK_TYPE(b.scalar_type() == x.scalar_type(), op,
                   ": argument 'b' must have the dtype of x (", x.scalar_type(), "), got ",
                   b.scalar_type());
  TORCH_CHECK_VALUE(b.device() == x.device(), op, ": argument 'b' must be on the device of x (",
                    x.device(), "), got ", b.device());
  TORCH_CHECK_VALUE(b.dim() == 1 && b.size(0) == x.size(-1), op,
                    ": argument 'b' must have shape [", x.size(-1),
                    "] (the last dimension of x), got ", b.sizes());
}

}  // namespace andrea
