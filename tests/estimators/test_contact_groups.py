"""Contact groups and limb paths (bcg.estimators.contact_groups) on a floating-base humanoid (the
G1), a planar hopper with unactuated root joints and a fixed-base arm."""

import mujoco
import numpy as np
import pytest

from bcg.envs.g1 import model as g1m
from bcg.envs.tasks import HOPPER_XML
from bcg.estimators.contact_groups import limb_paths

ARM_XML = """
<mujoco model="arm">
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
      <body name="fore" pos="0.4 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom name="tip" type="sphere" pos="0.4 0 0" size="0.04"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="shoulder"/><motor joint="elbow"/></actuator>
</mujoco>
"""


def _dof_names(m, mask):
    names = []
    for j in range(m.njnt):
        if mask[int(m.jnt_dofadr[j])]:
            names.append(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j))
    return names


@pytest.fixture(scope="module")
def g1():
    return g1m.mj_model()


@pytest.mark.parametrize("side", ["left", "right"])
def test_g1_foot_limb_is_its_leg_and_never_the_base(g1, side):
    paths = limb_paths(g1)
    foot = mujoco.mj_name2id(g1, mujoco.mjtObj.mjOBJ_BODY, f"{side}_ankle_roll_link")
    names = _dof_names(g1, paths.dof_mask[foot])
    assert sorted(names) == sorted(
        f"{side}_{j}_joint"
        for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
    )
    assert paths.floating[:6].all() and not paths.floating[6:].any()  # the free joint only
    assert not (paths.dof_mask & paths.floating).any()  # no limb moves the floating base
    # the foot's collision geoms belong to the foot's group
    geoms = np.flatnonzero(g1.geom_bodyid == foot)
    assert len(geoms) and np.all(paths.geom_group[geoms] == foot)


def test_hopper_limb_stops_below_the_unactuated_root():
    m = mujoco.MjModel.from_xml_string(HOPPER_XML)
    paths = limb_paths(m)
    shin = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "shin")
    assert _dof_names(m, paths.dof_mask[shin]) == ["hip", "knee"]
    assert _dof_names(m, paths.floating) == ["rootx", "rootz", "rooty"]
    floor = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert paths.geom_group[floor] == -1


def test_fixed_base_arm_limb_reaches_the_world():
    m = mujoco.MjModel.from_xml_string(ARM_XML)
    paths = limb_paths(m)
    fore = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "fore")
    upper = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "upper")
    assert _dof_names(m, paths.dof_mask[fore]) == ["shoulder", "elbow"]
    assert _dof_names(m, paths.dof_mask[upper]) == ["shoulder"]
    assert not paths.floating.any()
