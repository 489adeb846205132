"""The import graph of ``src/bcg``: packages import only their own or lower layers, and no
modules import each other in a cycle (module-level and function-level imports alike, read from
the source, so an import inside a function counts)."""

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# lowest first; a package may import packages of its own layer or lower ones
LAYERS = [
    {"validation", "imports", "options"},
    {"sim"},
    {"estimators", "envs"},
    {"diagnostics", "learners"},
    {"transfer"},
    {"cli"},
]


def _modules() -> dict[str, Path]:
    out = {}
    for f in (SRC / "bcg").rglob("*.py"):
        name = ".".join(f.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def _imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the bcg modules it imports (``from bcg.pkg import mod`` names the module)."""
    edges = defaultdict(set)
    for name, f in mods.items():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bcg"):
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    edges[name].add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                edges[name] |= {a.name for a in node.names if a.name.startswith("bcg")}
    return edges


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None  # the bcg package itself
    return next((i for i, layer in enumerate(LAYERS) if parts[1] in layer), None)


def test_every_package_has_a_layer():
    pkgs = {m.split(".")[1] for m in _modules() if m.count(".") >= 1}
    assert pkgs <= set().union(*LAYERS), f"give these a layer: {pkgs - set().union(*LAYERS)}"


def test_no_package_imports_a_higher_layer():
    mods = _modules()
    upward = []
    for src, targets in _imports(mods).items():
        for t in targets:
            a, b = _layer(src), _layer(t)
            if a is not None and b is not None and b > a:
                upward.append(f"{src} -> {t}")
    assert not upward, f"upward imports: {sorted(upward)}"


def test_no_import_cycles():
    mods = _modules()
    edges = _imports(mods)
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in mods or w == v:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in mods:
        if v not in index:
            visit(v)
    assert not cycles, f"modules that import each other: {cycles}"


def test_g1_code_loads_only_when_a_g1_task_is_asked_for():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import bcg.cli, bcg.diagnostics.report, bcg.envs, bcg.learners.harness, "
        "bcg.learners.registry, bcg.transfer.policy\n"
        "from bcg.envs import make_env, env_factory\n"
        "make_env('hopper_jump')\n"
        "before = [m for m in sys.modules if m.startswith('bcg.envs.g1')]\n"
        "env_factory('g1_jump')\n"
        "print(before, 'bcg.envs.g1.tracking' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "True"], out.stdout + out.stderr
