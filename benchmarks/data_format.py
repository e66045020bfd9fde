"""The Parquet dataset format against D4MORL's pickles: file size, load time, peak memory.

For each requested size (number of trajectories) the script writes a synthetic dataset shaped like
MO-HalfCheetah-v2 data (obs 17, action 6, 2 objectives, every episode 500 steps, cut by the time
limit) through the real writer (:func:`morl.data.to_table`, zstd, page checksums), in chunks of
1,000 trajectories so that even 50,000 trajectories (25 M steps) never sit in memory twice. Then:

* **size per step** of the Parquet file, and of a pickle of the same data in the original D4MORL
  layout (a list with one dict of numpy arrays per trajectory, see :mod:`morl.d4morl`), written
  for the smallest size only (bytes per step do not depend on the count);
* **load time and peak memory** of :func:`morl.data.load_dataset` (the training path: file ->
  contiguous numpy arrays), each in a fresh subprocess. Peak memory is the growth of the
  process's peak resident set over its resident set just before the call (Linux: the peak,
  ``VmHWM``, is reset through ``/proc/self/clear_refs`` after the imports, so import-time peaks
  do not hide it); it sees Arrow's allocations as well as numpy's. It is compared with the total
  size of the arrays the loaded :class:`~morl.data.Dataset` holds ("final arrays"); the target is
  at most 2x. For the pickle, the same is measured for ``pickle.load`` plus concatenation into
  arrays (the D4MORL way); ``--compare-root`` times another checkout's ``load_dataset`` too.

Synthetic observations are Gaussian noise, which compresses worse than real states; ``--dataset
FILE`` compares the size of real dataset files with their D4MORL pickle.

Usage::

    python benchmarks/data_format.py                      # 5,000 and 50,000 trajectories
    python benchmarks/data_format.py --sizes 5000 --out-dir /tmp/df --keep
    python benchmarks/data_format.py --sizes --dataset results/MO-HalfCheetah-v2/data/expert-high.parquet
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from morl.data import META_KEY, Dataset, to_table  # noqa: E402
from morl.envs import get_spec, rest_observation  # noqa: E402

ENV = "MO-HalfCheetah-v2"
OBS, ACT, N_OBJ, LENGTH = 17, 6, 2, 500
CHUNK = 1000  # trajectories generated and written at a time


def _chunk(rng: np.random.Generator, n_traj: int) -> Dataset:
    n = n_traj * LENGTH
    prefs = rng.dirichlet(np.ones(N_OBJ), size=n_traj)
    obs = rng.normal(size=(n, OBS)).astype(np.float32)
    # Each trajectory starts at the task's rest observation (within its reset noise), as the loader checks.
    obs[::LENGTH] = rest_observation(get_spec(ENV)) + rng.uniform(-0.005, 0.005, size=(n_traj, OBS))
    nxt = np.empty_like(obs)
    nxt[:-1] = obs[1:]
    nxt[LENGTH - 1 :: LENGTH] = rng.normal(size=(n_traj, OBS)).astype(np.float32)
    act = np.tanh(rng.normal(size=(n, ACT))).astype(np.float32)
    rew = np.stack([1 + 3 * rng.random(n), 5 - (act.astype(np.float64) ** 2).sum(1)], axis=1)
    tout = np.zeros(n, bool)
    tout[LENGTH - 1 :: LENGTH] = True
    return Dataset.from_arrays(obs, act, rew, prefs, np.full(n_traj, LENGTH), next_observations=nxt, timeouts=tout)


def write_synthetic(path: Path, n_traj: int, seed: int = 0, pickle_path: Path | None = None) -> None:
    """Write ``n_traj`` synthetic trajectories to ``path`` (and, optionally, the D4MORL pickle)."""
    rng = np.random.default_rng(seed)
    meta = {"format_version": 1, "env_id": ENV, "quality": "expert", "entropy": "high",
            "seed": seed, "max_episode_steps": LENGTH, "synthetic": True, "n_obj": N_OBJ, "obs_dim": OBS,
            "act_dim": ACT, "n_trajectories": n_traj, "n_steps": n_traj * LENGTH}  # fmt: skip
    trajectories = [] if pickle_path is not None else None
    writer = None
    done = 0
    try:
        while done < n_traj:
            k = min(CHUNK, n_traj - done)
            ds = _chunk(rng, k)
            table = to_table(ds)
            table = table.set_column(0, "traj_id", pa.array(ds.traj_ids + done, pa.int64()))
            table = table.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True).encode()})
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd", write_page_checksum=True)
            writer.write_table(table)
            if trajectories is not None:
                trajectories += [{k: v.copy() for k, v in t.items()} for t in d4morl_trajectories(ds)]
            done += k
    finally:
        if writer is not None:
            writer.close()
    if trajectories is not None:
        with open(pickle_path, "wb") as f:
            pickle.dump(trajectories, f, protocol=pickle.HIGHEST_PROTOCOL)


def d4morl_trajectories(ds: Dataset) -> list[dict]:
    """``ds`` in the original D4MORL layout: one dict of numpy arrays per trajectory."""
    out = []
    for s, n in zip(ds.traj_starts, ds.traj_lengths):
        sl = slice(s, s + n)
        out.append({"observations": ds.observations[sl], "actions": ds.actions[sl],
                    "next_observations": ds.next_observations[sl], "raw_rewards": ds.rewards[sl],
                    "terminals": ds.terminals[sl], "preference": ds.preferences[sl]})  # fmt: skip
    return out


def compare_real(path: Path, out_dir: Path) -> dict:
    """Bytes per step of an existing dataset file and of the same data pickled the D4MORL way."""
    from morl.data import load_dataset

    ds = load_dataset(path)
    pkl = out_dir / (path.stem + ".pkl")
    with open(pkl, "wb") as f:
        pickle.dump(d4morl_trajectories(ds), f, protocol=pickle.HIGHEST_PROTOCOL)
    row = {"file": str(path), "trajectories": ds.n_trajectories, "steps": ds.n_steps,
           "parquet_bytes_per_step": path.stat().st_size / ds.n_steps,
           "pickle_bytes_per_step": pkl.stat().st_size / ds.n_steps}  # fmt: skip
    row["parquet_over_pickle"] = row["parquet_bytes_per_step"] / row["pickle_bytes_per_step"]
    pkl.unlink()
    return row


# One measurement in a fresh interpreter: load, then report time, peak RSS growth, final array bytes.
_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[3])
import numpy as np, pickle
from morl.data import load_dataset
kind, path = sys.argv[1], sys.argv[2]
def status(key):  # /proc/self/status values are in KiB
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak RSS (VmHWM) to the current RSS, so imports do not count
base = status("VmRSS")
t0 = time.perf_counter()
if kind == "parquet":
    ds = load_dataset(path)
    arrays = [v for v in vars(ds).values() if isinstance(v, np.ndarray)]
else:  # the D4MORL way: unpickle the list of dicts, then concatenate into training arrays
    with open(path, "rb") as f:
        trajs = pickle.load(f)
    keys = ("observations", "actions", "next_observations", "raw_rewards", "terminals", "preference")
    arrays = [np.concatenate([t[k] for t in trajs]) for k in keys]
    del trajs
elapsed = time.perf_counter() - t0
final = sum(a.nbytes for a in arrays)
peak = status("VmHWM")
print(json.dumps({"seconds": elapsed, "peak_bytes": peak - base, "final_bytes": final,
                  "rows": int(arrays[0].shape[0])}))
"""


