"""Shipped behavior policies: every check that runs before a config that uses one may start."""

from __future__ import annotations

import shutil

import pytest
import torch

from morl import shipped
from morl.behavior import Behavior, BehaviorPolicy, PopulationPolicy, load_behavior, pgmorl
from morl.behavior.td3 import Actor
from morl.config import ConfigError, behavior_settings, validate_config
from morl.data import file_sha256
from morl.errors import InputError
from morl.shipped import check_shipped_policy
from morl.torch_io import load_torch, save_torch

ENV = "MO-HalfCheetah-v2"


def write_sums(folder):
    lines = [f"{file_sha256(p)}  {p.name}" for p in sorted(folder.glob("*.pt"))]
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")


@pytest.fixture
def folder(tmp_path, tiny_policy):
    d = tmp_path / "behaviors"
    d.mkdir()
    shutil.copy(tiny_policy, d / f"{ENV}.pt")
    write_sums(d)
    return d


def relabelled(src, dest, **changes):
    """A self-consistent behavior checkpoint like ``src`` with other metadata (and an actor that fits it)."""
    st = load_torch(src)
    st.update(changes)
    actor = Actor(
        st["obs_dim"], st["act_dim"], st["n_obj"], st["hidden"], [-1.0] * st["act_dim"], [1.0] * st["act_dim"]
    )
    st["act_low"], st["act_high"] = [-1.0] * st["act_dim"], [1.0] * st["act_dim"]
    st["pref_low"], st["pref_high"] = [0.0] * st["n_obj"], [1.0] * st["n_obj"]
    st["actor"] = actor.state_dict()
    save_torch(dest, st)
    return dest


def test_a_listed_policy_of_the_env_is_accepted(folder):
    path = check_shipped_policy(ENV, folder)
    assert path == folder / f"{ENV}.pt"
    assert BehaviorPolicy(path).env_id == ENV
    assert torch.load(path, weights_only=True)["env_id"] == ENV  # the format a user can load by hand


def test_every_mismatch_is_refused_naming_the_file(folder):
    path = folder / f"{ENV}.pt"
    with pytest.raises(
        InputError, match=rf"MO-Hopper-v3: no shipped behavior policy; expected {folder}/MO-Hopper-v3.pt"
    ):
        check_shipped_policy("MO-Hopper-v3", folder)

    original = path.read_bytes()
    path.write_bytes(original + b"\0")  # changed after it was listed
    with pytest.raises(InputError, match=rf"{path}: sha256 \w{{12}} differs from the \w{{12}} listed in .*SHA256SUMS"):
        check_shipped_policy(ENV, folder)
    path.write_bytes(original)

    walker = folder / "MO-Walker2d-v2.pt"  # the HalfCheetah policy under Walker2d's name (same sizes)
    shutil.copy(path, walker)
    write_sums(folder)
    with pytest.raises(InputError, match=rf"{walker}: checkpoint is for env '{ENV}', not 'MO-Walker2d-v2'"):
        check_shipped_policy("MO-Walker2d-v2", folder)

    relabelled(path, path, obs_dim=18)  # a model of another observation size
    write_sums(folder)
    with pytest.raises(InputError, match=rf"{path}: the policy takes 18 observations and 2 objectives and gives 6 "
                                         rf"actions, but {ENV} has 17, 2 and 6"):  # fmt: skip
        check_shipped_policy(ENV, folder)

    hopper = relabelled(path, folder / "MO-Hopper-v2.pt", env_id="MO-Hopper-v2", obs_dim=11, act_dim=3,
                        physics_version=1)  # fmt: skip
    write_sums(folder)
    with pytest.raises(
        InputError, match=rf"{hopper}: behavior checkpoint made under physics version 1 of MO-Hopper-v2"
    ):
        check_shipped_policy("MO-Hopper-v2", folder)

    (folder / "SHA256SUMS").write_text("")
    with pytest.raises(InputError, match=rf"{path}: not listed in {folder}/SHA256SUMS"):
        check_shipped_policy(ENV, folder)
    (folder / "SHA256SUMS").write_text("not a checksum line\n")
    with pytest.raises(InputError, match=r"SHA256SUMS: line 1 is not '<sha256>  <file name>'"):
        check_shipped_policy(ENV, folder)
    (folder / "SHA256SUMS").unlink()
    with pytest.raises(InputError, match=r"SHA256SUMS: checksum list not found"):
        check_shipped_policy(ENV, folder)


