"""A tiny floating-base biped with PD position actuators (a G1 stand-in for the deploy tests):
a free-joint box torso, two legs with a hip and a knee each (position actuators, kp 40, kv 2,
one with gear 2), sphere feet, and a floor."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.sim import load

PDBOT_XML = """
<mujoco model="pdbot">
  <option timestep="0.005"/>
  <default>
    <joint damping="0.5" armature="0.05"/>
    <geom condim="3" friction="1 0.005 0.0001" contype="1" conaffinity="0"/>
    <position kp="40" kv="2" ctrllimited="true" ctrlrange="-1 1"/>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1" contype="1" conaffinity="1"/>
    <body name="torso" pos="0 0 0.55">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.15 0.05" mass="3"/>
      <body name="lthigh" pos="0 0.1 -0.05">
        <joint name="lhip" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.5"/>
        <body name="lshin" pos="0 0 -0.2">
          <joint name="lknee" type="hinge" axis="0 1 0" range="-1.5 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.025" mass="0.3"/>
          <geom name="lfoot" type="sphere" pos="0 0 -0.2" size="0.04" mass="0.1"/>
        </body>
      </body>
      <body name="rthigh" pos="0 -0.1 -0.05">
        <joint name="rhip" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.5"/>
        <body name="rshin" pos="0 0 -0.2">
          <joint name="rknee" type="hinge" axis="0 1 0" range="-1.5 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.025" mass="0.3"/>
          <geom name="rfoot" type="sphere" pos="0 0 -0.2" size="0.04" mass="0.1"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="lhip" joint="lhip"/>
    <position name="lknee" joint="lknee" gear="2" ctrlrange="-2 0"/>
    <position name="rhip" joint="rhip" forcerange="-15 15" forcelimited="true"/>
    <position name="rknee" joint="rknee" gear="2" ctrlrange="-2 0"/>
  </actuator>
  <keyframe>
    <key name="init" qpos="0 0 0.53 1 0 0 0 0.3 -0.6 0.3 -0.6"/>
  </keyframe>
</mujoco>
"""


@dataclasses.dataclass(frozen=True, eq=False)
class PDBot(ContactEnv):
    episode_length: int = 50
    fall_height: float = 0.2
    # the robot's motor order differs from the actuator order (as unitree's does)
    motor_joint_names: tuple = ("rhip", "rknee", "lhip", "lknee")

    def reset_state(self, key):
        q0 = jnp.asarray(self.sim.mj_model.key_qpos[0])
        k1, k2 = jax.random.split(key)
        dq = jax.random.uniform(k1, (4,), q0.dtype, -0.1, 0.1)
        v = jax.random.uniform(k2, (self.sim.nv,), q0.dtype, -0.2, 0.2)
        return q0.at[7:].add(dq), v

    def observe(self, data):
        # base height, orientation, body-frame angular velocity, joints: what G1 observes
        # from the IMU and the motors plus an estimated base height / velocity
        return jnp.concatenate([data.qpos[2:], data.qvel])

    def reward(self, data, action, next_data):
        return 1.0 - (next_data.qpos[2] - 0.5) ** 2 - 0.01 * jnp.sum(action**2)

    def terminated(self, data):
        return data.qpos[2] < self.fall_height


def pdbot_env(stiffness="stiff") -> PDBot:
    return PDBot(sim=load(PDBOT_XML, stiffness=stiffness, substeps=4, name="pdbot"))
