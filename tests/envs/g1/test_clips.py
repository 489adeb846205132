"""G1 clips: CSV loader, resampling, finite differences, built-in clips (native MuJoCo FK)."""

import mujoco
import numpy as np
import pytest

from bcg.envs.g1 import clips as gc
from bcg.envs.g1 import model as gm


@pytest.fixture(scope="module")
def m():
    return gm.mj_model(visuals=False)


def _random_clip(T=40, fps=30.0, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(T) / fps
    pos = np.stack([0.3 * t, 0.1 * np.sin(t), 0.75 + 0.05 * np.cos(2 * t)], 1)
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    ang = 0.7 * t
    quat = np.concatenate([np.cos(ang / 2)[:, None], np.sin(ang / 2)[:, None] * axis], 1)
    joints = 0.2 * np.sin(t[:, None] * (1 + np.arange(29)) * 0.3 + rng.uniform(0, 6, 29))
    return gc.from_arrays(pos, quat, joints, fps, name="rand"), axis


def _write(path, rows):
    path.write_text("\n".join(",".join(f"{v}" for v in r) for r in rows) + "\n")


def test_csv_quaternion_order_is_xyzw(tmp_path):
    row = [0.1, 0.2, 0.8, 0.0, 0.0, np.sin(0.25), np.cos(0.25)] + [0.01 * i for i in range(29)]
    _write(tmp_path / "a.csv", [row, row])
    c = gc.load_csv(tmp_path / "a.csv")
    assert c.fps == 30.0
    np.testing.assert_allclose(c.qpos[0, 3:7], [np.cos(0.25), 0, 0, np.sin(0.25)])
    np.testing.assert_allclose(c.qpos[0, :3], [0.1, 0.2, 0.8])
    np.testing.assert_allclose(c.joints[0], 0.01 * np.arange(29))


def test_csv_round_trip_and_header(tmp_path):
    clip, _ = _random_clip()
    p = gc.save_csv(clip, tmp_path / "c.csv")
    text = p.read_text()
    p.write_text("x,y,z,qx,qy,qz,qw," + ",".join(gm.JOINT_NAMES) + "\n" + text)
    back = gc.load_csv(p)
    np.testing.assert_allclose(back.qpos, clip.qpos, atol=1e-6)


def test_csv_errors(tmp_path):
    with pytest.raises(gc.ClipError, match="not found"):
        gc.load_csv(tmp_path / "missing.csv")
    good = [0.0] * 6 + [1.0] + [0.0] * 29
    _write(tmp_path / "cols.csv", [good, good[:-1]])
    with pytest.raises(gc.ClipError, match=r"cols.csv:2: expected 36 columns.*got 35"):
        gc.load_csv(tmp_path / "cols.csv")
    bad = list(good)
    bad[10] = float("nan")
    _write(tmp_path / "nan.csv", [good, bad])
    with pytest.raises(gc.ClipError, match=r"nan.csv:2: NaN or Inf in column 11"):
        gc.load_csv(tmp_path / "nan.csv")
    zero = [0.0] * 36
    _write(tmp_path / "zq.csv", [good, zero])
    with pytest.raises(gc.ClipError, match="zero root quaternion at frame 1"):
        gc.load_csv(tmp_path / "zq.csv")
    _write(tmp_path / "one.csv", [good])
    with pytest.raises(gc.ClipError, match="at least 2 frames"):
        gc.load_csv(tmp_path / "one.csv")


def test_resample_30_to_50_fps():
    clip, axis = _random_clip(T=31, fps=30.0)  # exactly 1 s
    r = gc.resample(clip, 50.0)
    assert r.num_frames == 51 and r.duration == pytest.approx(1.0)
    t = np.arange(51) / 50.0
    # root x is linear in time: exact; the constant-rate rotation: slerp is exact
    np.testing.assert_allclose(r.qpos[:, 0], 0.3 * t, atol=1e-12)
    ang = 0.7 * t
    expect = np.concatenate([np.cos(ang / 2)[:, None], np.sin(ang / 2)[:, None] * axis], 1)
    np.testing.assert_allclose(r.qpos[:, 3:7], expect, atol=1e-12)
    np.testing.assert_allclose(r.qpos[0], clip.qpos[0])
    np.testing.assert_allclose(r.qpos[-1], clip.qpos[-1], atol=1e-12)


def test_finite_difference_qvel_matches_mujoco(m):
    clip, axis = _random_clip(T=20, fps=50.0)
    v = clip.qvel()
    q = clip.qpos
    ref = np.zeros(m.nv)
    for t in range(1, 19):  # central differences vs mj_differentiatePos
        mujoco.mj_differentiatePos(m, ref, 2.0 / 50.0, q[t - 1], q[t + 1])
        np.testing.assert_allclose(v[t], ref, atol=1e-9)
    mujoco.mj_differentiatePos(m, ref, 1.0 / 50.0, q[0], q[1])
    np.testing.assert_allclose(v[0], ref, atol=1e-9)
    # constant-rate rotation about a fixed axis: body-frame angular velocity = 0.7 * axis
    np.testing.assert_allclose(v[:, 3:6], np.tile(0.7 * axis, (20, 1)), atol=1e-9)


def _fk_feet(m, clip):
    d = mujoco.MjData(m)
    feet = gm.foot_geom_ids(m)
    low = np.empty(clip.num_frames)
    xy = np.empty((clip.num_frames, 8, 2))
    for i, q in enumerate(clip.qpos):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        low[i] = np.min(d.geom_xpos[feet, 2] - m.geom_size[feet, 0])
        xy[i] = d.geom_xpos[feet, :2]
    return low, xy


def _airborne_phases(low, thresh=0.005):
    air = low > thresh
    starts = np.flatnonzero(air[1:] & ~air[:-1]) + 1
    ends = np.flatnonzero(~air[1:] & air[:-1]) + 1
    return list(zip(starts, ends, strict=True))


@pytest.mark.parametrize(
    "name,min_air,hops", [("jump", 0.2, 1), ("squat_jump", 0.16, 1), ("hop", 0.08, 3)]
)
def test_builtin_clips_are_kinematically_valid(m, name, min_air, hops):
    clip = gc.BUILTIN_CLIPS[name](fps=50.0)
    assert clip.fps == 50.0 and 2.5 < clip.duration < 5.0
    lo, hi = m.jnt_range[1:].T
    assert np.all(clip.joints >= lo) and np.all(clip.joints <= hi)
    low, xy = _fk_feet(m, clip)
    # feet on the floor (lowest sphere at z = 0) before and after, never below it
    assert np.all(np.abs(low[:10]) < 1e-3) and np.all(np.abs(low[-10:]) < 1e-3)
    assert low.min() > -1e-3
    phases = _airborne_phases(low)
    assert len(phases) == hops
    for a, b in phases:
        assert (b - a) / clip.fps >= min_air
    # no foot sliding while on the floor: frames whose lowest sphere touches keep the spheres
    # where they were at the previous touching frame (a landing moves them)
    on = np.abs(low) < 1e-4
    for i in range(1, clip.num_frames):
        if on[i] and on[i - 1]:
            assert np.max(np.abs(xy[i] - xy[i - 1])) < 2e-3, (name, i)
    # root velocities finite and plausible for the robot
    v = clip.qvel()
    assert np.all(np.isfinite(v)) and np.abs(v[:, 6:]).max() < 20.0


def test_jump_height_and_get_clip(tmp_path):
    jump = gc.get_clip("jump", fps=50.0)
    low, _ = _fk_feet(gm.mj_model(visuals=False), jump)
    assert low.max() > 0.10  # more than 10 cm foot clearance
    p = gc.save_csv(gc.resample(jump, 30.0), tmp_path / "j.csv")
    back = gc.get_clip(str(p), fps=50.0)
    assert back.num_frames == jump.num_frames
    err = np.abs(back.qpos[:, 7:] - jump.qpos[:, 7:])  # 30 fps linear interpolation
    assert err.max() < 0.1 and err.mean() < 0.005
    with pytest.raises(gc.ClipError, match="unknown clip"):
        gc.get_clip("backflip")