def test_config_key_is_checked_when_the_config_is_validated(config, folder, monkeypatch):
    """``behavior.shipped`` for all envs or, through an override, for some; a missing file is named
    with its env and path before any job runs."""
    monkeypatch.setattr(shipped, "SHIPPED_DIR", folder)
    config["envs"] = [ENV]
    config["behavior"]["shipped"] = True
    validate_config(config, "c.yaml")
    assert behavior_settings(config, ENV)["shipped"] is True

    config["envs"] = [ENV, "MO-Hopper-v3"]
    with pytest.raises(ConfigError, match=rf"c.yaml: behavior.shipped: MO-Hopper-v3: no shipped behavior policy; "
                                          rf"expected {folder}/MO-Hopper-v3.pt"):  # fmt: skip
        validate_config(config, "c.yaml")
    config["behavior"]["shipped"] = False
    config["behavior"]["overrides"] = [{"envs": [ENV], "shipped": True}]
    validate_config(config, "c.yaml")
    assert behavior_settings(config, ENV)["shipped"] and not behavior_settings(config, "MO-Hopper-v3")["shipped"]
    del config["behavior"]["shipped"]  # optional; training one is the default
    config["behavior"]["overrides"] = []
    validate_config(config, "c.yaml")
    assert behavior_settings(config, ENV)["shipped"] is False


def test_a_retired_policy_is_found_by_its_hash(config, folder, monkeypatch):
    """A study pinned to the policy it was made from (``shipped: <sha256>``) keeps collecting with that
    file after a better one ships and the old one moves to retired/; any other hash is refused."""
    monkeypatch.setattr(shipped, "SHIPPED_DIR", folder)
    old = folder / f"{ENV}.pt"
    old_sha = file_sha256(old)
    assert check_shipped_policy(ENV, folder, which=old_sha) == old  # still the shipped one
    (folder / "retired").mkdir()
    retired = folder / "retired" / f"{ENV}.td3.{old_sha[:12]}.pt"
    shutil.move(old, retired)
    relabelled(retired, old)  # the new shipped policy: other weights, another hash
    write_sums(folder)
    write_sums(folder / "retired")
    assert file_sha256(old) != old_sha
    assert check_shipped_policy(ENV, folder) == old
    assert check_shipped_policy(ENV, folder, which=old_sha) == retired
    assert check_shipped_policy(ENV, folder, which=old_sha.upper()) == retired
    assert check_shipped_policy(ENV, folder, which=file_sha256(old)) == old
    with pytest.raises(InputError, match=rf"MO-Hopper-v3: no shipped or retired behavior policy has sha256 {old_sha}"):
        check_shipped_policy("MO-Hopper-v3", folder, which=old_sha)  # the hash of another env's file

    config["envs"] = [ENV]
    config["behavior"]["shipped"] = False
    config["behavior"]["overrides"] = [{"envs": [ENV], "shipped": old_sha}]
    validate_config(config, "c.yaml")
    assert behavior_settings(config, ENV)["shipped"] == old_sha
    config["behavior"]["overrides"] = [{"envs": [ENV], "shipped": "0" * 64}]
    with pytest.raises(ConfigError, match=rf"c.yaml: behavior.shipped: {ENV}: no shipped or retired behavior policy "
                                          rf"has sha256 0{{64}}"):  # fmt: skip
        validate_config(config, "c.yaml")
    config["behavior"]["overrides"] = [{"envs": [ENV], "shipped": old_sha[:12]}]
    with pytest.raises(
        ConfigError, match=r"c.yaml: invalid config:\s+behavior.overrides\[0\].shipped: '\w{12}' does not match"
    ):
        validate_config(config, "c.yaml")


# ----------------------------------------------------------------------------- the files that ship
SHIPPED = sorted(p.stem for p in shipped.SHIPPED_DIR.glob("*.pt"))


