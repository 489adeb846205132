"""``supported_weight``: the weight contacts can have to carry, the scale of ``tau="auto"``."""

import mujoco
import numpy as np
import pytest

from bcg.estimators.trigger import TAU_AUTO_WEIGHT_FACTOR, resolve_tau
from bcg.sim import load
from bcg.sim.model import supported_weight

G = 9.81


def _model(body_xml: str, gravity: str = "0 0 -9.81") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(
        f"""<mujoco><option gravity="{gravity}"/><worldbody>
        <geom type="plane" size="1 1 0.1"/>{body_xml}</worldbody></mujoco>"""
    )


ARM = """<body name="link" pos="0 0 0.5"><joint type="hinge" axis="0 1 0"/>
  <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="4"/></body>"""
BALL = """<body name="ball" pos="0.5 0 0.1"><freejoint/>
  <geom type="sphere" size="0.05" mass="0.5"/></body>"""


def test_free_robot_carries_all_its_weight():
    m = _model(
        """<body pos="0 0 1"><freejoint/><geom type="sphere" size="0.1" mass="2"/>
        <body><joint type="hinge"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.02"
        mass="1"/></body></body>"""
    )
    assert supported_weight(m) == pytest.approx(3 * G)


def test_fixed_arm_counts_only_the_object():
    m = _model(ARM + BALL)
    assert supported_weight(m) == pytest.approx(0.5 * G)
    assert np.sum(m.body_mass) * G == pytest.approx(4.5 * G)  # what the former rule used


def test_vertical_slide_falls_horizontal_does_not():
    planar = """<body pos="0 0 1"><joint type="slide" axis="1 0 0"/>
      <joint type="slide" axis="0 0 1"/><geom type="sphere" size="0.1" mass="2"/></body>"""
    rail = """<body pos="0 0 1"><joint type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.1" mass="3"/></body>"""
    assert supported_weight(_model(planar + rail)) == pytest.approx(2 * G)
    # a slide tilted by a parent's frame: its axis is taken in the world frame
    tilted = """<body pos="0 0 1" euler="0 90 0"><joint type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="3"/></body>"""
    assert supported_weight(_model(tilted + BALL)) == pytest.approx(0.5 * G)


def test_nothing_free_falls_back_to_total_and_no_gravity_is_zero():
    assert supported_weight(_model(ARM)) == pytest.approx(4 * G)
    assert supported_weight(_model(BALL, gravity="0 0 0")) == 0.0


def test_auto_tau_uses_supported_weight():
    sim = load(_model(ARM + BALL))
    assert resolve_tau("auto", sim) == pytest.approx(TAU_AUTO_WEIGHT_FACTOR * 0.5 * G)
    assert resolve_tau(7.0, sim) == 7.0
