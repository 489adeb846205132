"""The run record: what ``run.json`` holds beyond the options a run was started with, and how an
older record is completed.

A record (``record_version`` 1) adds to the run description (:mod:`bcg.learners.registry`)

    "resolved": {"estimator": {...every parameter of the estimator's factory...},
                 "learner":   {...every learner setting, num_envs and horizon included...},
                 "env":       {...every plain setting of the env (its dataclass fields)...},
                 "sim":       {...stiffness, timestep, substeps, solver iterations (read only)...}},
    "versions": {"bcg": ..., "git_commit": ..., "jax": ..., "jaxlib": ..., "mujoco": ...,
                 "mujoco-mjx": ..., "python": ...}

and everything that rebuilds a run (``--resume``, ``--init-from``, ``eval``, ``transfer``,
``export``, ``pack``, ``deploy``) builds it from ``resolved`` (:func:`effective`), so a default
that changed after the run was made does not change the rebuilt run: the record wins.

A record without ``resolved`` (made before records were complete) is completed by
:func:`complete`: a setting it does not name takes the default in force when it was made where
a later change of that default is known (:data:`DEFAULT_CHANGES`) and the record's date bound
shows it predates the change, else today's default, and one warning names the settings taken
from today's defaults. The date bound is the time git first committed the record (a run is
made before it is committed), when the record lies in a git checkout.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import subprocess
import sys
import warnings
from pathlib import Path

RECORD_VERSION = 1

# Known changes of defaults: (ISO time of the change, section, names it applies to, the values
# before it). Section "estimator": names are estimator names.
DEFAULT_CHANGES: list[tuple[str, str, tuple[str, ...], dict]] = [
    # bcg: plain forward and antithetic offsets (commit bbae469)
    ("2026-12-06T04:50:15+00:00", "estimator", ("bcg",), {"forward": "mean", "antithetic": False}),
]


class RecordWarning(UserWarning):
    """A run is rebuilt with a setting of today's defaults that its record does not hold."""


# ------------------------------------------------------------------------------ json values