@pytest.mark.parametrize("env_id", SHIPPED)
def test_every_shipped_policy_passes_its_checks_and_its_card_is_true(env_id):
    path = check_shipped_policy(env_id)
    state = torch.load(path, weights_only=True)
    # a TD3 actor is a few hundred kB; a PGMORL population holds its whole archive
    assert path.stat().st_size < (10 if state.get("method") == "pgmorl" else 2) * 1024 * 1024
    assert state["env_id"] == env_id and "agent" not in state  # the actor only, no training state
    card = (shipped.SHIPPED_DIR / "README.md").read_text()
    assert file_sha256(path) in card, f"behaviors/README.md does not give the SHA-256 of {path.name}"
    policy = load_behavior(path, expect_env=env_id)  # the class its kind names, with the one interface
    assert isinstance(policy, PopulationPolicy if state["kind"] == pgmorl.KIND else BehaviorPolicy)
    assert isinstance(policy, Behavior)


RETIRED = sorted((shipped.SHIPPED_DIR / shipped.RETIRED).glob("*.pt"))


@pytest.mark.parametrize("path", RETIRED, ids=lambda p: p.name)
def test_every_retired_policy_is_found_by_its_hash_and_listed_in_the_card(path):
    """A retired file stays usable by its SHA-256 (a study pinned to it reruns on the same data), its
    name says its env, method and hash, and behaviors/README.md lists it."""
    env_id, method, short = path.name.removesuffix(".pt").rsplit(".", 2)
    sha = file_sha256(path)
    assert sha.startswith(short)
    assert check_shipped_policy(env_id, which=sha) == path
    assert torch.load(path, weights_only=True).get("method", "td3") == method
    assert f"`{path.name}`" in (shipped.SHIPPED_DIR / "README.md").read_text()


@pytest.mark.parametrize("env_id", SHIPPED)
def test_every_shipped_population_was_trained_with_the_settings_configs_paper_gives_its_env(env_id):
    """`morl behavior --config configs/paper.yaml --env ENV` is how behaviors/README.md says each
    population was made: the config must still give exactly the settings the file records."""
    from pathlib import Path

    from morl.config import load_config

    state = torch.load(shipped.SHIPPED_DIR / f"{env_id}.pt", weights_only=True)
    if state.get("kind") != pgmorl.KIND:
        pytest.skip(f"{env_id} ships a TD3 actor, not a population")
    config = load_config(Path(__file__).resolve().parent.parent / "configs" / "paper.yaml")
    settings = behavior_settings(config, env_id)
    assert settings["method"] == "pgmorl"
    assert vars(pgmorl.PGMORLSettings.from_config(settings["pgmorl"])) == state["settings"]


def test_a_config_with_shipped_policies_trains_none_and_collects_from_them(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    config = yaml.safe_load((root / "configs/smoke.yaml").read_text())
    config["envs"] = SHIPPED
    config["behavior"]["shipped"] = True
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    res = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "-n",
                          "--configfile", "c.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert "rule behavior:" not in out and "rule behavior_front:" in out
    for env_id in SHIPPED:
        assert f"input: {shipped.SHIPPED_DIR / (env_id + '.pt')}" in out


def test_a_cut_short_or_damaged_checkpoint_is_named_as_such(tmp_path):
    """torch's reader neither says a file is cut short nor checks CRCs: a file zeroed inside its
    tensor data loaded with other weights. Both are refused, naming the file and the damage."""
    src = shipped.SHIPPED_DIR / "MO-Hopper-v2.pt"
    data = src.read_bytes()
    cases = {
        "empty.pt": (b"", "the file is empty"),
        "cut.pt": (data[: len(data) // 2], "it starts like a torch checkpoint but is cut short or damaged"),
        "zeroed.pt": (
            data[:20000] + bytes(1000) + data[21000:],
            r"its entry '\S+' fails its CRC-32 check, so the file was changed",
        ),
    }
    for name, (content, problem) in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(InputError, match=rf"{path}: not a readable behavior checkpoint: {problem}"):
            load_behavior(path)
