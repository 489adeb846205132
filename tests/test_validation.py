"""The shared construction-time checks of numeric options (bcg.validation)."""

import math

import numpy as np
import pytest
from mjcf_models import SLIDER_ON_PLANE

import bcg.sim as bs
from bcg import estimators as E
from bcg.diagnostics.chunking import chunk_size_for
from bcg.validation import check_int, check_number


@pytest.mark.parametrize(
    "value, kwargs",
    [
        (0.0, {"at_least": 0}),
        (1e-9, {"above": 0}),
        (1, {"at_least": 1}),
        (0.5, {"at_least": 0, "at_most": 1}),
        (np.float32(2.5), {"above": 0}),
        (math.inf, {"above": 0, "allow_inf": True}),
    ],
)
def test_check_number_accepts_values_inside_the_bounds(value, kwargs):
    assert check_number("opt", value, **kwargs) == float(value)


@pytest.mark.parametrize(
    "value, kwargs, rule",
    [
        (0.0, {"above": 0}, "a finite number > 0"),
        (-1e-12, {"at_least": 0}, "a finite number >= 0"),
        (0.99, {"at_least": 1, "optional": True}, "None or a finite number >= 1"),
        (1.5, {"at_least": 0, "at_most": 1}, r"a finite number in \[0, 1\]"),
        (math.inf, {"above": 0}, "a finite number > 0"),
        (math.nan, {"above": 0, "allow_inf": True}, "a number > 0"),
        (True, {"at_least": 0}, "a finite number >= 0"),
        ("3", {"at_least": 0}, "a finite number >= 0"),
        (None, {"at_least": 0}, "a finite number >= 0"),
    ],
)
def test_check_number_names_the_option_and_the_rule(value, kwargs, rule):
    with pytest.raises(ValueError, match=rf"^my_option must be {rule}.*, got {value!r}"):
        check_number("my_option", value, **kwargs)


def test_check_number_optional_none_and_hint():
    assert check_number("opt", None, above=0, optional=True) is None
    with pytest.raises(ValueError, match=r"opt must be a number > 0 \(inf disables it\), got -1"):
        check_number("opt", -1, above=0, allow_inf=True, hint="inf disables it")


def test_check_int():
    assert check_int("n", np.int64(3), 1) == 3
    for bad in (0, 2.0, True, "2"):
        with pytest.raises(ValueError, match=r"^n must be an integer >= 1, got"):
            check_int("n", bad, 1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"substeps": 0}, "substeps must be an integer >= 1, got 0"),
        ({"substeps": 2.0}, "substeps must be an integer >= 1, got 2.0 (float)"),
        ({"timestep": -0.01}, "timestep must be None or a finite number > 0 (seconds), got -0.01"),
        ({"timestep": float("nan")}, "timestep must be None or a finite number > 0 (seconds)"),
        ({"solver_iterations": 0}, "solver_iterations must be an integer >= 1, got 0"),
    ],
)
def test_sim_load_checks_its_numeric_options(kwargs, message):
    with pytest.raises(ValueError) as err:
        bs.load(SLIDER_ON_PLANE, **kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("chunk_size", [0, True, 1.5])
def test_chunk_size_checked(chunk_size):
    with pytest.raises(ValueError, match="chunk_size must be an integer >= 1"):
        chunk_size_for(E.make("analytic"), chunk_size)
    assert chunk_size_for(E.make("analytic"), np.int64(3)) == 3
