"""Flight measures of a transfer run: foot clearance in native MuJoCo and in MJX against the
geometry, and the longest flight of a clearance sequence."""

import warnings

import jax
import mujoco
import numpy as np
import pytest

from bcg.sim import load
from bcg.transfer import measures

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from mujoco import mjx

# a body with two spherical "feet" of radius 2 cm above a plane, and a box that is not a foot
XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="torso" pos="0 0 .5">
      <freejoint/>
      <geom type="box" size=".1 .1 .05" pos="0 0 .3"/>
      <geom name="left" type="sphere" size=".02" pos="0 .1 0"/>
      <geom name="right" type="sphere" size=".02" pos="0 -.1 -.03"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("z", [0.5, 0.05, 0.045])  # in the air, just above, touching (-5 mm)
def test_foot_clearance_native_and_mjx_equal_the_geometry(z):
    sim = load(XML, stiffness="soft")
    m = sim.mj_model
    d = mujoco.MjData(m)
    d.qpos[2] = z
    mujoco.mj_forward(m, d)
    feet = np.array([2, 3])
    want = z - 0.03 - 0.02  # the lower (right) sphere's bottom
    assert measures.foot_clearance_native(m, d, feet) == pytest.approx(want, abs=1e-9)
    slots = measures.foot_contact_slots(sim, feet)
    dx = jax.jit(mjx.forward)(sim.mjx_model, mjx.put_data(m, d))
    assert float(measures.foot_clearance_mjx(dx, slots)) == pytest.approx(want, abs=1e-6)


def test_flight_is_the_longest_airborne_stretch():
    c = [-0.001, 0.02, 0.06, 0.03, -0.002, 0.01, 0.0, 0.04]
    top, air = measures.flight(c, 0.02)
    assert top == 0.06 and air == pytest.approx(0.06)
    assert measures.flight([-0.001, 0.0], 0.02) == (0.0, 0.0)  # touching throughout
