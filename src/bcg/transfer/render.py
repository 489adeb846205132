"""Video of a native transfer run: an off-screen MuJoCo renderer (with a headless GL fallback),
a tracking camera, and an mp4 writer (a PNG strip of frames where no mp4 writer works)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import mujoco
import numpy as np

from bcg.transfer.config import TransferConfig


def make_renderer(m, cfg: TransferConfig):
    """A ``mujoco.Renderer`` or a string saying why rendering is unavailable.

    With MUJOCO_GL set, MuJoCo's choice is used. Without it and without a display (where
    MuJoCo's default, GLFW, cannot work and a failed GLFW attempt can abort the process), EGL
    and then OSMesa are tried."""
    h, w = cfg.render_size
    h, w = min(h, int(m.vis.global_.offheight)), min(w, int(m.vis.global_.offwidth))
    # a brighter headlight (visual only) for models without lights of their own
    m.vis.headlight.ambient = np.maximum(m.vis.headlight.ambient, 0.3)
    m.vis.headlight.diffuse = np.maximum(m.vis.headlight.diffuse, 0.7)
    gl = os.environ.get("MUJOCO_GL")
    if gl or os.environ.get("DISPLAY"):
        try:
            return mujoco.Renderer(m, h, w)
        except Exception as e:  # noqa: BLE001 - any GL failure means "no rendering"
            first = f"{type(e).__name__}: {e}".splitlines()[0]
            return f"rendering unavailable (MUJOCO_GL={gl or 'default'}: {first})"
    from mujoco.rendering.classic import gl_context

    orig, errors = gl_context.GLContext, []
    for backend in ("egl", "osmesa"):
        try:
            mod = __import__(f"mujoco.{backend}", fromlist=["GLContext"])
            gl_context.GLContext = mod.GLContext
            return mujoco.Renderer(m, h, w)
        except Exception as e:  # noqa: BLE001
            gl_context.GLContext = orig
            errors.append(f"{backend}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
    return (
        f"rendering unavailable (no display; {'; '.join(errors)}): set MUJOCO_GL=egl or "
        "MUJOCO_GL=osmesa with a working EGL / OSMesa library"
    )


def render_frame(renderer, m, d) -> np.ndarray:
    """One frame of ``d`` from a camera tracking the first body."""
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
    cam.trackbodyid = 1 if m.nbody > 1 else 0
    cam.distance = max(1.5, 1.5 * float(m.stat.extent))
    cam.elevation = -15.0
    cam.azimuth = 90.0
    renderer.update_scene(d, camera=cam)
    return renderer.render().copy()


def save_video(frames, path, fps: float) -> str:
    """Write ``frames`` as an mp4 (imageio + ffmpeg) or, failing that, a PNG strip of up to 8
    frames next to it. Returns a line saying what was written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import imageio.v2 as imageio

        with warnings.catch_warnings():  # imageio-ffmpeg runs ffmpeg as a subprocess (fork+exec)
            warnings.filterwarnings("ignore", message="os.fork", category=RuntimeWarning)
            imageio.mimwrite(str(path), frames, fps=fps, macro_block_size=1)
        return f"video: {path} ({len(frames)} frames, {fps:g} fps)"
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}".splitlines()[0]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = np.linspace(0, len(frames) - 1, min(8, len(frames))).astype(int)
    fig, axes = plt.subplots(1, len(idx), figsize=(2.5 * len(idx), 2.2))
    for ax, k in zip(np.atleast_1d(axes), idx, strict=True):
        ax.imshow(frames[k])
        ax.set_title(f"t={k / fps:.2f}s", fontsize=8)
        ax.axis("off")
    png = path.with_suffix(".png")
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return f"frames: {png} (no mp4 writer: {why})"
