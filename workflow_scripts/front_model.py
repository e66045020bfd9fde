"""Rule `front_model`: MODULI's front model of one complete dataset (the reference of its return deviation)."""

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.errors import run_stage
from morl.front_model import fit_front_model_file
from morl.progress import log, log_to


def main(sm) -> None:
    with log_to(sm.log[0]):
        info = fit_front_model_file(sm.input.dataset, sm.output.model, steps=sm.params.steps, progress=False)
        if info.get("unfitted"):
            return  # the reason is logged; the file records it, and the tables show no RD for this dataset
        log.info("%s: front model of %s fitted on %d of its %d trajectories, %d steps, final loss %.4g, RMSE %.4g",
                 sm.output.model, sm.input.dataset, info["n_points"], info["n_trajectories"], info["steps"],
                 info["final_loss"], info["fitted_rmse"])  # fmt: skip


if __name__ == "__main__":
    run_stage("front_model", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
