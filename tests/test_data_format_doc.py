"""docs/data-format.md: its code examples run as written against a real dataset file."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from morl.data import load_dataset

DOC = Path(__file__).resolve().parent.parent / "docs" / "data-format.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_examples_run_against_a_collected_file(tmp_path, tiny_dataset, monkeypatch):
    blocks = _python_blocks()
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) <= 4 for b in blocks)
    (tmp_path / "expert-high.parquet").write_bytes(Path(tiny_dataset).read_bytes())  # the name the doc uses
    monkeypatch.chdir(tmp_path)
    ds = load_dataset(tiny_dataset)

    polars_ns: dict = {}
    exec(compile(blocks[0], f"{DOC.name} (polars example)", "exec"), polars_ns)
    returns = polars_ns["returns"]
    np.testing.assert_array_equal(returns["traj_id"].to_numpy(), np.arange(ds.n_trajectories))
    np.testing.assert_allclose(returns["run"].to_numpy(), ds.traj_returns[:, 0], rtol=1e-5)
    np.testing.assert_allclose(returns["energy"].to_numpy(), ds.traj_returns[:, 1], rtol=1e-5)

    arrow_ns: dict = {}
    exec(compile(blocks[1], f"{DOC.name} (pyarrow example)", "exec"), arrow_ns)
    np.testing.assert_array_equal(arrow_ns["obs"], ds.observations)
    assert arrow_ns["meta"]["env_id"] == "MO-HalfCheetah-v2" and arrow_ns["meta"]["n_obj"] == 2
    assert arrow_ns["meta"]["n_steps"] == ds.n_steps


def test_documented_columns_and_keys_match_the_writer(tiny_dataset):
    import json

    import pyarrow.parquet as pq

    text = DOC.read_text()
    schema = pq.read_schema(tiny_dataset)
    documented = re.findall(r"^\| `(\w+)` \| (\w+)", text, flags=re.M)
    columns = {name: kind for name, kind in documented if name in schema.names}
    assert set(columns) == set(schema.names), "every column is documented"
    for name, kind in columns.items():
        t = schema.field(name).type
        assert str(t).startswith(kind) or (kind == "fixed_size_list" and str(t).startswith("fixed_size_list")), name
    meta = json.loads(schema.metadata[b"morl"])
    for key in meta:
        assert f"`{key}`" in text, f"metadata key {key!r} is documented"