def _json_value(v):
    """``v`` as a JSON value (tuples become lists, dataclasses dicts), or raise TypeError."""
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, tuple | list):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _json_value(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if hasattr(v, "item") and getattr(v, "ndim", None) == 0:
        return v.item()
    raise TypeError(f"not a JSON setting: {type(v).__name__}")


def _plain(v) -> bool:
    try:
        _json_value(v)
    except TypeError:
        return False
    return True


# --------------------------------------------------------------------------------- settings


def estimator_settings(name: str, params: dict, est) -> dict:
    """Every parameter of estimator ``name``'s factory: the given one, else the built
    estimator's attribute of that name, else the factory's keyword default (a factory that
    takes ``**kw``: the given parameters only)."""
    from bcg.estimators import registry

    allowed = registry.parameters(name)
    if allowed is None:
        return {k: _json_value(v) for k, v in params.items()}
    sig = inspect.signature(registry.estimator_factory(name))
    out = {}
    for k in sorted(allowed):
        if k in params:
            v = params[k]
        elif k == "env_clip":  # the wrapper's (bcg.estimators.wrappers), None without one
            v = getattr(est, "env_clip", None)
        elif hasattr(est, k):
            v = getattr(est, k)
        elif k in sig.parameters and sig.parameters[k].default is not inspect.Parameter.empty:
            v = sig.parameters[k].default
        else:
            continue
        if _plain(v):
            out[k] = _json_value(v)
    return out


def learner_settings(run: dict, learner=None) -> dict:
    """Every learner setting of ``run``: the built ``learner``'s configuration (its ``cfg``
    dataclass), else the run's ``config`` over its record's settings over the learner's
    defaults, with the sizes (``num_envs``; ``horizon`` where known)."""
    from bcg.learners.settings import learner_settings as defaults

    cfg = getattr(learner, "cfg", None)
    if dataclasses.is_dataclass(cfg):
        out = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    else:
        out = {**defaults(run["learner"]), **effective(run, "learner")}
        if run.get("num_envs") is not None:
            out["num_envs"] = int(run["num_envs"])
        if run.get("horizon") is not None:
            out["horizon"] = int(run["horizon"])
    return {k: _json_value(v) for k, v in out.items() if _plain(v)}


def env_settings(env) -> dict:
    """The env's plain settings: its dataclass fields with JSON values (not the model, clip or
    arrays)."""
    if not dataclasses.is_dataclass(env):
        return {}
    out = {}
    for f in dataclasses.fields(env):
        if f.name == "sim" or not f.init:
            continue
        v = getattr(env, f.name)
        if _plain(v):
            out[f.name] = _json_value(v)
    return out


def sim_settings(env) -> dict:
    """The physics the env was built with (read only: it follows from the env settings)."""
    sim = getattr(env, "sim", None)
    if sim is None:
        return {}
    m = sim.mj_model
    mx = getattr(sim, "mjx_model", None)
    solver = mx.opt if mx is not None else m.opt  # the MJX model's: what training steps
    out = {
        "model": getattr(sim, "name", None),
        "stiffness": getattr(getattr(sim, "stiffness", None), "label", None),
        "timestep": float(m.opt.timestep),
        "substeps": int(getattr(sim, "substeps", 1)),
        "solver_iterations": int(solver.iterations),
        "ls_iterations": int(solver.ls_iterations),
    }
    return {k: v for k, v in out.items() if v is not None}


@functools.lru_cache(maxsize=1)
def versions() -> dict:
    """Versions of bcg and of the stack, the git commit of bcg's source (``+dirty`` when it
    has uncommitted changes), and python's."""
    from importlib import metadata

    out = {}
    for dist in ("bcg", "jax", "jaxlib", "mujoco", "mujoco-mjx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    out["git_commit"] = _git_commit(Path(__file__).resolve().parent)
    out["python"] = sys.version.split()[0]
    return out


def _git(cwd: Path, *args) -> str | None:
    try:
        r = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def _git_commit(src: Path) -> str | None:
    head = _git(src, "rev-parse", "HEAD")
    if head is None:
        return None
    dirty = _git(src, "status", "--porcelain", "--untracked-files=no", "--", ".")
    return head + ("+dirty" if dirty else "")


def with_resolved(run: dict, env, learner=None, est=None) -> dict:
    """``run`` as a complete record: ``resolved`` settings of the built ``env``, ``learner``
    and estimator ``est``, ``versions`` (of this process; a record that already had others
    keeps its first as ``created_versions``) and ``record_version``. A completed older
    record keeps where its settings came from as ``completed_from``."""
    run = dict(run)
    src = run.pop("resolved_from", None)
    if isinstance(src, dict):
        run["completed_from"] = src
    if run.get("versions") and run["versions"] != versions():
        run.setdefault("created_versions", run["versions"])
    resolved = {
        "learner": learner_settings(run, learner),
        "env": env_settings(env),
        "sim": sim_settings(env),
    }
    if run.get("estimator") is not None and est is not None:
        resolved["estimator"] = estimator_settings(
            _estimator_name(run), dict(run.get("estimator_params") or {}), est
        )
    return {**run, "record_version": RECORD_VERSION, "resolved": resolved, "versions": versions()}


def _estimator_name(run: dict) -> str:
    from bcg.estimators import registry

    name = run["estimator"]
    if name not in registry.names() and ":" not in name and run.get("estimator_factory"):
        return run["estimator_factory"]
    return name


# --------------------------------------------------------------------------- rebuilding


def effective(run: dict, section: str) -> dict:
    """The settings of ``section`` (``"estimator"``, ``"learner"``) to rebuild ``run`` with:
    the record's resolved ones under the ones it names (``estimator_params`` / ``config``)."""
    given = {"estimator": "estimator_params", "learner": "config"}[section]
    resolved = dict((run.get("resolved") or {}).get(section) or {})
    return {**resolved, **dict(run.get(given) or {})}


def made_before(path: Path) -> str | None:
    """An upper bound on when the record at ``path`` was made: the ISO time git first
    committed it (None outside a git checkout, in a shallow one, or uncommitted)."""
    path = Path(path).resolve()
    if _git(path.parent, "rev-parse", "--is-shallow-repository") != "false":
        return None  # no checkout, or a shallow one: the first commit seen is not the first
    out = _git(path.parent, "log", "--diff-filter=A", "--format=%cI", "--", path.name)
    return out.splitlines()[-1] if out else None


def _before(a: str, b: str) -> bool:
    from datetime import datetime

    return datetime.fromisoformat(a) < datetime.fromisoformat(b)


def complete(run: dict, path: Path | None = None, warn=None) -> dict:
    """``run`` (read from ``path``) with ``resolved`` settings to rebuild it from: a complete
    record as it is; an older one completed from the defaults in force when it was made where
    a change is known (:data:`DEFAULT_CHANGES`), else today's, with one :class:`RecordWarning`
    (or ``warn(message)``) that names the settings taken from today's defaults. The completed
    record has ``resolved_from`` set (``"record"``, or where each part came from)."""
    if run.get("record_version") is not None and run.get("resolved") is not None:
        return {**run, "resolved_from": run.get("completed_from", "record")}
    if run.get("learner") not in ("shac", "bptt"):
        return run  # PPO rebuilds from brax's own config; legacy PPO runs as they are
    made = made_before(path) if path is not None else None
    resolved, from_history, from_today = {}, {}, []
    est_name = run.get("estimator")
    if est_name is not None:
        from bcg.estimators import registry

        params = dict(run.get("estimator_params") or {})
        # a setting's value when the record was made: the "before" value of the earliest
        # known change of it after that time
        for when, section, names, before in sorted(DEFAULT_CHANGES, key=lambda c: c[0]):
            if section == "estimator" and est_name in names and made and _before(made, when):
                for k, v in before.items():
                    if k not in params:
                        params[k] = from_history[f"{est_name}.{k}"] = v
        name = _estimator_name(run)
        est = registry.make(name, **params)
        resolved["estimator"] = estimator_settings(name, params, est)
        from_today += [f"{est_name}.{k}" for k in resolved["estimator"] if k not in params]
    resolved["learner"] = learner_settings(run)
    given = set(run.get("config") or {}) | {"num_envs", "horizon"}
    from_today += [f"{run['learner']}.{k}" for k in resolved["learner"] if k not in given]
    from_today.append("env (every setting not in env_params)")
    msg = (
        f"{path or 'the run'} predates complete run records"
        + (f" (committed {made})" if made else " (its date is unknown)")
        + (
            ": taken from the defaults in force then: "
            + ", ".join(f"{k}={v!r}" for k, v in from_history.items())
            if from_history
            else ""
        )
        + "; taken from today's defaults: "
        + ", ".join(from_today)
    )
    (warn or (lambda m: warnings.warn(m, RecordWarning, stacklevel=3)))(msg)
    return {
        **run,
        "resolved": resolved,
        "resolved_from": {"history": from_history, "today": from_today, "made_before": made},
    }


def read(run_dir, warn=None) -> dict:
    """The completed record of the run in ``run_dir`` (:func:`complete`)."""
    path = Path(run_dir) / "run.json"
    return complete(json.loads(path.read_text()), path, warn)


def to_write(run: dict) -> dict:
    """A completed record as it is written back (a packed copy, a resumed run): a complete
    record that keeps where an older record's settings came from (``completed_from``)."""
    run = dict(run)
    src = run.pop("resolved_from", None)
    if run.get("resolved") is None:
        return run
    if isinstance(src, dict):
        run["completed_from"] = src
    run.setdefault("record_version", RECORD_VERSION)
    return run


def env_differences(run: dict, env) -> dict:
    """``{name: (recorded, built)}`` for env settings whose recorded value differs from the
    rebuilt env's. A setting recorded on its own that the env now keeps as a key of a mapping
    setting (the G1 reward's ``w_flight``, now in its ``scales``) is compared as that key."""
    now = env_settings(env)
    rec = _fold_into_mappings(dict((run.get("resolved") or {}).get("env") or {}), now)
    return {k: (v, now.get(k)) for k, v in rec.items() if k in now and now[k] != v}


def _fold_into_mappings(rec: dict, now: dict) -> dict:
    """``rec`` with each key that ``now`` lacks but one of ``now``'s mapping settings holds
    moved into that mapping (its other keys as ``now`` has them), unless ``rec`` records the
    mapping itself."""
    mappings = {k: v for k, v in now.items() if isinstance(v, dict) and k not in rec}
    for name, current in mappings.items():
        loose = {k: rec.pop(k) for k in list(rec) if k not in now and k in current}
        if loose:
            rec[name] = {**current, **loose}
    return rec


def apply_env_record(run: dict, env, warn=None):
    """``env`` with the recorded values of settings whose default changed since the record
    (:func:`env_differences`); a setting that cannot be replaced is named in a warning."""
    diffs = env_differences(run, env)
    if not diffs:
        return env
    try:
        values = {k: _from_json(getattr(env, k), v) for k, (v, _) in diffs.items()}
        return dataclasses.replace(env, **values)
    except (TypeError, ValueError) as e:
        msg = (
            "the rebuilt env differs from its record in "
            + ", ".join(f"{k} (recorded {a!r}, now {b!r})" for k, (a, b) in diffs.items())
            + f" and cannot take the recorded values ({e})"
        )
        (warn or (lambda m: warnings.warn(m, RecordWarning, stacklevel=3)))(msg)
        return env


def _from_json(like, v):
    """A recorded JSON value in the type of today's value ``like`` (lists to tuples)."""
    if isinstance(like, tuple) and isinstance(v, list):
        return tuple(v)
    if dataclasses.is_dataclass(like) and isinstance(v, dict):
        return dataclasses.replace(
            like, **{k: _from_json(getattr(like, k), x) for k, x in v.items()}
        )
    return v


def describe(run: dict) -> str:
    """One line: the estimator and its settings that matter for BCG, and where they came
    from."""
    est = run.get("estimator")
    if est is None:
        return f"{run.get('learner')} on the plain step"
    s = effective(run, "estimator")
    keys = ("forward", "antithetic", "num_branches", "horizon", "tau", "env_clip")
    shown = ", ".join(f"{k}={s[k]!r}" for k in keys if k in s)
    src = run.get("resolved_from")
    where = (
        "from the record"
        if src == "record" or src is None
        else "completed: "
        + (
            ", ".join(f"{k} from the defaults in force then" for k in src["history"])
            or "today's defaults"
        )
    )
    return f"{run['learner']} + {est} ({shown}; {where})"
