"""BCG with clipped branch sensitivities, as import-path estimators for ``bcg grad``.

``bcg grad --task hopper --estimators analytic,branch_clip_variants:clip1,branch_clip_variants:clip3
--sweep ''`` (with ``PYTHONPATH=benchmarks``) compares c = 1 and c = 3 in one run; a single
value is ``--estimators analytic,bcg --param bcg.branch_clip=3``.
"""

from bcg.estimators.bcg import BCG


def clip1(**kw) -> BCG:
    """Branch cotangents clipped to the branch median (c = 1)."""
    return BCG(branch_clip=1.0, name="bcg_clip1", **kw)


def clip3(**kw) -> BCG:
    """Branch cotangents clipped to 3 x the branch median."""
    return BCG(branch_clip=3.0, name="bcg_clip3", **kw)
