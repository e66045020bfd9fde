"""The ``morl`` command: one subcommand per pipeline stage, calling the same functions as the rules."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _config_section(args, section: str) -> dict:
    from morl.config import load_config

    return load_config(args.config)[section]


def cmd_envs(args) -> int:
    from morl.envs import ENV_SPECS, MO_GYMNASIUM_INSTALL, get_spec, mo_gymnasium_ids

    print(f"{'id':<22} {'objectives':<34} {'obs':>4} {'act':>4} {'steps':>6}")
    external = mo_gymnasium_ids()
    for env_id in sorted(ENV_SPECS) + external:
        try:
            spec = get_spec(env_id)
        except ValueError:  # an MO-Gymnasium task that is not continuous control
            continue
        objs = f"{spec.n_obj} ({', '.join(spec.objectives)})"
        print(f"{env_id:<22} {objs:<34} {spec.obs_dim:>4} {spec.act_dim:>4} {spec.max_episode_steps:>6}")
    if not external:
        print(f"\nMO-Gymnasium tasks (mo-halfcheetah-v5, ...) need the optional extra: {MO_GYMNASIUM_INSTALL}")
    return 0


def cmd_validate(args) -> int:
    from morl.config import load_config

    load_config(args.config)
    print(f"{args.config}: valid")
    return 0


def _threads(requested: int) -> int:
    """The torch threads a command computes with (:func:`morl.cpu.usable_threads`), saying why when
    fewer than asked for."""
    from morl.cpu import usable_threads
    from morl.progress import log

    threads, why = usable_threads(requested)
    if why:
        log.warning("%s", why)
    return threads


def cmd_behavior(args) -> int:
    from morl.behavior import train_behavior
    from morl.config import behavior_settings, load_config, validate_config

    config = load_config(args.config)
    if args.method:  # the other method of the same config, e.g. the TD3 keys of configs/paper.yaml
        config["behavior"]["method"] = args.method
        config["behavior"]["overrides"] = [
            {k: v for k, v in ov.items() if k != "method"} for ov in config["behavior"].get("overrides", [])
        ]
        validate_config(config, f"{args.config} with --method {args.method}")
    settings = behavior_settings(config, args.env)
    threads = _threads(args.threads) if args.threads else None
    summary = train_behavior(args.env, settings, args.output, threads=threads, device=args.device)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_behavior_front(args) -> int:
    from morl.evaluate import evaluate_behavior

    s = _config_section(args, "evaluate")
    summaries = evaluate_behavior(
        args.policy, args.output, s["divisions"], s["episodes"], s["seed"], workers=args.workers
    )
    print(json.dumps(summaries, indent=2))
    return 0


def cmd_thin_population(args) -> int:
    from morl.behavior.pgmorl import thin_population

    print(json.dumps(thin_population(args.policy, args.max_policies, args.output), indent=2))
    return 0


def cmd_collect(args) -> int:
    from morl.collect import collect_dataset

    s = _config_section(args, "collect")
    n = s["n_trajectories"] if args.n_trajectories is None else args.n_trajectories
    summary = collect_dataset(
        args.policy,
        args.quality,
        args.entropy,
        n,
        args.output,
        batch_size=s["batch_size"],
        seed=s["seed"] if args.seed is None else args.seed,
        workers=args.workers,
    )
    print(json.dumps(summary, indent=2))
    return 0


def cmd_dataset_info(args) -> int:
    from morl.dataset_info import dataset_info, format_card

    info = dataset_info(args.file, front=args.front)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(format_card(info), end="")
    return 0


def cmd_train(args) -> int:
    from morl.config import load_config, train_settings
    from morl.data import read_meta
    from morl.families import train
    from morl.runtime import torch_threads

    config = load_config(args.config)
    env_id = read_meta(args.dataset)["env_id"]
    settings = train_settings(config, env_id, args.model)
    threads = _threads(args.threads)
    with torch_threads(threads):
        summary = train(
            args.dataset,
            args.model,
            args.seed,
            settings,
            args.output,
            curve_path=args.curve,
            device=args.device,
            reference_dataset=args.reference_dataset,
        )
    summary["threads"] = threads
    print(json.dumps(summary, indent=2, default=str))
    return 0


def cmd_evaluate(args) -> int:
    from morl.config import load_config, training_definitions
    from morl.data import read_meta
    from morl.evaluate import evaluate_checkpoint
    from morl.families import checkpoint_model

    config = load_config(args.config)
    s = config["evaluate"]
    model = checkpoint_model(args.checkpoint)
    definitions = training_definitions(config, read_meta(args.dataset)["env_id"], model)
    summary = evaluate_checkpoint(
        args.checkpoint,
        args.dataset,
        args.output,
        s["divisions"],
        s["episodes"],
        s["seed"],
        workers=args.workers,
        reference_dataset=args.reference_dataset,
        definitions=definitions,
        coverage_source=args.coverage_source,
    )
    print(json.dumps(summary, indent=2))
    return 0


def cmd_derive_coverage(args) -> int:
    from morl.config import coverage_settings, load_config
    from morl.coverage import derive_file

    record = derive_file(args.dataset, args.coverage, coverage_settings(load_config(args.config)), args.output)
    print(json.dumps(record, indent=2))
    return 0


def cmd_fit_front_model(args) -> int:
    from morl.config import load_config
    from morl.coverage import front_model_steps
    from morl.front_model import fit_front_model_file

    steps = args.steps if args.steps is not None else front_model_steps(load_config(args.config).get("coverage"))
    info = fit_front_model_file(args.dataset, args.output, steps=steps, seed=args.seed)
    print(json.dumps(info, indent=2))
    return 0


def cmd_import_d4morl(args) -> int:
    from morl.d4morl import import_d4morl

    summary = import_d4morl(args.pickle, args.env, args.quality, args.entropy, args.out)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_aggregate(args) -> int:
    from morl.aggregate import aggregate
    from morl.errors import InputError

    if args.curves and len(args.curves) != len(args.evaluations):
        raise InputError(
            f"--curves names {len(args.curves)} files but --evaluations {len(args.evaluations)}; "
            "give one training curve per evaluation, in the same order"
        )
    outputs = aggregate(
        args.evaluations,
        args.fronts,
        args.out_dir,
        seeds=args.seeds,
        curves=dict(zip(args.evaluations, args.curves or [])),
        front_models=args.front_models,
        data_cards=args.data_cards,
    )
    print(Path(outputs["results"]).read_text())
    return 0


def cmd_convergence(args) -> int:
    from morl.convergence import write_convergence

    outputs = write_convergence(args.evaluations, args.data_cards, args.out_dir, plots=not args.no_plots)
    print(Path(outputs["convergence"]).read_text(), end="")
    return 0


def cmd_merge_slices(args) -> int:
    from morl.config import behavior_settings, load_config
    from morl.errors import InputError
    from morl.shipped import listed_checksums, shipped_policy_path
    from morl.slices import merge_slices
    from morl.vocabulary import COMPLETE, coverage_suffix

    config = load_config(args.config)
    out, slices = Path(args.out_dir).resolve(), Path(args.slices).resolve()
    if out == slices or slices in out.parents:
        raise InputError(f"{args.out_dir}: the tables must not be written into the slices folder {args.slices}")
    coverages = [coverage_suffix(c) for c in config.get("coverages", [COMPLETE])]
    rows = [(e, q, h + c) for e in config["envs"] for q in config["qualities"] for h in config["entropies"]
            for c in coverages]  # fmt: skip
    # the shipped behavior policies the config uses now (load_config has checked each one): a slice
    # made from another one is stale
    checksums = listed_checksums()
    behaviors = {}
    for env in config["envs"]:
        which = behavior_settings(config, env)["shipped"]
        if which:
            behaviors[env] = which.lower() if isinstance(which, str) else checksums.get(shipped_policy_path(env).name)
    outputs = merge_slices(args.slices, args.out_dir, datasets=rows, models=config["models"], seeds=config["seeds"],
                           behaviors={e: h for e, h in behaviors.items() if h}, plots=not args.tables_only,
                           config=config)  # fmt: skip
    print(Path(outputs["results"]).read_text())
    return 0


def cmd_add_slice(args) -> int:
    from morl.slices import add_slice, read_provenance

    for piece in args.pieces:
        folder = add_slice(piece, args.slices, replace=args.replace)
        info = read_provenance(Path(folder) / "SLICE.json")
        print(f"{folder}: {info['runs']} runs in {len(info['pieces'])} pieces")
    return 0


def cmd_paper_targets(args) -> int:
    from morl.targets import write_targets

    print(write_targets(args.comparison, args.output), end="")
    return 0


def cmd_multiverse(args) -> int:
    from morl.config import load_config
    from morl.multiverse import write_multiverse

    outputs = write_multiverse(load_config(args.config), args.slices, args.out_dir, plots=not args.no_plots)
    print(Path(outputs["readme"]).read_text(), end="")
    return 0


#: The largest seed accepted (numpy, torch and the environments all take it).
MAX_SEED = 2**31 - 1


def _count(text: str) -> int:
    """An argparse type: an integer of at least 1 (0 is an error, not "unset")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _bounded_count(maximum: int, what: str):
    """An argparse type: an integer from 1 to ``maximum``."""

    def parse(text: str) -> int:
        value = _count(text)
        if value > maximum:
            raise argparse.ArgumentTypeError(f"at most {maximum:,} {what}, got {value:,}")
        return value

    return parse


