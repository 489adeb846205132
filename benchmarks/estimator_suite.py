"""The estimator suite: every gradient estimator on public MJCF models, over many branch draws.

    python benchmarks/estimator_suite.py --json                    # every model of suite.toml
    python benchmarks/estimator_suite.py --models ant,go1 --keys 8 \\
        --variants '{"bcg_h1": ["bcg", {"horizon": 1}]}'

For each model of ``benchmarks/suite.toml`` (public MJCF shipped in installed wheels, each with
a stiff-contact setting, a batch, a horizon and an open-loop control sequence that makes
contact) this runs ``bcg grad``'s problem (:mod:`bcg.diagnostics.report`, float64) with every
variant: ``analytic``; ``former`` (BCG's defaults before 2026-12-06: the paper's mean forward,
independent offsets); ``bcg`` (the library's defaults now); and any ``--variants``. BCG
variants are computed with branch-noise keys 0..K-1 on the same states. Per model and variant
the JSON holds: the summed variance per key, its median and mean over keys with a 95%
percentile-bootstrap interval of the median (resampling keys; for a variant that does not
depend on the key, the report's bootstrap over states), the cosine of each key's mean gradient
to the native-MuJoCo reference (central finite differences of the Monte-Carlo mean over 4x the
batch), the bundled fraction, the NaN count, the compile time and the gradient pass's wall time
over analytic's (interleaved medians of the key-0 call, same process).

Results are written after every model (``--out``, default
``results/estimator_suite/suite.json``) and ``--resume`` skips the models already there, so a
killed run goes on where it stopped. ``--smoke`` runs a tiny problem on two models (the test
suite calls it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from bcg import estimators as E
from bcg.diagnostics import report as R
from bcg.diagnostics.timing import interleaved_medians
from bcg.sim import load

HERE = Path(__file__).resolve().parent
SUITE = HERE / "suite.toml"
OUT = Path("results/estimator_suite/suite.json")

# BCG's defaults before 2026-12-06 (the paper's aggregation): mean forward, independent offsets
FORMER = {"forward": "mean", "antithetic": False}
BASE_VARIANTS = {"analytic": ["analytic", {}], "former": ["bcg", FORMER], "bcg": ["bcg", {}]}

MODEL_KEYS = {
    "kind": str,
    "note": str,
    "package": str,
    "path": str,
    "loader": str,
    "strip_visual_meshes": bool,
    "keyframe": str,
    "ctrl": str,
    "stiffness": (str, float),
    "batch": int,
    "horizon": int,
    "substeps": int,
    "solver_iterations": int,
    "qpos_noise": float,
    "qvel_noise": float,
}
LOADERS = ("g1",)
CTRL = ("zero", "keyframe")


# --------------------------------------------------------------------------- the suite file


def read_suite(path=SUITE) -> dict[str, dict]:
    """Model name -> settings (the file's ``[defaults]`` filled in), every key checked."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    unknown = set(raw) - {"defaults", "models"}
    if unknown:
        raise ValueError(f"{path}: unknown table(s) {sorted(unknown)}")
    defaults = raw.get("defaults", {})
    models = {}
    for name, m in raw.get("models", {}).items():
        spec = {**defaults, **m}
        for key, value in spec.items():
            if key not in MODEL_KEYS:
                raise ValueError(f"{path}: model {name!r} has unknown key {key!r}")
            want = MODEL_KEYS[key]
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                value = spec[key] = float(value)
            if not isinstance(value, want) or (want is int and isinstance(value, bool)):
                raise ValueError(f"{path}: model {name!r}: {key} = {value!r} has the wrong type")
        if ("loader" in spec) == ("package" in spec or "path" in spec):
            raise ValueError(f"{path}: model {name!r} needs either loader or package + path")
        if "loader" in spec and spec["loader"] not in LOADERS:
            raise ValueError(f"{path}: model {name!r}: loader must be one of {LOADERS}")
        if spec.get("ctrl", "zero") not in CTRL:
            raise ValueError(f"{path}: model {name!r}: ctrl must be one of {CTRL}")
        models[name] = spec
    return models


def package_file(package: str, path: str) -> Path:
    """A file shipped inside an installed package (ValueError naming what is missing)."""
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ValueError(f"package {package!r} is not installed")
    p = Path(list(found.submodule_search_locations)[0]) / path
    if not p.is_file():
        raise ValueError(f"{package} has no file {path}")
    return p


def strip_visual_meshes(path: Path) -> mujoco.MjModel:
    """The MJCF at ``path`` without its visual mesh geoms (contype = conaffinity = 0), its
    meshes and its file textures and height fields (ValueError if a mesh geom collides)."""
    spec = mujoco.MjSpec.from_file(str(path))
    colliding = []
    for g in list(spec.geoms):
        if g.type == mujoco.mjtGeom.mjGEOM_MESH:
            if g.contype == 0 and g.conaffinity == 0:
                spec.delete(g)
            else:
                colliding.append(g.name)
    if colliding:
        raise ValueError(f"{path.name}: mesh geoms {colliding[:3]} collide; cannot strip them")
    for mesh in list(spec.meshes):
        spec.delete(mesh)
    gone = set()
    for tex in list(spec.textures):
        if tex.file:
            gone.add(tex.name)
            spec.delete(tex)
    for mat in spec.materials:
        mat.textures = ["" if t in gone else t for t in mat.textures]
    for hf in list(spec.hfields):
        if hf.file:
            spec.delete(hf)
    return spec.compile()


def build_sim(name: str, spec: dict):
    """The :class:`bcg.sim.Sim` of one suite model at its stiffness and settings."""
    kw = dict(stiffness=spec["stiffness"], substeps=spec["substeps"])
    if "solver_iterations" in spec:
        kw["solver_iterations"] = spec["solver_iterations"]
    if spec.get("loader") == "g1":
        from bcg.envs.g1.model import load_g1

        return load_g1(**kw)
    path = package_file(spec["package"], spec["path"])
    src = strip_visual_meshes(path) if spec.get("strip_visual_meshes") else str(path)
    return load(src, name=name, **kw)


def build_problem(name: str, spec: dict, *, seed: int = 0) -> R.GradProblem:
    """The model's gradient problem (``bcg grad --model``'s, around its keyframe)."""
    sim = build_sim(name, spec)
    m = sim.mj_model
    qpos = qvel = ctrl = None
    if "keyframe" in spec or spec["ctrl"] == "keyframe":
        k = 0
        if "keyframe" in spec:
            k = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, spec["keyframe"])
            if k < 0:
                raise ValueError(f"{name}: no keyframe {spec['keyframe']!r}")
        elif m.nkey == 0:
            raise ValueError(f"{name}: ctrl = 'keyframe' but the model has no keyframe")
        qpos, qvel = m.key_qpos[k].copy(), m.key_qvel[k].copy()
        if spec["ctrl"] == "keyframe":
            ctrl = np.tile(m.key_ctrl[k], (spec["horizon"], 1))
    return R.make_problem(
        sim,
        batch=spec["batch"],
        horizon=spec["horizon"],
        seed=seed,
        qpos_noise=spec["qpos_noise"],
        qvel_noise=spec["qvel_noise"],
        ctrl=ctrl,
        qpos=qpos,
        qvel=qvel,
    )