def measure(kind: str, path: Path, root: Path = ROOT) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, kind, str(path), str(root)], capture_output=True,
                         text=True)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"loading {path} ({kind}, code at {root}) failed:\n{out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> str:
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("Model name"))
    except (StopIteration, OSError):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="*", default=[5000, 50000], help="trajectories per file")
    p.add_argument("--out-dir", default=None, help="where the files go (default: a temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep the files")
    p.add_argument("--repeats", type=int, default=1, help="load measurements per file (the fastest is kept)")
    p.add_argument("--compare-root", default=None, help="another checkout (e.g. `git archive HEAD morl | tar -x "
                   "-C DIR`) whose load_dataset to time side by side on the same files")  # fmt: skip
    p.add_argument("--dataset", nargs="*", default=[], help="also compare the size of these real dataset files "
                   "with their D4MORL pickle")  # fmt: skip
    args = p.parse_args(argv)
    out_dir = Path(args.out_dir or tempfile.mkdtemp(prefix="morl_data_format_"))
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; pyarrow {pa.__version__}, "
          f"numpy {np.__version__}, Python {platform.python_version()}")  # fmt: skip
    rows = []
    try:
        for real in args.dataset:
            print(json.dumps(compare_real(Path(real), out_dir)), flush=True)
        for i, n_traj in enumerate(sorted(args.sizes)):
            path = out_dir / f"synthetic-{n_traj}.parquet"
            pkl = out_dir / f"synthetic-{n_traj}.pkl" if i == 0 else None
            t0 = time.perf_counter()
            write_synthetic(path, n_traj, pickle_path=pkl)
            steps = n_traj * LENGTH
            print(f"wrote {path} ({n_traj} trajectories, {steps} steps) in {time.perf_counter() - t0:.0f} s",
                  flush=True)  # fmt: skip
            kinds = [("parquet", path, ROOT)] + ([("pickle", pkl, ROOT)] if pkl else [])
            if args.compare_root and i == 0:  # smallest size only: the old path may need 2-3x the arrays
                kinds.append(("parquet", path, Path(args.compare_root)))
            for kind, f, root in kinds:
                runs = [measure(kind, f, root) for _ in range(args.repeats)]
                if root != ROOT:
                    kind = f"parquet ({args.compare_root})"
                best = min(runs, key=lambda r: r["seconds"])
                peak = max(r["peak_bytes"] for r in runs)
                row = {"format": kind, "trajectories": n_traj, "steps": steps, "file_bytes": f.stat().st_size,
                       "bytes_per_step": f.stat().st_size / steps, "load_s": best["seconds"],
                       "final_bytes": best["final_bytes"], "peak_bytes": peak,
                       "peak_over_final": peak / best["final_bytes"]}  # fmt: skip
                rows.append(row)
                print(json.dumps(row), flush=True)
        print()
        print(
            "| format | trajectories | steps | file (MB) | bytes/step | load (s) | final arrays (MB) | "
            "peak growth (MB) | peak / final |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['format']} | {r['trajectories']:,} | {r['steps']:,} | {r['file_bytes'] / 1e6:,.0f} | "
                  f"{r['bytes_per_step']:.1f} | {r['load_s']:.1f} | {r['final_bytes'] / 1e6:,.0f} | "
                  f"{r['peak_bytes'] / 1e6:,.0f} | {r['peak_over_final']:.2f} |")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(out_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