#: The most trajectories one dataset may hold (the schema's bound on collect.n_trajectories).
MAX_TRAJECTORIES = 100_000_000
#: The most cores a stepping or training command may be told to use.
MAX_WORKERS = 1024


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"a seed lies in 0 .. {MAX_SEED}, got {value}")
    return value


def _unwritable(text: str) -> str | None:
    """Why nothing can be written at ``text`` (a file's or a folder's path), or None: the nearest
    folder that exists on the way to it must let this process create entries (write and search
    permission, not on a read-only file system), and no file may stand where a folder is needed.
    Nothing is created to find out."""
    path = Path(text)
    for parent in (path, *path.parents):
        try:
            if not parent.exists() or (parent == path and not parent.is_dir()):
                continue
        except OSError as exc:  # a folder on the way that cannot be searched
            return f"{parent} cannot be looked at ({exc.strerror})"
        if not parent.is_dir():
            return f"{parent} is a file, so nothing can be written below it"
        if not os.access(parent, os.W_OK | os.X_OK):
            return f"the folder {parent} cannot be written to (no permission, or a read-only file system)"
        return None
    return None


def _output_file(text: str) -> str:
    """An argparse type: a path a file can be written to, checked before any work starts."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a directory; give the path of the file to write")
    why = _unwritable(text)
    if why:
        raise argparse.ArgumentTypeError(f"{text}: {why}")
    return text


def _output_dir(text: str) -> str:
    """An argparse type: a folder the tables can be written into, checked before any work starts."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; give a folder to write the tables into")
    why = _unwritable(text)
    if why:
        raise argparse.ArgumentTypeError(f"{text}: {why}")
    return text


