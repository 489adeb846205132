"""Recipes: every setting of a training run in one TOML file, schedule included.

    bcg train --recipe recipes/g1_jump.toml --estimator analytic --seed 3 --run-dir runs/a3

The file (every table optional)::

    [recipe]             name, description, version: free text, recorded
    [run]                task, stiffness, iterations, num_envs, horizon, seed, float64,
                         timesteps (PPO's env steps)
    [env]                keyword arguments of the task's env factory (``--param env.K=V``)
    [learner]            name = "shac"; plain keys: settings of whichever learner runs
    [learner.shac]       settings used only when that learner runs (``SHACConfig`` fields,
                         ``actor_hidden``, ...); likewise [learner.bptt], [learner.ppo]
    [estimator]          name = "bcg"; plain keys: parameters of whichever estimator runs
                         (e.g. ``env_clip``, which every step estimator takes)
    [estimator.bcg]      parameters used only when that estimator runs
    [[schedule]]         from = K: from the iteration after K completed ones on, the values of
                         its [schedule.env], [schedule.learner], [schedule.estimator] tables
                         (same form, no ``name``) replace the earlier ones

With ``--learner ppo`` (brax trains one env) the schedule's env values are merged into
the env: PPO trains on the final phase's env.

Command-line options override the recipe: ``--estimator``, ``--stiffness``, ``--seed``, the sizes,
and ``--param NS.K=V`` for every phase of the schedule. The run's ``run.json`` records the
recipe (path, SHA-256, contents) and the overrides under ``recipe``, the schedule under
``schedule`` (:mod:`bcg.learners.schedule`) and every resolved setting
(:mod:`bcg.learners.record`). Every key is checked when the recipe is read, and every value
before anything is compiled: an unknown key, a missing file or a value of the wrong type is a
ValueError / FileNotFoundError that names it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from pathlib import Path

from bcg.learners.run_config import TrainOptions

TABLES = ("recipe", "run", "env", "learner", "estimator", "schedule")
RUN_KEYS = {  # [run] key -> accepted types
    "task": (str,),
    "stiffness": (str, float, int),
    "iterations": (int,),
    "num_envs": (int,),
    "horizon": (int,),
    "seed": (int,),
    "float64": (bool,),
    "timesteps": (int,),
}
META_KEYS = ("name", "description", "version")
RUNTIME_OPTIONS = ("run_dir", "resume", "checkpoint_every", "devices")  # not settings
LEARNER_NAMES = ("shac", "bptt", "ppo")


def _fail(path, msg):
    raise ValueError(f"recipe {path}: {msg}")


def _is_type(value, types) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _check_section(path, where: str, table, names, named: bool) -> None:
    """A [learner] / [estimator] table (``where``): ``name`` (if ``named``), plain keys, and
    sub-tables whose keys are learner / estimator names (checked by ``names``)."""
    if not isinstance(table, dict):
        _fail(path, f"{where} must be a table")
    for k, v in table.items():
        if k == "name":
            if not named:
                _fail(path, f"{where}.name: a schedule phase cannot change the {where[-1:]}")
            if not isinstance(v, str):
                _fail(path, f"{where}.name = {v!r} must be a string")
            names(v, f"{where}.name")
        elif isinstance(v, dict):
            names(k, f"{where}.{k}")


def _learner_name(path):
    def check(name, key):
        if name not in LEARNER_NAMES:
            _fail(path, f"{key}: unknown learner {name!r} (choose from {', '.join(LEARNER_NAMES)})")

    return check


def _estimator_name(path):
    from bcg import estimators as E

    def check(name, key):
        if name not in E.names() and ":" not in name:
            _fail(path, f"{key}: unknown estimator {name!r} (choose from {', '.join(E.names())})")

    return check


def check_recipe(raw: dict, path="<recipe>") -> None:
    """ValueError naming the first unknown table or key, or a value of the wrong type, of a
    parsed recipe (names of learners and estimators included; their settings are checked
    against the learner / estimator by :func:`check_settings`)."""
    for t in raw:
        if t not in TABLES:
            _fail(path, f"unknown table [{t}] (a recipe has {', '.join(TABLES)})")
    for k, v in raw.get("recipe", {}).items():
        if k not in META_KEYS:
            _fail(path, f"unknown key recipe.{k} (choose from {', '.join(META_KEYS)})")
        if not isinstance(v, (str, int, float)):
            _fail(path, f"recipe.{k} = {v!r} must be text or a number")
    for k, v in raw.get("run", {}).items():
        if k not in RUN_KEYS:
            _fail(path, f"unknown key run.{k} (choose from {', '.join(RUN_KEYS)})")
        if not _is_type(v, RUN_KEYS[k]):
            _fail(path, f"run.{k} = {v!r} has the wrong type")
    if not isinstance(raw.get("env", {}), dict):
        _fail(path, "env must be a table")
    _check_section(path, "learner", raw.get("learner", {}), _learner_name(path), True)
    _check_section(path, "estimator", raw.get("estimator", {}), _estimator_name(path), True)
    sched = raw.get("schedule", [])
    if not isinstance(sched, list):
        _fail(path, "schedule must be an array of tables: [[schedule]]")
    for i, ph in enumerate(sched):
        where = f"schedule[{i}]"
        for k in ph:
            if k not in ("from", "env", "learner", "estimator"):
                _fail(path, f"unknown key {where}.{k} (a phase has from, env, learner, estimator)")
        if "from" not in ph:
            _fail(path, f"{where} needs from = ITERATION")
        if not _is_type(ph["from"], (int,)):
            _fail(path, f"{where}.from = {ph['from']!r} must be an integer")
        if not isinstance(ph.get("env", {}), dict):
            _fail(path, f"{where}.env must be a table")
        _check_section(path, f"{where}.learner", ph.get("learner", {}), _learner_name(path), False)
        _check_section(
            path, f"{where}.estimator", ph.get("estimator", {}), _estimator_name(path), False
        )


def read_recipe(path) -> dict:
    """The parsed, checked recipe at ``path`` (FileNotFoundError / ValueError naming it)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recipe {path} does not exist")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"recipe {path}: {e}") from None
    check_recipe(raw, path)
    return raw


