"""Contact stiffness presets: the gated preset switches contact on continuously, MuJoCo's default
impedance does not (checked in native MuJoCo, independent of MJX)."""

import mujoco
import numpy as np
import pytest

from bcg.sim.contact import GATE_WIDTH, ContactStiffness, gated_solimp, resolve_stiffness
from bcg.sim.model import load

BALL = """
<mujoco><option timestep="0.005"/>
  <worldbody><geom name="floor" type="plane" size="5 5 .1"/>
    <body pos="0 0 0.4"><freejoint/><geom type="sphere" size="0.1" mass="1"/></body>
  </worldbody></mujoco>"""


def _rebound_speed(m, d, height):
    """Vertical velocity 0.3 s after dropping the ball from ``height`` at 2 m/s (one bounce)."""
    mujoco.mj_resetData(m, d)
    d.qpos[2] = height
    d.qvel[2] = -2.0
    for _ in range(60):
        mujoco.mj_step(m, d)
    return float(d.qvel[2])


def _largest_jump_after_zoom(m, zooms=5):
    """Zoom into the largest jump of v(height) on a grid; return the jump left at a 1e-12 m grid.

    A discontinuous v keeps its jump at every zoom; a continuous one shrinks it towards 0.
    """
    d = mujoco.MjData(m)
    lo, hi = 0.39, 0.41
    jump = np.inf
    for _ in range(zooms):
        grid = np.linspace(lo, hi, 101)
        v = np.array([_rebound_speed(m, d, h) for h in grid])
        j = int(np.argmax(np.abs(np.diff(v))))
        jump = abs(v[j + 1] - v[j])
        lo, hi = grid[j], grid[j + 1]
    return jump, hi - lo


def test_gated_contact_is_continuous_default_impedance_is_not():
    stiff = load(BALL, stiffness="stiff", dampratio=0.5).mj_model
    gated = load(BALL, stiffness="gated", dampratio=0.5).mj_model
    jump_stiff, width = _largest_jump_after_zoom(stiff)
    jump_gated, _ = _largest_jump_after_zoom(gated)
    assert width < 1e-11
    assert jump_stiff > 0.5  # m/s: MuJoCo's default impedance switches on with a jump
    assert jump_gated < 1e-3  # continuous: the jump vanishes under refinement


def test_gated_preset_sets_solimp_and_stiff_timeconst():
    sim = load(BALL, stiffness="gated:0.01")
    assert np.allclose(sim.mj_model.geom_solref[:, 0], 0.01)
    assert np.allclose(sim.mj_model.geom_solimp, gated_solimp(0.01))
    assert np.allclose(np.asarray(sim.mjx_model.geom_solimp), gated_solimp(0.01))
    default = resolve_stiffness("gated", 0.005)
    assert default.solimp == gated_solimp(GATE_WIDTH)
    assert default.timeconst == 0.01
    # plain stiff keeps the MJCF's impedance
    assert resolve_stiffness("stiff", 0.005).solimp is None
    assert isinstance(default, ContactStiffness)


@pytest.mark.parametrize("bad", ["gated:0", "gated:-1", "gated:abc", "gated:nan"])
def test_gated_bad_width_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="gated contact width"):
        resolve_stiffness(bad, 0.005)