def build_parser() -> argparse.ArgumentParser:
    from morl.behavior import method_names
    from morl.families import model_order
    from morl.vocabulary import D4MORL_ENTROPIES, ENTROPIES, QUALITIES, VARIANTS

    p = argparse.ArgumentParser(prog="morl", description=__doc__)
    p.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an expected error too (also: MORL_DEBUG=1 in the environment)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    def add(name, fn, help_):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(fn=fn)
        return sp

    def with_config(sp):
        sp.add_argument("--config", default="config.yaml", help="experiment config (default: config.yaml)")
        return sp

    def add_workers(sp):
        sp.add_argument(
            "--workers",
            type=_bounded_count(MAX_WORKERS, "workers"),
            default=1,
            help="cores stepping the environments (threads; processes for MO-Gymnasium tasks)",
        )

    def add_device(sp):
        sp.add_argument("--device", default="auto", help="auto (CUDA if present), cpu or cuda")

    add("envs", cmd_envs, "list the available environments")
    sp = add("validate-config", cmd_validate, "check a config file against the schema")
    sp.add_argument("config")

    sp = with_config(add("behavior", cmd_behavior, "train the behavior policy of one environment"))
    sp.add_argument("--env", required=True)
    sp.add_argument("--output", required=True, type=_output_file)
    sp.add_argument("--threads", type=_bounded_count(MAX_WORKERS, "threads"), default=None)
    sp.add_argument(
        "--method",
        choices=method_names(),
        default=None,
        help="train with this behavior method "
        "instead of the config's behavior.method (its settings from the same config)",
    )
    add_device(sp)

    sp = with_config(add("behavior-front", cmd_behavior_front, "evaluate a behavior policy and trivial baselines"))
    sp.add_argument("--policy", required=True)
    sp.add_argument("--output", required=True, type=_output_file)
    add_workers(sp)

    sp = add(
        "thin-population",
        cmd_thin_population,
        "keep at most N policies of a PGMORL population's archive (for a file size limit)",
    )
    sp.add_argument("--policy", required=True)
    sp.add_argument("--max-policies", required=True, type=_bounded_count(1_000_000, "policies"))
    sp.add_argument("--output", required=True, type=_output_file)

    sp = with_config(add("collect", cmd_collect, "collect one dataset with a behavior policy"))
    sp.add_argument("--policy", required=True)
    sp.add_argument("--quality", required=True, choices=QUALITIES)
    sp.add_argument("--entropy", required=True, choices=ENTROPIES)
    sp.add_argument("--output", required=True, type=_output_file)
    sp.add_argument(
        "--n-trajectories",
        type=_bounded_count(MAX_TRAJECTORIES, "trajectories"),
        default=None,
        help="override the config's count",
    )
    sp.add_argument("--seed", type=_seed, default=None, help="override the config's seed")
    add_workers(sp)

    sp = add("dataset-info", cmd_dataset_info, "describe a dataset file: sizes, returns, preference spread, HV")
    sp.add_argument("file", help="a dataset Parquet file")
    sp.add_argument(
        "--front",
        default=None,
        help="a behavior front file whose HV (B) to show; default: the "
        "front.parquet beside the behavior checkpoint named in the dataset, if it exists",
    )
    sp.add_argument("--json", action="store_true", help="print the numbers as JSON")

    sp = with_config(add("train", cmd_train, "train one model on one dataset"))
    sp.add_argument("--dataset", required=True)
    sp.add_argument("--model", required=True, choices=model_order())
    sp.add_argument("--seed", type=_seed, default=0)
    sp.add_argument("--output", required=True, type=_output_file)
    sp.add_argument("--curve", default=None, type=_output_file)
    add_device(sp)
    sp.add_argument(
        "--reference-dataset",
        default=None,
        help="the env's expert-high dataset (for the state statistics under train.peda.statistics_from: expert-high)",
    )
    sp.add_argument(
        "--threads",
        type=_bounded_count(MAX_WORKERS, "threads"),
        default=1,
        help="torch threads on the CPU (default 1, as a workflow job). More than one is used only on cores "
        "that are idle when training starts (threads beside a busy job wait on one another and train many "
        "times slower); the count used is printed with the summary",
    )

    sp = with_config(add("evaluate", cmd_evaluate, "evaluate a trained model on the preference grid"))
    sp.add_argument("--checkpoint", required=True)
    sp.add_argument("--dataset", required=True, help="the training dataset (for the target-return regression)")
    sp.add_argument("--output", required=True, type=_output_file)
    sp.add_argument(
        "--reference-dataset",
        default=None,
        help="the env's expert-high dataset the model was "
        "trained with (for the target-return regression under train.peda.statistics_from: "
        "expert-high)",
    )
    add_workers(sp)

    sp.add_argument(
        "--coverage-source",
        default=None,
        help="for a coverage variant of a dataset: the complete "
        "dataset it was derived from (tags the held-out preferences)",
    )

    sp = with_config(
        add(
            "derive-coverage",
            cmd_derive_coverage,
            "cut preference bands out of a dataset: its shattered or narrow coverage variant",
        )
    )
    sp.add_argument("--dataset", required=True, help="the complete dataset")
    sp.add_argument("--coverage", required=True, choices=VARIANTS)
    sp.add_argument("--output", required=True, type=_output_file)

    sp = with_config(
        add(
            "fit-front-model",
            cmd_fit_front_model,
            "fit the front model of MODULI's return deviation "
            "on a complete dataset (one per dataset with coverage variants)",
        )
    )
    sp.add_argument("--dataset", required=True, help="the complete dataset the variants were derived from")
    sp.add_argument("--output", required=True, type=_output_file)
    sp.add_argument(
        "--steps",
        type=_bounded_count(10**9, "gradient steps"),
        default=None,
        help="gradient steps (default: the config's coverage.front_model_steps, MODULI's 100,000)",
    )
    sp.add_argument("--seed", type=_seed, default=0, help="seed of the fit (MODULI's: 0)")

    sp = add("import-d4morl", cmd_import_d4morl, "convert an original D4MORL pickle into a Parquet dataset")
    sp.add_argument("pickle", help="the original D4MORL .pkl file")
    sp.add_argument("--env", required=True, help="env id, e.g. MO-HalfCheetah-v2")
    sp.add_argument("--quality", required=True, choices=QUALITIES)
    sp.add_argument(
        "--entropy",
        required=True,
        choices=[*ENTROPIES, *D4MORL_ENTROPIES],
        help=f"{'/'.join(ENTROPIES)}, or D4MORL's {'/'.join(D4MORL_ENTROPIES)}",
    )
    sp.add_argument("--out", required=True, type=_output_file, help="the Parquet file to write")

    sp = add("aggregate", cmd_aggregate, "tables (Markdown, CSV, LaTeX, HTML) and plots from evaluation files")
    sp.add_argument("--evaluations", nargs="*", default=[])
    sp.add_argument("--fronts", nargs="*", default=[])
    sp.add_argument(
        "--curves",
        nargs="*",
        default=[],
        help="the curve.csv of each evaluated run, in the order of --evaluations (for the training-curve plots)",
    )
    sp.add_argument(
        "--seeds", type=_seed, nargs="*", default=None, help="the configured seeds: cells with fewer are marked"
    )
    sp.add_argument(
        "--front-models",
        nargs="*",
        default=[],
        help="the front model of each complete dataset with "
        "coverage variants (morl fit-front-model), for MODULI's return deviation RD",
    )
    sp.add_argument(
        "--data-cards",
        nargs="*",
        default=[],
        help="the card of each dataset (morl dataset-info FILE > FILE.card.md): B of its rows, the HV of the "
        "data's own front; a row without one has no B and no HV / B",
    )
    sp.add_argument("--out-dir", required=True, type=_output_dir)

    sp = add(
        "convergence", cmd_convergence, "HV along training: convergence.csv and plots from evaluations of snapshots"
    )
    sp.add_argument(
        "--evaluations", nargs="+", required=True, help="evaluations of snapshots (evaluate.at_steps) and final models"
    )
    sp.add_argument("--data-cards", nargs="*", default=[], help="the datasets' cards (*.card.md): B of each row")
    sp.add_argument("--out-dir", required=True, type=_output_dir)
    sp.add_argument("--no-plots", action="store_true", help="write convergence.csv only")

    sp = with_config(add("merge-slices", cmd_merge_slices, "tables and plots from every committed slice of a grid"))
    sp.add_argument("--slices", required=True, help="the slices folder (the config's slices_dir)")
    sp.add_argument("--out-dir", required=True, type=_output_dir)
    sp.add_argument("--tables-only", action="store_true", help="write the tables, not the plots and the HTML page")

    sp = add("add-slice", cmd_add_slice, "add slices exported from parts of an env's grid to the env's slice")
    sp.add_argument("pieces", nargs="+", help="slice folders (<slices_dir>/<env>) of runs cut to some models or seeds")
    sp.add_argument("--slices", required=True, help="the slices folder to add them to (the config's slices_dir)")
    sp.add_argument("--replace", action="store_true", help="a piece's run replaces the slice's run of the same name")

    sp = with_config(add("multiverse", cmd_multiverse, "which paper findings hold under which analysis choices"))
    sp.add_argument("--slices", required=True, help="the slices folder (the config's slices_dir)")
    sp.add_argument("--out-dir", required=True, type=_output_dir)
    sp.add_argument("--no-plots", action="store_true", help="write the tables and the README only")

    sp = add("paper-targets", cmd_paper_targets, "read a paper comparison against the PEDA paper's main findings")
    sp.add_argument("--comparison", required=True, help="paper_comparison.csv of morl aggregate or merge-slices")
    sp.add_argument("--output", type=_output_file, default=None, help="also write the Markdown to this file")
    return p


