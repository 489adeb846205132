"""A contact-free toy environment for fast learner tests: a 1 kg point mass on a slide, pushed
by a motor (gear 5, ctrl in [-1, 1]), rewarded for being at x = 0.5."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from bcg.envs.base import ContactEnv
from bcg.sim import load

TOY_XML = """
<mujoco model="toy">
  <option timestep="0.01"/>
  <worldbody>
    <body name="mass">
      <joint name="x" type="slide" axis="1 0 0" damping="0"/>
      <geom type="sphere" size="0.05" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="x" gear="5" ctrlrange="-1 1" ctrllimited="true"/></actuator>
</mujoco>
"""


@dataclasses.dataclass(frozen=True, eq=False)
class Toy(ContactEnv):
    episode_length: int = 20
    limit: float = 1.0

    def reset_state(self, key):
        q = jax.random.uniform(key, (1,), minval=-0.1, maxval=0.1)
        return q, jnp.zeros((1,))

    def observe(self, data):
        return jnp.concatenate([data.qpos, data.qvel])

    def reward(self, data, action, next_data):
        return 1.0 - (next_data.qpos[0] - 0.5) ** 2 - 0.01 * jnp.sum(action**2)

    def terminated(self, data):
        return jnp.abs(data.qpos[0]) > self.limit


def toy_env(**kw) -> Toy:
    return Toy(sim=load(TOY_XML, stiffness="model", substeps=2, name="toy"), **kw)


def toy_task(stiffness="model", episode_length: int = 20, limit: float = 1.0) -> Toy:
    """``toy_env`` as a task factory (``--task toy:toy_task``; contact-free, so the stiffness is
    ignored)."""
    return toy_env(episode_length=episode_length, limit=limit)
