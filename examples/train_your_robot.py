"""Train a policy on your own MJCF with SHAC + Bundled Contact Gradients, in one file.

    python examples/train_your_robot.py                       # the built-in jumper below
    python examples/train_your_robot.py --mjcf my_robot.xml   # your model (edit the reward)

Read top to bottom: (1) a model, (2) the task (reset, observation, reward) as a ContactEnv,
(3) the gradient estimator (BCG, bundling only at stiff contact), (4) SHAC, (5) training,
which writes metrics.csv, training.png, TensorBoard events, checkpoints and eval.json to
--run-dir. Minutes on a laptop CPU with the defaults.
"""

import argparse
import dataclasses

import jax
import jax.numpy as jnp

from bcg import estimators
from bcg.envs import ContactEnv
from bcg.learners import harness
from bcg.learners.shac import SHAC, SHACConfig
from bcg.sim import load

# ---------------------------------------------------------------- 1. the model
# A 1.5 kg body on a vertical slide with a motorised leg (prismatic, gear 30 N) ending in a
# foot sphere. Replace it with --mjcf; the reward below reads qpos[0], the body's vertical
# displacement from its MJCF pose (at rest on its spring the jumper sits at -0.059 m).
JUMPER = """
<mujoco model="jumper">
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="body" pos="0 0 .35">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="box" size=".08 .08 .04" mass="1.5"/>
      <body name="leg">
        <joint name="extend" type="slide" axis="0 0 -1" range="-.05 .1" limited="true"
               stiffness="400" damping="2"/>
        <geom type="capsule" fromto="0 0 0 0 0 -.27" size=".015" mass=".2"/>
        <geom type="sphere" pos="0 0 -.3" size=".03" mass=".1"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="extend" gear="30" ctrlrange="-1 1"/></actuator>
</mujoco>
"""


# ---------------------------------------------------------------- 2. the task
@dataclasses.dataclass(frozen=True, eq=False)
class Jump(ContactEnv):
    """Reward: stay alive, be high, move up; a little control cost. All terms are smooth in
    the state, so SHAC can differentiate them."""

    rest_z: float = -0.059

    def reset_state(self, key):
        q = jnp.asarray(self.sim.mj_model.qpos0)
        noise = jax.random.uniform(key, q.shape, minval=-0.01, maxval=0.01)
        return q + noise, jnp.zeros(self.sim.nv)

    def observe(self, data):
        return jnp.concatenate([data.qpos, 0.1 * data.qvel])

    def reward(self, data, action, next_data):
        height = next_data.qpos[0] - self.rest_z
        up = next_data.qvel[0]
        return (
            0.5
            + 10.0 * jax.nn.softplus(20 * height) / 20
            + 0.5 * jax.nn.softplus(up)
            - (0.01 * jnp.sum(action**2))
        )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mjcf", help="path to your MJCF (default: the jumper in this file)")
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--run-dir", default="runs/example_jumper")
    p.add_argument("--eval-episodes", type=int, default=4)
    args = p.parse_args(argv)

    # stiff contact (a 2-physics-step time constant): where analytic gradients explode
    sim = load(args.mjcf or JUMPER, stiffness="stiff", substeps=4)
    env = Jump(sim, episode_length=100)

    # ------------------------------------------------------------ 3. the gradient estimator
    # the paper's bundle (B = 10 branches, H = 2 control steps); tau: the normal force (N)
    # above which a contact group triggers a bundle ("auto" = 1.2 x the model's weight)
    estimator = estimators.make("bcg", num_branches=10, horizon=2, capacity=0.5, tau="auto")

    # ------------------------------------------------------------ 4. SHAC
    config = SHACConfig(num_envs=args.num_envs, horizon=32, actor_hidden=(64, 64))
    learner = SHAC(env, estimator, config, iterations=args.iterations)

    # ------------------------------------------------------------ 5. train
    summary = harness.train(learner, args.run_dir, eval_episodes=args.eval_episodes)
    print(f"results in {args.run_dir}: {summary}")
    return summary


if __name__ == "__main__":
    main()
