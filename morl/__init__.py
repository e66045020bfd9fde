"""Offline multi-objective RL: D4MORL datasets, PEDA agents, Pareto evaluation.

Importing ``morl`` registers the D4MORL tasks with gymnasium, so that
``gymnasium.make("MO-HalfCheetah-v2")`` works. Gymnasium (1.x) has no plugin entry points any
more, so the package registers the ids itself, and cheaply: it imports neither gymnasium nor
MuJoCo. If gymnasium is already imported, the ids are registered now; otherwise right after
gymnasium's own import finishes. Each id's entry point is ``morl.envs:MOMujocoEnv``, which
gymnasium imports on the first ``make``.
"""

import sys

__version__ = "0.1.0"

#: The D4MORL task ids, the keys of :data:`morl.envs.tasks.ENV_SPECS` (a test keeps them equal).
D4MORL_IDS = ("MO-HalfCheetah-v2", "MO-Hopper-v2", "MO-Hopper-v3", "MO-Walker2d-v2", "MO-Ant-v2", "MO-Swimmer-v2")


def register_envs(ids=D4MORL_IDS) -> None:
    """Register the tasks with gymnasium under their D4MORL ids (idempotent; imports gymnasium)."""
    import gymnasium

    for env_id in ids:
        if env_id not in gymnasium.registry:
            gymnasium.register(
                id=env_id,
                entry_point="morl.envs:MOMujocoEnv",
                kwargs={"env_id": env_id},
                max_episode_steps=None,  # the environment truncates itself
                disable_env_checker=True,  # the passive checker expects scalar rewards
            )


class _RegisterAfterGymnasium:
    """A meta path finder (not derived from ``importlib.abc``, whose import costs more than this whole
    package) that finds nothing itself; when gymnasium is first imported, it runs :func:`register_envs`
    right after gymnasium's module has been executed."""

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium":
            return None
        import importlib.util

        if self in sys.meta_path:  # once, and so that find_spec below does not come back here
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            register_envs()

        spec.loader.exec_module = exec_then_register
        return spec


if "gymnasium" in sys.modules:
    register_envs()
elif not any(isinstance(finder, _RegisterAfterGymnasium) for finder in sys.meta_path):
    sys.meta_path.insert(0, _RegisterAfterGymnasium())