# --------------------------------------------------------------------------- statistics


def median_interval(values, n_resamples: int = 4000, seed: int = 0, level: float = 0.95):
    """Percentile-bootstrap interval of the median of ``values`` (resampling the values)."""
    v = np.asarray(values, float)
    if v.size < 2:
        return float(v[0]), float(v[0])
    rng = np.random.default_rng(seed)
    meds = np.median(v[rng.integers(0, v.size, (n_resamples, v.size))], axis=1)
    lo, hi = np.percentile(meds, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def keyed(est) -> bool:
    """Whether an estimator's gradients depend on the branch-noise key."""
    return isinstance(est, E.BCG) or not isinstance(est, E.PlainStep)


def run_model(name: str, spec: dict, variants: dict, keys: int, repeats: int, say) -> dict:
    """Every variant on one model: the JSON row of :func:`main`."""
    t0 = time.perf_counter()
    prob = build_problem(name, spec)
    ref = R.problem_reference(prob)
    ref_s = time.perf_counter() - t0
    say(f"{name}: reference in {ref_s:.0f} s (theta dim {prob.dim})")
    mx = prob.sim.mjx_model
    base = (mx, np.asarray(prob.qpos0), np.asarray(prob.qvel0), jnp.asarray(prob.ctrl))
    env_steps = prob.batch * prob.horizon
    rows, calls = {}, {}
    for label, (est_name, params) in variants.items():
        est = E.make(est_name, **params)
        fn = R.chunked_gradient_function(prob, est)
        per_key = []
        n_keys = keys if keyed(est) else 1
        for k in range(n_keys):
            t = time.perf_counter()
            G, _, stats = fn(*base, jax.random.PRNGKey(k))
            if k == 0:
                compile_s = time.perf_counter() - t
            G = np.asarray(G)
            nan = int(np.sum(~np.isfinite(G)))
            Gf = np.where(np.isfinite(G), G, 0.0)
            per_key.append(
                {  # NaN when a gradient entry is NaN (not the variance of zeroed entries)
                    "summed_variance": R.summed_variance(Gf) if nan == 0 else float("nan"),
                    "cosine": R.cosine(Gf.mean(0), ref),
                    "bundled_fraction": float(np.sum(stats.bundled)) / env_steps,
                    "overflow": int(np.sum(stats.overflow)),
                    "nan_count": nan,
                    "_gradient": Gf.mean(0),
                }
            )
            if k == 0 and not keyed(est):
                ci = R.bootstrap_interval(Gf)
        calls[label] = lambda f=fn: f(*base, jax.random.PRNGKey(0))
        sv = [r["summed_variance"] for r in per_key]
        pooled_mean = np.mean([r["_gradient"] for r in per_key], axis=0)
        rows[label] = {
            "estimator": est_name,
            "params": params,
            "keys": n_keys,
            "summed_variance": sv,
            "median": float(np.median(sv)),
            "mean": float(np.mean(sv)),
            "median_ci95": list(median_interval(sv)) if keyed(est) else list(ci),
            "interval_over": "keys" if keyed(est) else "states",
            "cosine": [r["cosine"] for r in per_key],
            "cosine_median": float(np.median([r["cosine"] for r in per_key])),
            "cosine_of_mean_over_keys": R.cosine(pooled_mean, ref),
            "bundled_fraction": float(np.mean([r["bundled_fraction"] for r in per_key])),
            "overflow": int(sum(r["overflow"] for r in per_key)),
            "nan_count": int(sum(r["nan_count"] for r in per_key)),
            "compile_seconds": compile_s,
        }
        r = rows[label]
        say(
            f"{name} {label}: summed variance median {r['median']:.4g} (mean {r['mean']:.4g}), "
            f"cosine {r['cosine_median']:.3f}, bundled {r['bundled_fraction']:.1%}, "
            f"NaN {r['nan_count']}, first call {compile_s:.0f} s"
        )
    times = interleaved_medians(calls, repeats)
    for label, r in rows.items():
        r["seconds"] = times[label]
        r["time_ratio_vs_analytic"] = times[label] / times["analytic"]
    return {
        "settings": spec,
        "mass_kg": float(prob.sim.mj_model.body_subtreemass[0]),
        "theta_dim": prob.dim,
        "target_body": prob.spec.body_name,
        "reference_seconds": ref_s,
        "wall_seconds": time.perf_counter() - t0,
        "variants": rows,
    }


# --------------------------------------------------------------------------- tables


def verdict(result: dict, label: str, against: str = "analytic") -> dict:
    """The issue's targets for variant ``label`` over the suite: median summed variance at or
    below ``against``'s on every model, >= 10x below on at least a third of the models,
    cosine no more than 0.05 below, no NaN."""
    models = result["models"]

    def usable(r):  # both sides finite: a model whose reference side is NaN compares nothing
        a, v = r["variants"][against], r["variants"].get(label)
        return (
            v is not None
            and np.isfinite(a["median"])
            and a["median"] > 0
            and (np.isfinite(a["cosine_median"]))
        )

    ratios, cos_gap = {}, {}
    for m, r in models.items():
        if not usable(r):
            continue
        a, v = r["variants"][against], r["variants"][label]
        ok = np.isfinite(v["median"]) and v["median"] > 0
        ratios[m] = a["median"] / v["median"] if ok else 0.0  # NaN variant: worse
        cos_gap[m] = a["cosine_median"] - v["cosine_median"] if ok else float("inf")
    nan = sum(r["variants"][label]["nan_count"] for r in models.values() if label in r["variants"])
    tenx = sum(x >= 10 for x in ratios.values())
    return {
        "models": len(ratios),
        "no_worse_everywhere": all(x >= 1 for x in ratios.values()),
        "worse_on": sorted(m for m, x in ratios.items() if x < 1),
        "tenfold_on": tenx,
        "tenfold_on_a_third": tenx * 3 >= len(ratios),
        "cosine_within_0.05": all(g <= 0.05 for g in cos_gap.values()),
        "cosine_worse_on": sorted(m for m, g in cos_gap.items() if g > 0.05),
        "nan": nan,
        "variance_ratio_median": float(np.median(list(ratios.values()))) if ratios else None,
        "variance_ratio_worst": float(min(ratios.values())) if ratios else None,
        "not_comparable": sorted(
            m for m, r in models.items() if label in r["variants"] and not usable(r)
        ),
    }


def table(result: dict) -> str:
    """Markdown: one row per model and variant."""
    lines = [
        "| model | variant | summed variance, median of keys [95% CI] | mean | analytic / variant "
        "| cosine (median) | bundled | time vs analytic | NaN |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m, r in result["models"].items():
        a = r["variants"]["analytic"]["median"]
        for label, v in r["variants"].items():
            lo, hi = v["median_ci95"]
            lines.append(
                f"| {m} | {label} | {v['median']:.3g} [{lo:.3g}, {hi:.3g}] | {v['mean']:.3g} | "
                f"{_ratio(a, v['median']):.3g}x | {v['cosine_median']:.3f} | "
                f"{v['bundled_fraction']:.1%} | {v['time_ratio_vs_analytic']:.2f}x | "
                f"{v['nan_count']} |"
            )
    return "\n".join(lines)


def _ratio(a: float, b: float) -> float:
    """a / b, NaN where b is 0 or either is NaN."""
    return a / b if b and np.isfinite(a) and np.isfinite(b) else float("nan")


def compact_table(result: dict, labels: list[str] | None = None) -> str:
    """Markdown, one row per model: analytic's median summed variance and cosine, then per
    variant the ratio analytic / variant of the medians (with the ratio at the ends of the
    variant's 95% interval of its median over keys), its cosine and its bundled fraction."""
    models = result["models"]
    if labels is None:
        labels = [v for v in next(iter(models.values()))["variants"] if v != "analytic"]
    head = "| model | analytic: variance, cosine | " + " | ".join(
        f"{v}: analytic / {v} [95%], cosine, bundled" for v in labels
    )
    lines = [head + " |", "|---" * (2 + len(labels)) + "|"]
    for m, r in models.items():
        a = r["variants"]["analytic"]
        cells = [m, f"{a['median']:.3g}, {a['cosine_median']:.3f}"]
        for v in labels:
            x = r["variants"].get(v)
            if x is None:
                cells.append("-")
                continue
            lo, hi = x["median_ci95"]
            cells.append(
                f"{_ratio(a['median'], x['median']):.3g}x [{_ratio(a['median'], hi):.3g}, "
                f"{_ratio(a['median'], lo):.3g}], {x['cosine_median']:.3f}, "
                f"{x['bundled_fraction']:.0%}"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _jsonable(x):
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items() if not k.startswith("_")}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def merge(results: list[dict], names: list[str] | None = None) -> dict:
    """One suite result from several (disjoint models; a model in two is an error): models in
    order, the variant specs and commands of all, the verdict recomputed."""
    out = {"command": [], "keys": None, "variant_specs": {}, "models": {}}
    for i, r in enumerate(results):
        dup = sorted(set(r["models"]) & set(out["models"]))
        if dup:
            src = names[i] if names else f"result {i}"
            raise ValueError(f"{src}: model(s) {dup} are already in an earlier result")
        out["command"].append(r.get("command"))
        out["keys"] = r.get("keys") if out["keys"] is None else out["keys"]
        out["variant_specs"].update(r.get("variant_specs", {}))
        out["models"].update(r["models"])
    labels = {v for m in out["models"].values() for v in m["variants"]} - {"analytic"}
    out["verdict"] = {v: verdict(out, v) for v in sorted(labels)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default=str(SUITE), help="the suite file (TOML)")
    p.add_argument("--models", help="comma list of suite models (default: all)")
    p.add_argument("--keys", type=int, default=8, help="branch-noise keys 0..K-1 (default 8)")
    p.add_argument("--variants", default="{}", help='JSON {"label": ["estimator", {params}]}')
    p.add_argument("--only", help="comma list of variant labels to run (default: all)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--out", default=str(OUT), help="JSON written after every model")
    p.add_argument("--resume", action="store_true", help="skip models already in --out")
    p.add_argument("--json", action="store_true", help="print the result as JSON at the end")
    p.add_argument("--smoke", action="store_true", help="hopper, batch 4, horizon 2, 2 keys")
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="combine the models of these outputs (e.g. of processes run on disjoint --models) "
        "into --out with the verdict and table; runs nothing",
    )
    a = p.parse_args(argv)
    if a.merge:
        merged = merge([json.loads(Path(f).read_text()) for f in a.merge], a.merge)
        out = Path(a.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(merged, indent=1))
        print(compact_table(merged))
        if a.json:
            print(json.dumps(merged["verdict"], indent=1))
        return 0
    # float64 and the persistent compilation cache, as `bcg grad` (set here, not on import)
    jax.config.update("jax_enable_x64", True)
    cache = os.environ.get("BCG_JAX_CACHE", os.path.expanduser("~/.cache/bcg/jax"))
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    if a.keys < 1:
        p.error("--keys must be >= 1")
    suite = read_suite(a.suite)
    names = list(suite) if not a.models else [n.strip() for n in a.models.split(",")]
    bad = [n for n in names if n not in suite]
    if bad:
        p.error(f"unknown suite model(s) {bad}; the suite has {', '.join(suite)}")
    variants = {**BASE_VARIANTS, **json.loads(a.variants)}
    if a.only:
        keep = {"analytic", *(s.strip() for s in a.only.split(","))}
        variants = {k: v for k, v in variants.items() if k in keep}
    for est_name, params in variants.values():
        E.make(est_name, **params)  # every variant checked before anything compiles
    if a.smoke:
        names = names if a.models else ["hopper"]
        for n in names:
            suite[n] = {**suite[n], "batch": 4, "horizon": 2}
        variants = {k: v for k, v in variants.items() if k in ("analytic", "bcg")}
        a.keys, a.repeats = min(a.keys, 2), 1
    out = Path(a.out)
    result = {
        "command": "python benchmarks/estimator_suite.py " + " ".join(sys.argv[1:]),
        "keys": a.keys,
        "variant_specs": variants,
        "models": {},
    }
    if a.resume and out.is_file():
        result["models"] = json.loads(out.read_text())["models"]

    def say(line):
        print(line, file=sys.stderr, flush=True)

    for n in names:
        if n in result["models"]:
            say(f"{n}: already in {out}, skipped")
            continue
        result["models"][n] = _jsonable(run_model(n, suite[n], variants, a.keys, a.repeats, say))
        result["verdict"] = {v: verdict(result, v) for v in variants if v != "analytic"}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
    print(table(result))
    if a.json:
        print(json.dumps(result["verdict"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
