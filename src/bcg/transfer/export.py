"""Export a trained policy to ONNX (``bcg export RUN_DIR --onnx out.onnx``).

The exported graph is the deterministic policy with the observation normalisation folded in:

    input  "obs"     float32 (B, n)   raw observation, as ``env.observe`` returns it
    output "action"  float32 (B, A)   tanh(mu(normalise(obs))) in [-1, 1]^A

Conversion by jax2onnx (``to_onnx``, symbolic batch dimension ``B``); the parameters are
constants of the graph. A sidecar ``<out>.json`` records what a deploy runner needs to map the
action to motor commands: task, sizes, control period, and the actuator table of the training
model (name, joint, kind, ctrl range, gear / PD gains; see :mod:`bcg.transfer.lowlevel`) and,
for a model with a servo gain schedule (:attr:`bcg.sim.Sim.servo_scale_at`), the factors on
those gains per control step of an episode from time 0 (``servo_gain_schedule``).
:func:`check_onnx` runs the file with onnxruntime against the JAX policy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

INPUT_NAME = "obs"
OUTPUT_NAME = "action"


def export_onnx(policy, out_path, *, opset: int = 17) -> Path:
    """Write ``policy`` (a :class:`bcg.transfer.policy.LoadedPolicy`) as ONNX to ``out_path``
    and its metadata to ``out_path`` with suffix ``.json``. Returns the ONNX path."""
    import jax
    import jax.numpy as jnp
    from jax2onnx import to_onnx

    from bcg.transfer.lowlevel import actuator_table

    env = policy.env
    n = int(env.observation_size)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def fn(obs):
        return policy.fn(obs.astype(jnp.float32)).astype(jnp.float32)

    with jax.default_device(jax.devices("cpu")[0]):
        model = to_onnx(
            fn,
            [("B", n)],
            model_name=f"bcg_{policy.run.get('task', 'policy')}",
            opset=opset,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
        )
    out_path.write_bytes(model.SerializeToString())
    meta = {
        "format": "bcg-policy-onnx/1",
        "input": INPUT_NAME,
        "output": OUTPUT_NAME,
        "observation_size": n,
        "action_size": int(env.action_size),
        "task": policy.run.get("task"),
        "training_stiffness": env.sim.stiffness.label,
        "learner": policy.learner,
        "iteration": policy.iteration,
        "control_dt": env.sim.control_dt,
        "physics_dt": env.sim.physics_dt,
        "actuators": actuator_table(env.sim.mj_model),
        "source": str(policy.run_dir),
    }
    if env.sim.servo_scale_at is not None:
        meta["servo_gain_schedule"] = gain_schedule_table(env)
    metadata_path(out_path).write_text(json.dumps(meta, indent=2))
    return out_path


def gain_schedule_table(env) -> dict:
    """The servo gain schedule of ``env.sim`` as a table: per control step ``k`` of an
    episode (time ``k * control_dt`` from 0), the factors on each actuator's kp and kd."""
    at, dt = env.sim.servo_scale_at, env.sim.control_dt
    rows = [at(k * dt) for k in range(int(env.episode_length))]
    return {
        "kp_factor": [np.asarray(kp, float).round(6).tolist() for kp, _ in rows],
        "kd_factor": [np.asarray(kd, float).round(6).tolist() for _, kd in rows],
    }


def metadata_path(onnx_path) -> Path:
    return Path(onnx_path).with_suffix(".json")


class OnnxPolicy:
    """An exported policy run by onnxruntime: ``OnnxPolicy(path)(obs (B, n) or (n,))``."""

    def __init__(self, path):
        import onnxruntime as ort

        self.path = Path(path)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            str(self.path), opts, providers=["CPUExecutionProvider"]
        )
        self.input_name = self.session.get_inputs()[0].name
        meta = metadata_path(self.path)
        self.metadata = json.loads(meta.read_text()) if meta.exists() else {}

    def __call__(self, obs) -> np.ndarray:
        x = np.asarray(obs, np.float32)
        single = x.ndim == 1
        y = self.session.run(None, {self.input_name: x[None] if single else x})[0]
        return y[0] if single else y


def check_onnx(policy, onnx_path, num: int = 256, seed: int = 0, scale: float = 3.0) -> dict:
    """Max abs difference between onnxruntime and the JAX policy on ``num`` random observations
    (standard normal times ``scale`` around the observation normaliser's range: raw
    observations of the env's size)."""
    import jax

    n = int(policy.env.observation_size)
    rng = np.random.default_rng(seed)
    obs = (scale * rng.standard_normal((num, n))).astype(np.float32)
    want = np.asarray(jax.jit(policy.fn)(obs))
    got = OnnxPolicy(onnx_path)(obs)
    err = np.abs(got - want)
    return {"num": num, "max_abs_diff": float(err.max()), "mean_abs_diff": float(err.mean())}
