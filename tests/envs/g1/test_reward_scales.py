"""The G1 reward's scales: completed with the defaults, checked, and taken by name from a
factory's keyword arguments (no G1 model is built here)."""

import math

import pytest

from bcg.envs.g1.reward_scales import DEFAULT_SCALES, pop_scales, resolve_scales


def test_partial_scales_are_completed_with_the_defaults():
    got = resolve_scales({"w_flight": 40}, sigma_pos=0.2)
    assert got == {**DEFAULT_SCALES, "w_flight": 40.0, "sigma_pos": 0.2}
    assert all(isinstance(v, float) for v in got.values())
    assert resolve_scales() == DEFAULT_SCALES and resolve_scales() is not DEFAULT_SCALES


@pytest.mark.parametrize(
    "given, named, match",
    [
        ({"w_fligth": 1.0}, {}, "no scale.*w_fligth"),
        ({}, {"sigma_foot": 1.0}, "no scale.*sigma_foot"),
        ({"w_flight": 1.0}, {"w_flight": 2.0}, "given twice.*w_flight"),
        ({"w_flight": -1.0}, {}, "w_flight must be a finite number >= 0"),
        ({"sigma_pos": 0.0}, {}, "sigma_pos must be a finite number > 0"),
        ({"sigma_rot": math.nan}, {}, "sigma_rot"),
        ({"w_tuck": "big"}, {}, "w_tuck"),
        ({"w_tuck": True}, {}, "w_tuck"),
    ],
)
def test_bad_scales_are_named(given, named, match):
    with pytest.raises(ValueError, match=match):
        resolve_scales(given, **named)


def test_pop_scales_takes_only_the_scales():
    kw = {"w_flight": 40.0, "sigma_pos": 0.2, "actions": "residual", "config": {"a": 1}}
    assert pop_scales(kw) == {"w_flight": 40.0, "sigma_pos": 0.2}
    assert kw == {"actions": "residual", "config": {"a": 1}}
