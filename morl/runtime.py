"""Where torch runs: the device a stage asks for and the number of threads it computes with (the
floating-point mode of its CPU threads is :mod:`morl.cpu`'s)."""

from __future__ import annotations

import contextlib

import torch

from morl.errors import InputError


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA if available, else CPU; an explicit CUDA device must be available."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InputError(f"invalid device {device!r} ({exc})") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {device!r} requested but CUDA is not available")
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"unsupported device {device!r}; use 'auto', 'cpu' or 'cuda[:i]'")
    return dev


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block with ``n`` torch threads, then restore the caller's count."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
