"""Rule `dataset_card`: a dataset described in numbers; its data HV is B of the dataset's rows."""

from pathlib import Path

import morl_checkout  # noqa: F401 (puts this checkout's `morl` first on sys.path)

from morl.data import atomic_write
from morl.dataset_info import dataset_info, format_card
from morl.errors import run_stage
from morl.progress import log_to


def main(sm) -> None:
    with log_to(sm.log[0]):
        card = format_card(dataset_info(sm.input.dataset, front=sm.input.front))
        atomic_write(sm.output.card, lambda tmp: Path(tmp).write_text(card + "\n", encoding="utf-8"))


if __name__ == "__main__":
    run_stage("dataset_card", lambda: main(snakemake), snakemake.log[0])  # noqa: F821 (injected by Snakemake)
