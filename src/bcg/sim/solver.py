"""A reverse-mode differentiable MJX constraint solver: fixed-length scan of solver iterations.

MJX's ``solver.solve`` runs its Newton / CG iterations in a ``lax.while_loop`` (unless
``opt.iterations == 1``), which reverse-mode autodiff cannot differentiate. :func:`scan_solve`
is the same algorithm (warm start, line search, Newton or Polak-Ribiere CG update, the same
stopping test) with the loop written as a ``lax.scan`` of exactly ``opt.iterations`` steps whose
body is a no-op once converged (MJX's own line search uses the same device). Its cost is
``opt.iterations`` solver iterations per physics step whatever the convergence (under ``vmap``
both sides of the no-op ``cond`` run), so keep ``iterations`` small: 1 to 8.

Its line search (a zoom of up to ``opt.ls_iterations`` steps) is left out of the reverse pass:
the step size's derivative comes from the implicit function theorem at the step it found
(:func:`fixed_step_linesearch`), so the gradient is the one through the iterations (to the
line search's tolerance) at the cost of one evaluation of the cost's slope.

:func:`differentiable_solver` swaps it in while a step is traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mujoco

from bcg.sim import mjx_compat as C
from bcg.sim.mjx_compat import (
    EFC_FORCE_PATH,
    ConeType,
    DisableBit,
    SolverType,
    solver_replaced,
)
from bcg.sim.mjx_compat import solver_internals as _mjx_solver
from bcg.sim.spd_solve import spd_solve

MAX_SCAN_ITERATIONS = 8


def scan_solve(m, d, linesearch=None):
    """MJX ``solve`` with its while loop replaced by a fixed-length scan (see module doc);
    ``linesearch(m, d, ctx)``: the line search of each iteration (default MJX's,
    :func:`fixed_step_linesearch` leaves its iterations out of the backward pass)."""
    S = _mjx_solver
    linesearch = linesearch or S._linesearch

    def cond(ctx):
        improvement = S._rescale(m, d, ctx.prev_cost - ctx.cost)
        gradient = S._rescale(m, d, S.math.norm(ctx.grad))
        done = ctx.solver_niter >= m.opt.iterations
        done |= improvement < m.opt.tolerance
        done |= gradient < m.opt.tolerance
        return ~done

    def body(ctx):
        ctx = linesearch(m, d, ctx)
        prev_grad, prev_mgrad = ctx.grad, ctx.Mgrad
        ctx = S._update_constraint(m, d, ctx)
        ctx = S._update_gradient(m, d, ctx)
        if m.opt.solver == SolverType.NEWTON:
            search = -ctx.Mgrad
        else:
            beta = jnp.dot(ctx.grad, ctx.Mgrad - prev_mgrad)
            beta = beta / jnp.maximum(mujoco.mjMINVAL, jnp.dot(prev_grad, prev_mgrad))
            beta = jnp.maximum(0, beta)
            search = -ctx.Mgrad + beta * ctx.search
        return ctx.replace(search=search, solver_niter=ctx.solver_niter + 1)

    qacc = d.qacc_smooth
    if not m.opt.disableflags & DisableBit.WARMSTART:
        warm = S.Context.create(m, d.replace(qacc=d.qacc_warmstart), grad=False)
        smth = S.Context.create(m, d.replace(qacc=d.qacc_smooth), grad=False)
        qacc = jnp.where(warm.cost < smth.cost, d.qacc_warmstart, d.qacc_smooth)
    d = d.replace(qacc=qacc)
    ctx = S.Context.create(m, d)
    if m.opt.iterations == 1:
        ctx = body(ctx)
    else:
        ctx = S._while_loop_scan(cond, body, ctx, m.opt.iterations)
    return d.tree_replace(
        {
            "qfrc_constraint": ctx.qfrc_constraint,
            "qacc": ctx.qacc,
            EFC_FORCE_PATH: ctx.efc_force,
        }
    )


def _slope(m, d, ctx, alpha):
    """``(phi'(alpha), phi''(alpha))`` of the line search's cost ``phi(alpha) = cost(qacc + alpha
    s)`` along ``s = ctx.search``: MJX's quadratics and evaluation point (pyramidal cones),
    differentiable in everything but the active set."""
    S = _mjx_solver
    s = ctx.search
    efc_j, efc_d = C.constraint_rows(d)
    mv, jv = C.mul_m(m, d, s), efc_j @ s
    quad_gauss = jnp.stack(
        (ctx.gauss, jnp.dot(s, ctx.Ma) - jnp.dot(s, d.qfrc_smooth), 0.5 * jnp.dot(s, mv))
    )
    quad = jnp.stack((0.5 * ctx.Jaref * ctx.Jaref, jv * ctx.Jaref, 0.5 * jv * jv))
    point = S._LSPoint.create(m, d, ctx, alpha, jv, (quad * efc_d).T, quad_gauss, 0, 0, 0, 0)
    return point.deriv_0, point.deriv_1


def fixed_step_linesearch(m, d, ctx, implicit: bool = True):
    """MJX's line search, its iterations left out of the reverse pass.

    The solver iteration moves ``qacc' = qacc + alpha s`` (and ``Ma``, ``Jaref`` along ``M s``
    and ``J s``) with ``alpha`` from a zoom line search. The forward values here are MJX's, bit
    for bit; the derivative of ``alpha`` is that of the exact minimiser of ``phi(alpha) =
    cost(qacc + alpha s)`` (the implicit function theorem on ``phi'(alpha) = 0``):

        d alpha = -(d phi')(alpha) / phi''(alpha)          (implicit=True)
        d alpha = 0                                         (implicit=False: a frozen step)

    and ``d qacc' = d qacc + alpha d s + (d alpha) s`` (likewise ``Ma``, ``Jaref``). A frozen
    step leaves out ``(d alpha) s``, which vanishes only where the solver has converged
    (``s = 0``). Pyramidal cones only (the quadratics of :func:`_slope`)."""
    if m.opt.cone == ConeType.ELLIPTIC:
        raise NotImplementedError("fixed_step_linesearch: pyramidal cones only")
    sg = jax.lax.stop_gradient
    new = _mjx_solver._linesearch(sg(m), sg(d), sg(ctx))
    search = ctx.search
    step = new.qacc - sg(ctx.qacc)  # improved * alpha * s
    norm2 = jnp.dot(sg(search), sg(search))
    alpha = sg(jnp.where(norm2 > 0, jnp.dot(step, sg(search)) / jnp.where(norm2 > 0, norm2, 1), 0))
    tangent = jnp.zeros_like(alpha)  # value 0, derivative d alpha
    if implicit:
        slope, curvature = _slope(m, d, ctx, alpha)
        ok = (alpha != 0) & (sg(curvature) > 0)
        tangent = jnp.where(ok, -(slope - sg(slope)) / jnp.where(ok, sg(curvature), 1), 0)
    efc_j, _ = C.constraint_rows(d)

    def moved(value, start, direction):  # the value forward, d start + alpha d s + d alpha s
        return (
            sg(value)
            + (start - sg(start))
            + alpha * (direction - sg(direction))
            + tangent * sg(direction)
        )

    return ctx.replace(
        qacc=moved(new.qacc, ctx.qacc, search),
        Ma=moved(new.Ma, ctx.Ma, C.mul_m(m, d, search)),
        Jaref=moved(new.Jaref, ctx.Jaref, efc_j @ search),
    )


def solve_m(m, d, x):
    """MJX's ``smooth.solve_m`` (``M^{-1} x``): for a dense mass matrix through
    :func:`bcg.sim.spd_solve.spd_solve` (same values, a backward pass without the Cholesky
    factorisation's); a sparse one is left to MJX."""
    if C.is_sparse(m):
        return C.original_internal("solve_m")(m, d, x)
    return spd_solve(C.mass_matrix(d), x)


def update_gradient(m, d, ctx):
    """MJX's ``solver._update_gradient`` for the Newton solver with pyramidal cones:

        grad = M qacc - qfrc_smooth - qfrc_constraint,
        H = M + J^T diag(D * active) J,   Mgrad = H^{-1} grad

    with ``H`` symmetrised and solved by :func:`bcg.sim.spd_solve.spd_solve` (MJX factors and
    solves with the same operations; only the backward pass differs). Other solvers and cones:
    MJX's own."""
    if m.opt.solver != SolverType.NEWTON or m.opt.cone == ConeType.ELLIPTIC:
        return C.original_internal("update_gradient")(m, d, ctx)
    grad = ctx.Ma - d.qfrc_smooth - ctx.qfrc_constraint
    efc_j, efc_d = C.constraint_rows(d)
    h = C.full_mass_matrix(m, d) + (efc_j.T * efc_d * ctx.active) @ efc_j
    return ctx.replace(grad=grad, Mgrad=spd_solve((h + h.T) * 0.5, grad))


def scan_solve_fixed_step(m, d):
    """:func:`scan_solve` with :func:`fixed_step_linesearch` (the line search's iterations out
    of the backward pass, its step differentiated implicitly); MJX's line search for elliptic
    cones."""
    if m.opt.cone == ConeType.ELLIPTIC:
        return scan_solve(m, d)
    return scan_solve(m, d, linesearch=fixed_step_linesearch)


def differentiable_solver():
    """Context: within it, MJX steps traced in this thread use :func:`scan_solve_fixed_step`,
    and their linear solves with the mass matrix and the Newton Hessian use :func:`solve_m`
    and :func:`update_gradient` (a guarded swap, :func:`bcg.sim.mjx_compat.solver_replaced`)."""
    return solver_replaced(scan_solve_fixed_step, solve_m=solve_m, update_gradient=update_gradient)
