"""Sim-to-sim transfer, export and deployment of trained policies.

* :mod:`bcg.transfer.policy`: load a run's deterministic policy (normalisation folded in);
* :mod:`bcg.transfer.native`: run it in native MuJoCo (``bcg transfer``); the names of
  :mod:`~bcg.transfer.config` (settings), :mod:`~bcg.transfer.model` (the native model),
  :mod:`~bcg.transfer.bridge` (native <-> MJX), :mod:`~bcg.transfer.measures` (fall, tracking,
  foot penetration), :mod:`~bcg.transfer.randomizer` (domain randomisation),
  :mod:`~bcg.transfer.runs` (native and training-sim episodes), :mod:`~bcg.transfer.render`
  (video) and :mod:`~bcg.transfer.report` (the report);
* :mod:`bcg.transfer.export`: ONNX export (``bcg export``) and an onnxruntime policy;
* :mod:`bcg.transfer.lowlevel`: unitree_sdk2 ``unitree_hg`` LowCmd / LowState messages and the
  actuator mapping;
* :mod:`bcg.transfer.deploy`: the 50 Hz deploy runner and its transports (native MuJoCo
  standing in for the robot; the real robot through unitree_sdk2py).
"""
