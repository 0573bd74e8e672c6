"""PyTorch's and Python's functions as they were when the grading package was imported.

The notebooks import the package in their first, locked cell, before any learner code
has run, so code that later rebinds ``torch.abs`` or ``builtins.isinstance`` changes
nothing the checks compute or compare with. The modules of the package import these
under their own (private) names, which binds the objects themselves: rebinding a name
of this module afterwards changes nothing they call either.
"""
from __future__ import annotations

import builtins
import os
import string

import torch

Tensor = torch.Tensor
TensorBase = torch._C.TensorBase
VF = torch._C._VariableFunctions
float64 = torch.float64
finfo = torch.finfo
LegacyStorage = torch.storage._LegacyStorage
get_default_dtype = torch.get_default_dtype
get_num_threads = torch.get_num_threads
set_num_threads = torch.set_num_threads

# the builtins the checks use on objects a learner's function returned
type_ = builtins.type
isinstance_ = builtins.isinstance
issubclass_ = builtins.issubclass
callable_ = builtins.callable
getattr_ = builtins.getattr
float_ = builtins.float
str_ = builtins.str
sorted_ = builtins.sorted
format_ = builtins.format
Exception_ = builtins.Exception
parse_format = string.Formatter().parse

# tensor functions
abs_f = VF.abs
sub = VF.sub
mul = VF.mul
add = VF.add
div = VF.div
gt = VF.gt
le = VF.le
eq = VF.eq
isnan = VF.isnan
isfinite = VF.isfinite
logical_and = VF.logical_and
logical_or = VF.logical_or
logical_not = VF.logical_not
any_ = VF.any
all_ = VF.all
amax = VF.amax
mean = VF.mean
equal = VF.equal
zeros_like = VF.zeros_like
argmax = VF.argmax
where = VF.where
full_like = VF.full_like

# tensor methods
item = TensorBase.item
to = TensorBase.to
detach = TensorBase.detach
clone = TensorBase.clone
reshape = TensorBase.reshape
numel = TensorBase.numel
is_floating = TensorBase.is_floating_point

# where PyTorch's Python files and this package's lie
TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
