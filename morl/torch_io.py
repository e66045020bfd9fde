"""Torch checkpoint files: the same bytes for the same contents, and only safe loads.

:func:`save_torch` writes through a file object. ``torch.save`` given a path names the zip
archive's root folder after that file, and the atomic write's temporary file has a random name,
so the bytes (and every ``*_sha256`` recorded downstream) would change from run to run; given a
file object, the root folder is always ``archive``.

:func:`load_torch` loads with ``weights_only=True``, which refuses any Python global outside
torch's allowlist. A file it refuses is reported as not a safe checkpoint, naming the refused
global; torch's own message, which suggests loading the file unsafely, is not passed on.
"""

from __future__ import annotations

import io
import os
import pickle
import re
import zipfile
from typing import Any

import torch

from morl.data import atomic_write
from morl.errors import InputError


class TorchFileError(InputError):
    """A torch file is missing, unreadable or refused by the safe loader; the message names it."""

    def __init__(self, path: os.PathLike | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def save_torch(path: os.PathLike | str, obj: Any) -> None:
    """``torch.save(obj)`` to ``path`` atomically; the same ``obj`` gives the same bytes."""

    # Serialised in memory first: torch's archive writer turns a failed write (a full disk) into
    # "RuntimeError: [enforce fail at inline_container.cc]", which names neither the file nor the
    # cause; a plain file write raises an OSError that atomic_write reports with the path.
    buffer = io.BytesIO()
    torch.save(obj, buffer)

    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(buffer.getbuffer())

    atomic_write(path, write)


def load_torch(path: os.PathLike | str, what: str = "torch checkpoint") -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU.

    Raises :class:`TorchFileError`: "not a safe checkpoint" with the refused global for a file that
    needs code outside torch's allowlist, "not a readable <what>" for any other failure.
    """
    _check_container(path, what)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError, ...
        raise TorchFileError(path, _load_failure(exc, what)) from exc


def _check_container(path: os.PathLike | str, what: str) -> None:
    """A torch file is a zip archive; torch's reader neither says that a cut-short file is cut
    short nor checks the entries' CRC-32, so a file damaged inside its tensor data would load with
    other weights. Both are checked here first (a few milliseconds for a checkpoint)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return  # torch.load reports a missing or unreadable file with its own message
    if not head:
        raise TorchFileError(path, f"not a readable {what}: the file is empty")
    if head != b"PK\x03\x04":
        return  # not a zip archive (an old-style pickle, or not a checkpoint): torch.load decides
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise TorchFileError(
            path, f"not a readable {what}: it starts like a torch checkpoint but is cut short or damaged ({exc})"
        ) from None
    if bad is not None:
        raise TorchFileError(
            path,
            f"not a readable {what}: its entry {bad!r} fails its CRC-32 check, so the file "
            "was changed or damaged after it was written",
        )


def _load_failure(exc: Exception, what: str) -> str:
    text = str(exc)
    if isinstance(exc, pickle.UnpicklingError) and "Weights only load failed" in text:
        name = re.search(r"GLOBAL ([\w.]+)", text)
        if name:
            return (
                f"not a safe checkpoint: it needs the Python global {name.group(1)!r}, which torch's safe loader "
                "refused; a morl checkpoint holds only plain types and tensors, so the file was not loaded"
            )
        opcode = re.search(r"Unsupported operand (\d+)", text)
        why = f"pickle opcode {opcode.group(1)}" if opcode else "its contents"
        return (
            f"not a readable {what}, and not a safe checkpoint: torch's safe loader refused {why} (the file is "
            "damaged, or holds other objects than plain types and tensors)"
        )
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"not a readable {what} ({lines[0] if lines else type(exc).__name__})"
