"""Per-step statistics that every step estimator returns alongside its carry."""

from __future__ import annotations

from typing import NamedTuple

import jax


class StepStats(NamedTuple):
    """Counts over the environment batch at one control step (int32 scalars).

    ``triggered``: environments whose step met the stiff-contact trigger (BCG: started a
    bundle; the analytic step counts them for comparison). ``bundled``: environments whose step
    was a bundle step. ``overflow``: environments that needed a bundle but found no free slot.
    """

    triggered: jax.Array
    bundled: jax.Array
    overflow: jax.Array
