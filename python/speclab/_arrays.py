"""Argument handling shared by the speclab package: arrays are borrowed, never copied, when they
already are C-contiguous float32 or int32 on the CPU (numpy arrays, or torch CPU tensors through
DLPack or the buffer protocol); other real dtypes are converted with a CopyWarning; anything else
raises ValueError naming the argument."""

import warnings

import numpy as np


class CopyWarning(UserWarning):
    """An argument had to be copied (converted to float32/int32 or made C-contiguous)."""


def as_array(x, name, dtype, dims, allow_none=False):
    """x as a C-contiguous numpy array of `dtype` with len(dims) dimensions, without a copy when
    it already is one. `dims` names the dimensions for messages, e.g. ("B", "γ+1", "V")."""
    if x is None:
        if allow_none:
            return None
        raise ValueError(f"{name} is None; expected an array of shape [{', '.join(dims)}]")
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__"):
            try:
                x = np.from_dlpack(x)
            except (TypeError, RuntimeError, BufferError, ValueError) as e:
                raise ValueError(
                    f"{name} cannot be read on the CPU without a copy ({e}); expected a CPU "
                    "array or tensor (call .detach().cpu() on a torch tensor)") from None
        else:
            try:
                x = np.asarray(x)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{name} is not an array ({e})") from None
    dtype = np.dtype(dtype)
    if x.ndim != len(dims):
        raise ValueError(
            f"{name} has shape {list(x.shape)}; expected {len(dims)} dimensions "
            f"[{', '.join(dims)}]")
    if x.dtype != dtype:
        floating = dtype.kind == "f"
        if floating and x.dtype.kind == "f":
            pass
        elif not floating and x.dtype.kind in "iu":
            if x.size and (x.min() < np.iinfo(dtype).min or x.max() > np.iinfo(dtype).max):
                raise ValueError(
                    f"{name} holds values outside {dtype} (min {x.min()}, max {x.max()})")
        else:
            raise ValueError(f"{name} has dtype {x.dtype}; expected {dtype}")
        warnings.warn(f"{name}: converting {x.dtype} to {dtype} (a copy); pass {dtype} to "
                      "avoid it", CopyWarning, stacklevel=3)
        x = x.astype(dtype)
    if not x.flags.c_contiguous:
        warnings.warn(f"{name} is not C-contiguous; copying it", CopyWarning, stacklevel=3)
        x = np.ascontiguousarray(x)
    return x


def check_shape(x, name, expected, dims, reference_name, reference_shape):
    """Raises ValueError unless x.shape == expected, naming both arrays' shapes."""
    if x is not None and tuple(x.shape) != tuple(expected):
        raise ValueError(
            f"{name} has shape {list(x.shape)}; expected [{', '.join(dims)}] = {list(expected)} "
            f"to agree with {reference_name} shape {list(reference_shape)}")


def check_uint(value, name, bits):
    """value as a Python int in [0, 2**bits), else ValueError."""
    try:
        ivalue = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} is {value!r}; expected an integer") from None
    if ivalue != value or not 0 <= ivalue < 2**bits:
        raise ValueError(f"{name} is {value!r}; expected an integer in [0, 2^{bits})")
    return ivalue
