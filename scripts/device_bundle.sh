#!/usr/bin/env bash
# What benchmarks/device_g1.sh needs on a GPU machine without network or MuJoCo: wheels of
# MuJoCo, MJX and their small pure dependencies for CPython 3.12 into .whl/, and the G1 MJCF
# (with its meshes) from the installed playground package into .g1xml/. Both are git-ignored
# (.git/info/exclude); carry them to that machine (the SHAC checkpoint is tracked, under
# results/g1/shac_checkpoints/)
# (and .jaxcache.tar, a copy of a previous run's OUT/jax_cache.tar, if there is one).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
grep -qs '^/.whl/$' .git/info/exclude || printf '/.whl/\n/.g1xml/\n/.jaxcache.tar\n' >> .git/info/exclude
mkdir -p .whl
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64"
plat="$plat --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
for pkg in mujoco==4.0.0 mujoco-core==4.0.0 mujoco-mjx==3.17.0 glfw trimesh tensorboardx==2.6.5; do
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp $plat -d .whl "$pkg"
done
src=$($PY -c "import importlib.util as u, pathlib as p; \
print(p.Path(u.find_spec('mujoco_playground').origin).parent / '_src/locomotion/g1/xmls')")
rm -rf .g1xml && cp -r "$src" .g1xml
du -sh .whl .g1xml
