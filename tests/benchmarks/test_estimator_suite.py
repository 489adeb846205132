"""benchmarks/estimator_suite.py: the suite file's checks, visual-mesh stripping, the verdict."""

import importlib.util
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "estimator_suite", ROOT / "benchmarks" / "estimator_suite.py"
)
S = importlib.util.module_from_spec(spec)
sys.modules["estimator_suite"] = S
spec.loader.exec_module(S)


def test_the_committed_suite_reads_and_every_model_file_exists():
    suite = S.read_suite()
    assert len(suite) >= 10
    for name, m in suite.items():
        assert m["batch"] >= 2 and m["horizon"] >= 1, name
        if "package" in m:
            assert S.package_file(m["package"], m["path"]).is_file()


@pytest.mark.parametrize(
    "text, message",
    [
        ('[models.a]\npackage = "brax"\npath = "x.xml"\nbatchh = 3\n', "unknown key 'batchh'"),
        ('[models.a]\npackage = "brax"\npath = "x.xml"\nbatch = "16"\n', "batch"),
        ('[models.a]\nkind = "x"\n', "needs either loader or package"),
        ('[models.a]\nloader = "h1"\n', "loader must be"),
        ('[model.a]\nloader = "g1"\n', "unknown table"),
        ('[models.a]\nloader = "g1"\nctrl = "random"\n', "ctrl must be"),
    ],
)
def test_a_bad_suite_names_the_problem(tmp_path, text, message):
    f = tmp_path / "suite.toml"
    f.write_text(text)
    with pytest.raises(ValueError, match=message):
        S.read_suite(f)


def test_missing_package_file_is_named():
    with pytest.raises(ValueError, match="has no file"):
        S.package_file("mujoco", "no/such/model.xml")


def test_strip_visual_meshes_keeps_the_dynamics(tmp_path):
    body = """<body name="b" pos="0 0 1"><freejoint/>
      <inertial pos="0 0 0" mass="2" diaginertia="0.1 0.1 0.1"/>
      <geom type="sphere" size="0.1" contype="1" conaffinity="1"/>
      {mesh_geom}</body>"""
    xml = """<mujoco><asset>{asset}<texture name="t" type="2d" file="absent.png"/>
      <material name="m" texture="t"/></asset>
      <worldbody><geom type="plane" size="1 1 .1"/>{body}</worldbody></mujoco>"""
    visual = '<geom type="mesh" mesh="shell" contype="0" conaffinity="0" material="m"/>'
    f = tmp_path / "robot.xml"
    f.write_text(
        xml.format(
            asset='<mesh name="shell" file="absent.stl"/>', body=body.format(mesh_geom=visual)
        )
    )
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_path(str(f))  # the mesh file is missing
    m = S.strip_visual_meshes(f)
    plain = mujoco.MjModel.from_xml_string(
        xml.format(asset="", body=body.format(mesh_geom=""))
        .replace('<texture name="t" type="2d" file="absent.png"/>', "")
        .replace('texture="t"', "")
    )
    assert m.ngeom == plain.ngeom == 2
    np.testing.assert_allclose(m.body_mass, plain.body_mass)
    np.testing.assert_allclose(m.body_inertia, plain.body_inertia)
    f.write_text(
        xml.format(
            asset='<mesh name="shell" file="absent.stl"/>',
            body=body.format(mesh_geom=visual.replace('contype="0"', "")),
        )
    )
    with pytest.raises(ValueError, match="collide"):
        S.strip_visual_meshes(f)


def _result(rows):
    return {
        "models": {
            m: {
                "variants": {
                    k: {"median": v[0], "cosine_median": v[1], "nan_count": v[2]}
                    for k, v in r.items()
                }
            }
            for m, r in rows.items()
        }
    }


def test_verdict_applies_the_issue_targets():
    res = _result(
        {
            "a": {"analytic": (10.0, 0.9, 0), "bcg": (0.5, 0.88, 0)},  # 20x, cosine 0.02 lower
            "b": {"analytic": (1.0, 0.5, 0), "bcg": (0.9, 0.5, 0)},
            "c": {"analytic": (1.0, 0.5, 0), "bcg": (0.8, 0.5, 0)},
        }
    )
    v = S.verdict(res, "bcg")
    assert v["no_worse_everywhere"] and v["tenfold_on"] == 1 and v["tenfold_on_a_third"]
    assert v["cosine_within_0.05"] and v["nan"] == 0
    res["models"]["b"]["variants"]["bcg"].update(median=2.0, cosine_median=0.4, nan_count=3)
    v = S.verdict(res, "bcg")
    assert v["worse_on"] == ["b"] and v["cosine_worse_on"] == ["b"] and v["nan"] == 3
    assert v["variance_ratio_worst"] == pytest.approx(0.5)


def test_median_interval_brackets_the_median():
    x = np.random.default_rng(0).lognormal(size=8)
    lo, hi = S.median_interval(x)
    assert lo <= np.median(x) <= hi
    assert S.median_interval([3.0]) == (3.0, 3.0)


def test_merge_joins_disjoint_runs_and_refuses_a_model_twice():
    a = _result({"a": {"analytic": (10.0, 0.9, 0), "bcg": (0.5, 0.9, 0)}})
    b = _result({"b": {"analytic": (1.0, 0.5, 0), "bcg": (2.0, 0.5, 0), "x": (0.1, 0.5, 0)}})
    m = S.merge([a, b])
    assert list(m["models"]) == ["a", "b"]
    assert m["verdict"]["bcg"]["worse_on"] == ["b"] and m["verdict"]["bcg"]["models"] == 2
    assert m["verdict"]["x"]["models"] == 1
    with pytest.raises(ValueError, match=r"second.json: model\(s\) \['a'\]"):
        S.merge([a, a], ["first.json", "second.json"])


def test_compact_table_gives_the_ratio_and_its_interval():
    res = _result({"a": {"analytic": (10.0, 0.9, 0), "bcg": (0.5, 0.88, 0)}})
    res["models"]["a"]["variants"]["bcg"].update(median_ci95=[0.25, 2.0], bundled_fraction=0.2)
    res["models"]["a"]["variants"]["analytic"].update(median_ci95=[9.0, 11.0])
    lines = S.compact_table(res).splitlines()
    assert len(lines) == 3 and lines[2] == "| a | 10, 0.900 | 20x [5, 40], 0.880, 20% |"


def test_a_model_with_nan_gradients_is_not_comparable_and_a_nan_variant_is_worse():
    nan = float("nan")
    res = _result(
        {
            "a": {"analytic": (10.0, 0.9, 0), "bcg": (0.5, 0.9, 0)},
            "m": {"analytic": (nan, nan, 100), "bcg": (nan, nan, 800)},
            "n": {"analytic": (1.0, 0.9, 0), "bcg": (nan, nan, 8)},
        }
    )
    v = S.verdict(res, "bcg")
    assert v["not_comparable"] == ["m"] and v["models"] == 2
    assert v["worse_on"] == ["n"] and v["cosine_worse_on"] == ["n"] and v["nan"] == 808
    for r in res["models"].values():
        for x in r["variants"].values():
            x.update(median_ci95=[x["median"], x["median"]], bundled_fraction=0.0)
    assert "nan" in S.compact_table(res).splitlines()[3]
