"""PGMORL's run state and its files: the ``kind`` of a population file and of a run in progress,
what a run carries from iteration to iteration (:class:`RunState`, with :class:`GenerationState`
for a generation stopped between its chunks), and the ``<output>.partial`` file written at every
save point and read back on resume (:func:`resume_run`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from morl.behavior.pgmorl_selection import OptGraph
from morl.behavior.pgmorl_tasks import TaskBatch
from morl.envs import check_file_identity, physics_version
from morl.errors import InputError
from morl.torch_io import load_torch

KIND = "morl-behavior-population"
PARTIAL_KIND = "morl-behavior-population-partial"


@dataclass
class GenerationState:
    """A generation in progress: its iterations ``start .. stop - 1``, each task's chain in the
    optimisation graph (``prev``: the node its latest population snapshot entered) and the
    population candidates it has produced so far, with their objectives."""

    start: int
    stop: int
    prev: np.ndarray  # (K,) int
    pop_new: list[TaskBatch]
    pop_new_objs: list[np.ndarray]

    def state(self) -> dict:
        """The ``in_generation`` entry of a partial file."""
        return {
            "start": self.start,
            "stop": self.stop,
            "prev": torch.from_numpy(self.prev.copy()),
            "population_new": [b.state() for b in self.pop_new],
            "population_new_objs": [torch.from_numpy(o.copy()) for o in self.pop_new_objs],
        }

    @staticmethod
    def from_state(st: dict) -> GenerationState:
        return GenerationState(
            int(st["start"]),
            int(st["stop"]),
            st["prev"].numpy().copy(),
            [TaskBatch.from_state(x) for x in st["population_new"]],
            [x.numpy().copy() for x in st["population_new_objs"]],
        )


@dataclass
class RunState:
    """Everything a run needs to continue: the tasks in training, the population, the archive, the
    optimisation graph, the selection's random generator and where the run stands."""

    tasks: TaskBatch
    pop: TaskBatch | None
    pop_objs: np.ndarray  # (len(pop), n_obj)
    archive: dict | None  # actor rows and observation statistics of the archive's policies
    archive_objs: np.ndarray  # (archive size, n_obj)
    graph: OptGraph
    rng: np.random.Generator
    iteration: int = 0
    generation: int = 0
    history: list = field(default_factory=list)  # [iteration, env steps, archive HV, archive size] per generation
    env_steps: int = 0
    wall_before: float = 0.0  # seconds spent before this process took the run over
    in_generation: GenerationState | None = None  # resumed between the chunks of a generation

    def partial_state(self, env_id: str, settings: dict, wall: float, in_generation: GenerationState | None) -> dict:
        """The content of ``<output>.partial``: this state and, between the chunks of a
        generation, what that generation has produced so far."""
        return {
            "kind": PARTIAL_KIND,
            "env_id": env_id,
            "physics_version": physics_version(env_id),
            "settings": settings,
            "tasks": self.tasks.state(),
            "population": self.pop.state() if self.pop is not None else None,
            "population_objs": torch.from_numpy(self.pop_objs.copy()),
            "archive": self.archive,
            "archive_objs": torch.from_numpy(self.archive_objs.copy()),
            "graph": self.graph.state(),
            "np_rng": self.rng.bit_generator.state,
            "iteration": self.iteration,
            "generation": self.generation,
            "history": self.history,
            "env_steps": self.env_steps,
            "wall_s": wall,
            "in_generation": in_generation.state() if in_generation is not None else None,
        }

    @staticmethod
    def from_partial(st: dict) -> RunState:
        """The state a partial file holds (:meth:`partial_state`)."""
        rng = np.random.default_rng()
        rng.bit_generator.state = st["np_rng"]
        history = [list(x) for x in st["history"]]
        in_generation = st.get("in_generation")
        return RunState(
            tasks=TaskBatch.from_state(st["tasks"]),
            pop=TaskBatch.from_state(st["population"]) if st["population"] is not None else None,
            pop_objs=st["population_objs"].numpy().copy(),
            archive=dict(st["archive"]) if st["archive"] is not None else None,
            archive_objs=st["archive_objs"].numpy().copy(),
            graph=OptGraph(st["graph"]),
            rng=rng,
            iteration=int(st["iteration"]),
            generation=int(st["generation"]),
            history=history,
            env_steps=int(st.get("env_steps", history[-1][1] if history else 0)),
            wall_before=float(st["wall_s"]),
            in_generation=GenerationState.from_state(in_generation) if in_generation is not None else None,
        )


def load_run_state(path: Path, kind: str, expect_env: str | None) -> dict:
    """The contents of the PGMORL file ``path``, checked to be of ``kind`` and, if given, for ``expect_env``."""
    st = load_torch(path, "PGMORL population")
    return check_file_identity(path, st, kind, expect_env, "PGMORL run state", "run")


def resume_run(partial: Path, env_id: str, settings: dict) -> RunState:
    """The run state in ``partial``, refused if it was written for another env or with other settings."""
    st = load_run_state(partial, PARTIAL_KIND, env_id)
    if st["settings"] != settings:
        raise InputError(
            f"{partial}: written with other PGMORL settings; delete it to start over, or "
            "restore the settings it was written with"
        )
    return RunState.from_partial(st)
