// gelu_binding.cpp: the thin layer between torch tensors and the launchers of gelu_kernels.h.
//
// For each operator it checks the arguments (dtype, device, shape; errors name the argument),
// makes the inputs contiguous (a strided view is copied, never read with the wrong strides),
// allocates the output, makes the input's GPU the current device for the launch, and
// launches on the current CUDA stream so the kernels order correctly with the rest of torch.
// The operator schemas are defined in gelu_cpu.cpp, which every build compiles; this file
// adds the CUDA implementations.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "gelu_kernels.h"
#include "gelu_ops.h"

namespace andrea {
namespace {

AndreaDType to_andrea_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return ANDREA_FLOAT32;
    case at::kHalf:
      return ANDREA_FLOAT16;
    case at::kBFloat16:
      return ANDREA_BFLOAT16;
    default:
      TORCH_CHECK_TYPE(false, "the CUDA GELU kernels take float32, float16 or bfloat16, got ",
                       t.scalar_type());
  }
}

void check_cuda(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK_VALUE(t.is_cuda(), op, ": argument '", name, "' must be a CUDA tensor, got ",
                    t.device());
}

void check_launch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": kernel launch failed: ", cudaGetErrorString(err));
}

at::Tensor gelu_fwd_cuda(const at::Tensor& x_in, bool fast) {
  check_input(x_in, "gelu_fwd", "x", false);
  check_cuda(x_in, "gelu_fwd", "x");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor y = x.new_empty(x.sizes());
  if (x.numel() == 0) {
    return y;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  check_launch(andrea_gelu_forward(to_andrea_dtype(x), x.const_data_ptr(), y.mutable_data_ptr(),
                                   x.numel(), fast, stream),
               "gelu_fwd");
  return y;
}

at::Tensor gelu_bwd_cuda(const at::Tensor& dy_in, const at::Tensor& x_in, bool fast) {
  check_input(x_in, "gelu_bwd", "x", false);
  check_cuda(x_in, "gelu_bwd", "x");
  check_like(dy_in, "dy", x_in, "gelu_bwd");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  const at::Tensor dy = dy_in.contiguous();
  at::Tensor dx = x.new_empty(x.sizes());
  if (x.numel() == 0) {
    return dx;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  check_launch(andrea_gelu_backward(to_andrea_dtype(x), dy.const_data_ptr(), x.const_data_ptr(),
                                    dx.mutable_data_ptr(), x.numel(), fast, stream),
               "gelu_bwd");
  return dx;
}

at::Tensor bias_gelu_fwd_cuda(const at::Tensor& x_in, const at::Tensor& b_in, bool fast) {
  check_input(x_in, "bias_gelu_fwd", "x", false);
  check_cuda(x_in, "bias_gelu_fwd", "x");
  check_bias(b_in, x_in, "bias_gelu_fwd");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  const at::Tensor b = b_in.contiguous();
  at::Tensor y = x.new_empty(x.sizes());
  if (x.numel() == 0) {
    return y;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  check_launch(andrea_bias_gelu_forward(to_andrea_dtype(x), x.const_data_ptr(), b.const_data_ptr(),
                                        y.mutable_data_ptr(), x.numel(), b.numel(), fast, stream),
               "bias_gelu_fwd");
  return y;
}

// Returns dx only. The bias gradient, dx summed over the leading dimensions, is left to the
// caller (andrea_ref/kernels/autograd.py uses torch's sum): the backward already moves three
// tensors; the sum reads dx once more, and torch's reduction is deterministic and accumulates
// low-precision inputs in fp32, where a fused reduction here would need atomics (run-to-run
// differences) or a second pass of its own.
at::Tensor bias_gelu_bwd_cuda(const at::Tensor& dy_in, const at::Tensor& x_in,
                              const at::Tensor& b_in, bool fast) {
  check_input(x_in, "bias_gelu_bwd", "x", false);
  check_cuda(x_in, "bias_gelu_bwd", "x");
  check_like(dy_in, "dy", x_in, "bias_gelu_bwd");
  check_bias(b_in, x_in, "bias_gelu_bwd");
  const c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  const at::Tensor dy = dy_in.contiguous();
  const at::Tensor b = b_in.contiguous();
  at::Tensor dx = x.new_empty(x.sizes());
  if (x.numel() == 0) {
    return dx;
  }
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  check_launch(andrea_bias_gelu_backward(to_andrea_dtype(x), dy.const_data_ptr(),
                                         x.const_data_ptr(), b.const_data_ptr(),
                                         dx.mutable_data_ptr(), x.numel(), b.numel(), fast,
                                         stream),
               "bias_gelu_bwd");
  return dx;
}

}  // namespace
}  // namespace andrea

ANDREA_TORCH_LIBRARY_IMPL(ANDREA_OPS_NS, CUDA, m) {
  m.impl("gelu_fwd", &andrea::gelu_fwd_cuda);
  m.impl("gelu_bwd", &andrea::gelu_bwd_cuda);
  m.impl("bias_gelu_fwd", &andrea::bias_gelu_fwd_cuda);
  m.impl("bias_gelu_bwd", &andrea::bias_gelu_bwd_cuda);
}
