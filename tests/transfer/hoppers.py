"""hopper_jump variants for the transfer tests (importable: ``tests/transfer`` is put on the
path by the tests that use them)."""

import dataclasses

import jax.numpy as jnp
import numpy as np

from bcg.envs.hopper_jump import HopperJump


@dataclasses.dataclass(frozen=True, eq=False)
class ClockedHopper(HopperJump):
    """hopper_jump whose command depends on the state's time (as a residual action around a
    moving reference does), so that delaying the command differs from delaying the action."""

    def action_to_ctrl(self, action, data=None):
        return action + 0.5 * jnp.sin(25.0 * data.time)


@dataclasses.dataclass(frozen=True, eq=False)
class CommandSeeingHopper(ClockedHopper):
    """ClockedHopper that also observes ``data.ctrl`` (as ``G1Tracking(observe_command=True)``
    observes the command in flight)."""

    def observe(self, data):
        return jnp.concatenate([super().observe(data), data.ctrl])


@dataclasses.dataclass(frozen=True, eq=False)
class ScaledHopper(HopperJump):
    """hopper_jump whose command is ``action_scale`` times the action (an action range set by
    an env parameter, as ``G1Tracking.residual_scale`` sets the residual's)."""

    action_scale: float = 1.0

    def action_to_ctrl(self, action, data=None):
        return self.action_scale * action

    @property
    def action_scales(self):
        return np.full(self.action_size, self.action_scale)


def scaled_hopper(stiffness="stiff", **kw) -> ScaledHopper:
    from bcg.envs.tasks import get

    return ScaledHopper(sim=get("hopper").load(stiffness=stiffness), **kw)
