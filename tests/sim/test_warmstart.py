"""``bcg.sim.load(..., warmstart=...)``: the MJX solver's warm start on, off or as in the MJCF."""

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

import bcg.sim as bs

BOX = """<mujoco><option timestep="0.005"/><worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
</worldbody></mujoco>"""
FLAG = int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)


def test_flag():
    assert not int(bs.load(BOX).mjx_model.opt.disableflags) & FLAG  # MJCF default: on
    assert not int(bs.load(BOX, warmstart=True).mjx_model.opt.disableflags) & FLAG
    sim = bs.load(BOX, warmstart=False)
    assert int(sim.mjx_model.opt.disableflags) & FLAG
    assert not int(sim.mj_model.opt.disableflags) & FLAG  # the native model is untouched
    off = BOX.replace(
        '<option timestep="0.005"/>',
        '<option timestep="0.005"><flag warmstart="disable"/></option>',
    )
    assert int(bs.load(off).mjx_model.opt.disableflags) & FLAG
    assert not int(bs.load(off, warmstart=True).mjx_model.opt.disableflags) & FLAG


def test_step_ignores_qacc_warmstart_when_off():
    """One solver iteration, a sliding box: the step depends on qacc_warmstart only when the
    warm start is on."""
    out = {}
    for ws in (True, False):
        sim = bs.load(BOX, stiffness="soft", substeps=1, warmstart=ws)
        d = bs.make_data(sim)
        d = d.replace(qpos=d.qpos.at[2].set(0.099), qvel=d.qvel.at[0].set(1.5))
        step = jax.jit(lambda d, sim=sim: bs.control_step(sim, d, jnp.zeros(0))[0].qvel)
        guess = d.qacc_warmstart.at[0].set(-30.0)  # a plausible, wrong guess (sliding stop)
        out[ws] = (np.asarray(step(d)), np.asarray(step(d.replace(qacc_warmstart=guess))))
    np.testing.assert_array_equal(*out[False])
    assert np.max(np.abs(out[True][0] - out[True][1])) > 1e-6