def settings_for(section: dict, name: str | None) -> dict:
    """The values of a [learner] / [estimator] table for the learner / estimator ``name``: its
    plain keys, then its ``[section.NAME]`` sub-table."""
    plain = {k: v for k, v in section.items() if k != "name" and not isinstance(v, dict)}
    own = section.get(name, {}) if name is not None else {}
    return {**plain, **own}


def check_settings(raw: dict, path="<recipe>") -> None:
    """ValueError naming a learner setting or estimator parameter of any of the recipe's
    sub-tables that its learner / estimator does not take, or of the wrong type (every
    sub-table, used by this run or not: a typo in the PPO arm's table fails the SHAC arm too)."""
    from bcg import estimators as E
    from bcg.learners.registry import check_config

    tables = [("", raw)] + [(f"schedule[{i}].", ph) for i, ph in enumerate(raw.get("schedule", []))]
    for where, t in tables:
        for name, sub in t.get("learner", {}).items():
            if isinstance(sub, dict):
                try:
                    check_config(name, sub)
                except ValueError as e:
                    _fail(path, f"{where}learner.{name}: {e}")
        est = t.get("estimator", {})
        plain = settings_for(est, None)
        for name, sub in est.items():
            if isinstance(sub, dict):
                try:
                    E.make(name, **{**plain, **sub})
                except (TypeError, ValueError) as e:
                    _fail(path, f"{where}estimator.{name}: {e}")


def _pairs(ns: str, values: dict) -> list[str]:
    """``values`` as ``NS.KEY=JSON`` parameters (:func:`bcg.options.parse_params` reads JSON)."""
    return [f"{ns}.{k}={json.dumps(v)}" for k, v in values.items()]


def _given_keys(params) -> dict[str, set]:
    """``{namespace: {key, ...}}`` of ``--param NS.KEY=VALUE`` strings."""
    out: dict[str, set] = {}
    for kv in params or ():
        k = kv.split("=", 1)[0]
        if "." in k:
            ns, key = k.rsplit(".", 1)
            out.setdefault(ns, set()).add(key)
    return out


def recipe_options(path, **given) -> TrainOptions:
    """:class:`TrainOptions` of the recipe at ``path`` under the options ``given`` (those of
    ``bcg train`` that were set on its command line; ``params``: ``--param`` strings, which
    win over the recipe in every phase)."""
    raw = read_recipe(path)
    check_settings(raw, path)
    unknown = sorted(set(given) - {f.name for f in dataclasses.fields(TrainOptions)})
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}")
    run = raw.get("run", {})
    learner = given.get("learner") or raw.get("learner", {}).get("name", "shac")
    estimator = given.get("estimator")
    if estimator is None and learner != "ppo":
        estimator = raw.get("estimator", {}).get("name")
    est_ns = estimator or ("bcg" if learner != "ppo" else None)
    cli = _given_keys(given.get("params"))
    if given.get("capacity") is not None and est_ns:
        cli.setdefault(est_ns, set()).add("capacity")
    for opt, key in (("actor_hidden", "actor_hidden"), ("critic_hidden", "critic_hidden")):
        if given.get(opt):
            cli.setdefault(learner, set()).add(key)
    if given.get("init_log_std") is not None:
        cli.setdefault(learner, set()).add("init_log_std")

    def layer(ns, values):  # a recipe table without what the command line sets
        return {k: v for k, v in values.items() if k not in cli.get(ns, set())}

    def tables(t):
        out = {"env": layer("env", t.get("env", {}))}
        out[learner] = layer(learner, settings_for(t.get("learner", {}), learner))
        if est_ns is not None:
            out[est_ns] = layer(est_ns, settings_for(t.get("estimator", {}), est_ns))
        return out

    base = tables(raw)
    phases = raw.get("schedule", [])
    if learner == "ppo" and phases:  # brax PPO trains one env: the schedule's final one
        for ph in phases:
            base["env"].update(layer("env", ph.get("env", {})))
        phases = []
    params = [p for ns, values in base.items() for p in _pairs(ns, values)]
    schedule = []
    for ph in phases:
        t = tables(ph)
        entry = {"from": ph["from"], "env_params": t["env"], "config": t[learner]}
        if est_ns is not None:
            entry["estimator_params"] = t[est_ns]
        schedule.append({k: v for k, v in entry.items() if k == "from" or v})
    fields = {k: run[k] for k in RUN_KEYS if k in run}
    fields.update({k: v for k, v in given.items() if k != "params"})
    record = {
        "path": str(path),
        "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest(),
        "contents": raw,
        "overrides": {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in given.items()
            if k not in RUNTIME_OPTIONS
        },
    }
    return TrainOptions(
        **{**fields, "learner": learner, "estimator": estimator},
        params=(*params, *tuple(given.get("params") or ())),
        schedule=tuple(schedule),
        recipe=record,
    )
