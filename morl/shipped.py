"""The behavior policies that ship with the project: ``behaviors/<env-id>.pt``.

Each file is a final behavior checkpoint (the actor and what it was trained on, loadable with
``torch.load(..., weights_only=True)``), listed with its SHA-256 in ``behaviors/SHA256SUMS`` (the
format ``sha256sum`` writes and ``sha256sum -c`` checks). ``behaviors/README.md`` says how each was
trained and how good it is. With ``behavior.shipped: true`` in a config (for every env, or for
some through ``behavior.overrides``) the workflow collects data with the shipped policy of an env
instead of training one; :func:`check_shipped_policy` runs when the config is validated, before
any job.

A policy replaced by a better one moves to ``behaviors/retired/`` (listed in its own
``SHA256SUMS``), so a study made from it stays reproducible: ``behavior.shipped: <its SHA-256>``
collects with exactly that file, whether it still ships or was retired.
"""

from __future__ import annotations

import os
from pathlib import Path

from morl.behavior import load_behavior
from morl.data import file_sha256
from morl.envs import get_spec
from morl.errors import InputError

#: The folder of the shipped policies, beside the package in a checkout.
SHIPPED_DIR = Path(__file__).resolve().parent.parent / "behaviors"
CHECKSUMS = "SHA256SUMS"
#: The folder, under the shipped ones, of the policies that shipped before the current ones.
RETIRED = "retired"


def shipped_policy_path(env_id: str, directory: str | os.PathLike | None = None, which: bool | str = True) -> Path:
    """``<directory>/<env-id>.pt`` (``which`` true: the policy that ships now), or, with ``which`` a
    SHA-256, the file of ``env_id`` that the shipped or the retired checksum list gives that hash."""
    root = Path(SHIPPED_DIR if directory is None else directory)
    if not isinstance(which, str):
        return root / f"{env_id}.pt"
    for folder in (root, root / RETIRED):
        if not (folder / CHECKSUMS).is_file():
            continue
        for name, digest in listed_checksums(folder).items():
            if digest == which.lower() and (name == f"{env_id}.pt" or name.startswith(f"{env_id}.")):
                return folder / name
    raise InputError(
        f"{env_id}: no shipped or retired behavior policy has sha256 {which} "
        f"(the lists: {root / CHECKSUMS}, {root / RETIRED / CHECKSUMS})"
    )


def listed_checksums(directory: str | os.PathLike | None = None) -> dict[str, str]:
    """File name -> SHA-256 as ``SHA256SUMS`` lists them."""
    path = Path(SHIPPED_DIR if directory is None else directory) / CHECKSUMS
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: checksum list not found; the shipped policies cannot be verified") from None
    sums = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or len(parts[0]) != 64:
            raise InputError(f"{path}: line {i} is not '<sha256>  <file name>'")
        sums[parts[1].lstrip("*")] = parts[0].lower()
    return sums


def check_shipped_policy(env_id: str, directory: str | os.PathLike | None = None, which: bool | str = True) -> Path:
    """The path of ``env_id``'s shipped policy (``which``: as :func:`shipped_policy_path` takes it),
    after checking it; :class:`InputError` names the file.

    Checked: the file exists; its SHA-256 is the one its folder's ``SHA256SUMS`` lists; it is a
    behavior checkpoint of ``env_id`` under the physics this morl simulates; its observation, action
    and objective sizes are the env's.
    """
    path = shipped_policy_path(env_id, directory, which)
    if not path.is_file():
        raise InputError(f"{env_id}: no shipped behavior policy; expected {path}")
    expected = listed_checksums(path.parent).get(path.name)
    if expected is None:
        raise InputError(f"{path}: not listed in {path.parent / CHECKSUMS}, so it cannot be verified")
    actual = file_sha256(path)
    if actual != expected:
        raise InputError(
            f"{path}: sha256 {actual[:12]} differs from the {expected[:12]} listed in "
            f"{path.parent / CHECKSUMS}; the file was changed or damaged"
        )
    policy = load_behavior(path, expect_env=env_id)
    spec = get_spec(env_id)
    have = (policy.obs_dim, policy.act_dim, policy.n_obj)
    want = (spec.obs_dim, spec.act_dim, spec.n_obj)
    if have != want:
        raise InputError(
            f"{path}: the policy takes {have[0]} observations and {have[2]} objectives and gives "
            f"{have[1]} actions, but {env_id} has {want[0]}, {want[2]} and {want[1]}"
        )
    return path