#: Each command's file arguments: (inputs, outputs), by argparse destination.
FILE_ARGS = {
    "behavior": (("config",), ("output",)),
    "behavior-front": (("policy", "config"), ("output",)),
    "thin-population": (("policy",), ("output",)),
    "collect": (("policy", "config"), ("output",)),
    "train": (("dataset", "reference_dataset", "config"), ("output", "curve")),
    "evaluate": (("checkpoint", "dataset", "reference_dataset", "coverage_source", "config"), ("output",)),
    "derive-coverage": (("dataset", "config"), ("output",)),
    "fit-front-model": (("dataset", "config"), ("output",)),
    "import-d4morl": (("pickle",), ("out",)),
    "paper-targets": (("comparison",), ("output",)),
}


def _same_file(a: str, b: str) -> bool:
    pa, pb = Path(a), Path(b)
    if pa.exists() and pb.exists():
        return os.path.samefile(pa, pb)
    return pa.resolve() == pb.resolve()


def check_outputs_are_not_inputs(args) -> None:
    """Refuse, before any work, an output path that names one of the command's inputs or another
    of its outputs (the same file by inode, or the same resolved path): it would be overwritten."""
    from morl.errors import InputError

    inputs, outputs = FILE_ARGS.get(args.command, ((), ()))
    flag = lambda dest: "the positional argument" if dest == "pickle" else "--" + dest.replace("_", "-")  # noqa: E731
    given = lambda dests: [(d, getattr(args, d, None)) for d in dests if getattr(args, d, None)]  # noqa: E731
    outs = given(outputs)
    for i, (o_dest, o_path) in enumerate(outs):
        for i_dest, i_path in given(inputs) + outs[:i]:
            if _same_file(o_path, i_path):
                raise InputError(
                    f"{flag(o_dest)} {o_path} is the file {flag(i_dest)} names ({i_path}); writing "
                    "it would overwrite that file: give another output path"
                )


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. An expected error (bad input, a bad or mismatched file, an output that
    cannot be written) prints ``morl <command>: error: <message>`` and returns 2; ``--debug`` adds its
    traceback. Any other exception is a bug and propagates with its traceback."""
    from morl.cpu import configure
    from morl.errors import DEBUG_ENV, expected_errors, report
    from morl.progress import log_to

    args = build_parser().parse_args(argv)
    configure()
    previous = os.environ.get(DEBUG_ENV)
    if args.debug:
        os.environ[DEBUG_ENV] = "1"
    try:
        check_outputs_are_not_inputs(args)
        with log_to(None):
            return args.fn(args)
    except expected_errors() as exc:
        report(args.command, exc)
        return 2
    finally:
        if args.debug:  # main() may be called in-process; leave the environment as it was
            if previous is None:
                os.environ.pop(DEBUG_ENV, None)
            else:
                os.environ[DEBUG_ENV] = previous


if __name__ == "__main__":
    sys.exit(main())
