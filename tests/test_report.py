"""The report a reviewer opens: `snakemake --report` after a tiny real run, looked at in headless
Chromium; and `snakemake partial_tables` on an experiment with evaluations still missing.

Chromium comes from Debian's `chromium` package (tests/report/install_chromium.sh installs it);
where it is not installed, the browser test is skipped and says why."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV = "MO-HalfCheetah-v2"
MODELS = ["bc", "rvs-p", "dt-p"]

pytestmark = pytest.mark.slow


def snakemake(*args, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), *args],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )  # fmt: skip


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """The smoke config cut to one env and three models, run to the end, then its report built."""
    cfg = yaml.safe_load((ROOT / "configs/smoke.yaml").read_text())
    cfg.update(envs=[ENV], models=MODELS)
    cfg["behavior"].update(total_steps=400, start_steps=200, checkpoint_every=200)
    wd = tmp_path_factory.mktemp("report_run")
    (wd / "config.yaml").write_text(yaml.safe_dump(cfg))
    res = snakemake("--cores", "2", "--configfile", "config.yaml", cwd=wd)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    res = snakemake("--configfile", "config.yaml", "--report", "results/report.html", cwd=wd, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    return wd


def report_results(report_html: str) -> dict:
    m = re.search(r'<script id="results">\s*var results = (.*?);\s*</script>', report_html, re.S)
    assert m, "no results in the report"
    return json.loads(m.group(1))


def test_report_is_one_self_contained_file_with_captions(run_dir):
    report = (run_dir / "results/report.html").read_text()
    # nothing is loaded from elsewhere: no external scripts, stylesheets or images
    assert not re.search(r"<(script|img|iframe)[^>]*\ssrc=\"(?!data:)", report)
    assert not re.search(r"<link[^>]*\shref=", report)
    results = report_results(report)
    kinds = {Path(p).parent.name if "/plots/" in p else "tables" for p in results}
    assert kinds == {"tables", "pareto", "preference", "hv", "curves", "statistics"}
    for path, res in results.items():
        assert res["data_uri"].startswith("data:"), path
        assert len(re.sub("<[^>]+>", "", res["caption"]).split()) >= 20, f"{path} has no real caption"
    pareto = results[f"results/tables/plots/pareto/{ENV}_amateur-low.png"]
    assert pareto["labels"] == {"env": ENV, "dataset": "amateur-low"}
    assert f"Pareto front on {ENV}, amateur data" in pareto["caption"]
    for name in ("hv.md", "hv.csv", "hv.tex", "sp.tex", "paper_comparison.csv", "summary.html"):
        assert f"results/tables/{name}" in results
    # the front page (the workflow description) carries the tables themselves
    hv_md = (run_dir / "results/tables/hv.md").read_text()
    row = next(line for line in hv_md.splitlines() if line.startswith(f"| {ENV} | amateur low-H"))
    assert html.escape(row.split(" | ")[4].replace("**", "")) in report


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def chromium(exe: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile{len(list(tmp_path.glob('profile*')))}"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=5000"]  # fmt: skip
    return subprocess.run([exe, *flags, *args], capture_output=True, text=True, timeout=180)


def test_report_renders_in_headless_chromium(run_dir, tmp_path):
    exe = find_chromium()
    if exe is None:
        reason = "Chromium is not installed (tests/report/install_chromium.sh installs Debian's chromium package)"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    url = (run_dir / "results/report.html").as_uri()

    shot = tmp_path / "report.png"
    res = chromium(exe, tmp_path, f"--screenshot={shot}", "--window-size=1400,1800", url)
    assert shot.exists(), res.stderr[-3000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1800, 1400)
    assert pixels[..., :3].std() > 0.05, "the screenshot is blank"
    # the page is not just the menu: the right-hand side (tables, figures) has many distinct colors
    content = (pixels[:, 400:, :3] * 255).astype(np.uint8).reshape(-1, 3)
    assert len(np.unique(content, axis=0)) > 50

    res = chromium(exe, tmp_path, "--dump-dom", url)
    assert res.returncode == 0, res.stderr[-3000:]
    dom = res.stdout
    # what the browser rendered into the app, not the data in the <script> tags
    app = re.sub(r"<script\b.*?</script>", "", dom[dom.index('<div id="app">') :], flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", app))
    for needle in ("Offline multi-objective RL", "Hypervolume (HV, higher is better)", "Sparsity (SP, lower is better)",
                   "Paper comparison", "MODT(P)", "MORvS(P)", ENV, "amateur low-H", "rank agreement"):  # fmt: skip
        assert needle in text, f"{needle!r} is not on the rendered page"
    # every HV cell of the table, as the Markdown table prints it, is on the page
    hv_md = (run_dir / "results/tables/hv.md").read_text()
    row = next(line for line in hv_md.splitlines() if line.startswith(f"| {ENV} | amateur low-H"))
    for cell in [c.strip(" *") for c in row.strip("| ").split(" | ")[3:]]:
        assert re.search(rf"(^|\s){re.escape(cell)}(\s|$)", text), f"HV cell {cell!r} is not on the rendered page"
    images = re.findall(r'<img[^>]*\ssrc="data:image/png;base64,([^"]+)"', app)
    assert len(images) >= 2, "no figure on the rendered page"
    assert all(base64.b64decode(img)[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    print(f"screenshot: {shot} ({shot.stat().st_size} bytes), {len(images)} images on the front page")


def test_partial_tables_from_the_evaluations_that_exist(run_dir, tmp_path):
    """An experiment still running: one evaluation missing. `snakemake partial_tables` builds the
    tables from what exists and runs nothing else."""
    wd = tmp_path / "wd"
    shutil.copytree(run_dir, wd, symlinks=True)
    missing = wd / f"results/{ENV}/amateur-low/dt-p/seed0"
    (missing / "eval.parquet").unlink()
    (missing / "summary.json").unlink()
    res = snakemake("partial_tables", "--cores", "1", "--configfile", "config.yaml", cwd=wd, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    assert job_counts(res.stdout + res.stderr) == {"partial_tables": 1, "total": 1}
    assert not (missing / "eval.parquet").exists(), "partial_tables must not run the missing evaluation"
    hv = (wd / "results/tables_partial/hv.md").read_text()
    header = next(line for line in hv.splitlines() if line.startswith("| env |")).strip("| ").split(" | ")
    row = next(line for line in hv.splitlines() if line.startswith(f"| {ENV} | amateur low-H")).strip("| ").split(" | ")
    cells = {h: c.strip("*") for h, c in zip(header, row)}
    assert header == ["env", "dataset", "unit", "B", "MODT(P)", "MORvS(P)", "BC"]
    assert cells["MODT(P)"] == "—" and "—" not in (cells["B"], cells["MORvS(P)"], cells["BC"])
    assert "— : not evaluated yet" in hv
    for kind in ("pareto", "preference", "curves"):  # the curves of the runs that exist
        assert (wd / "results/tables_partial/plots" / kind / f"{ENV}_amateur-low.png").stat().st_size > 5000, kind
    # the complete tables are untouched
    assert (wd / "results/tables/hv.md").read_text() == (run_dir / "results/tables/hv.md").read_text()
