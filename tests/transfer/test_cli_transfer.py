"""``bcg export`` / ``bcg transfer`` / ``bcg deploy`` end to end on the tiny hopper checkpoint."""

import json

from bcg import cli


def test_cli_export_transfer_deploy(hopper_run, tmp_path, capsys, restore_jax):
    run_dir = hopper_run[0]
    onnx = tmp_path / "p.onnx"
    assert cli.main(["export", str(run_dir / "checkpoints" / "1"), "--onnx", str(onnx)]) == 0
    out = capsys.readouterr().out
    assert "max abs diff" in out and onnx.exists() and onnx.with_suffix(".json").exists()

    js = tmp_path / "t.json"
    argv = ["transfer", str(run_dir), "--runs", "1", "--seconds", "0.2", "--out", str(js)]
    assert cli.main([*argv, "--render", "--video", str(tmp_path / "v.mp4")]) == 0
    out = capsys.readouterr().out
    assert "| native MuJoCo | 1 |" in out and "| training sim (MJX) | 1 |" in out
    rep = json.loads(js.read_text())
    assert rep["native"]["summary"]["runs"] == 1 and rep["steps"] == 10
    # rendering either worked (an mp4 or a PNG strip) or says that it is unavailable
    assert (
        (tmp_path / "v.mp4").exists()
        or (tmp_path / "v.png").exists()
        or "rendering unavailable" in out
    )

    assert cli.main(["deploy", str(run_dir), "--onnx", str(onnx), "--seconds", "0.1"]) == 0
    assert "for 5 control steps at 50 Hz on native MuJoCo" in capsys.readouterr().out
    assert cli.main(["deploy", str(run_dir), "--interface", "lo", "--seconds", "0.1"]) == 2
    assert "unitree_sdk2py" in capsys.readouterr().err
    assert cli.main(["transfer", str(run_dir), "--runs", "0"]) == 2
    capsys.readouterr()
    assert cli.main(["transfer", str(run_dir), "--randomization", "all,-friction"]) == 2
    assert "has no randomisation table of its own" in capsys.readouterr().err
    assert cli.main(["transfer", str(run_dir), "--max-root-speed", "-1"]) == 2
    assert "--max-root-speed must be >= 0" in capsys.readouterr().err
