"""A PNG strip of chosen frames of a video (e.g. a ``bcg transfer --render`` mp4), labelled with
their control step and time.

    python experiments/g1_jump/frame_strip.py VIDEO --frames 0,55,70,76,84,155 --fps 50 \\
        --out strip.png
"""

from __future__ import annotations

import argparse

import imageio.v2 as imageio
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("video")
    p.add_argument("--frames", required=True, help="comma-separated frame indices")
    p.add_argument("--fps", type=float, default=50.0)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    want = [int(x) for x in a.frames.split(",")]
    frames = imageio.mimread(a.video, memtest=False)
    bad = [k for k in want if not 0 <= k < len(frames)]
    if bad:
        raise SystemExit(f"frames {bad} outside the video's 0..{len(frames) - 1}")
    fig, axes = plt.subplots(1, len(want), figsize=(2.4 * len(want), 2.6))
    for ax, k in zip(axes if len(want) > 1 else [axes], want, strict=True):
        ax.imshow(frames[k])
        ax.set_title(f"step {k}, {k / a.fps:.2f} s", fontsize=8)
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(f"wrote {a.out} ({len(want)} frames of {len(frames)})")


if __name__ == "__main__":
    main()
