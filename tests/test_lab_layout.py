"""Lab and product apart (issue 46): ``benchmarks/`` holds the tools behind documented claims,
``experiments/`` the dated one-question probes. Static checks only (ast and text; nothing is
imported or run):

* no script under benchmarks/ or experiments/ imports another script of those folders, or a
  name starting with ``_`` from one; the only shared module a script may import is its own
  folder's ``common.py``;
* ``sys.path.insert`` / ``append`` in those scripts only ever adds the script's own folder, and
  only in a script that imports that folder's ``common``;
* every file in benchmarks/ (``common.py`` aside) is cited by README.md, docs/**/*.md, tests/,
  scripts/ or .ci, so benchmarks/ holds only documented tools;
* every probe in experiments/<topic>/ is named in that folder's README.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB = [ROOT / "benchmarks", ROOT / "experiments"]
SHARED = "common"


def scripts() -> list[Path]:
    return sorted(
        p for d in LAB if d.is_dir() for p in d.rglob("*.py") if "__pycache__" not in p.parts
    )


def rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def script_modules() -> dict[str, set[Path]]:
    """Module name -> the scripts of benchmarks/ and experiments/ importable under it."""
    out: dict[str, set[Path]] = {}
    for p in scripts():
        out.setdefault(p.stem, set()).add(p)
    return out


def imports(tree: ast.AST):
    """(line, top-level module, imported names or None for ``import X``) of every import,
    module level or inside functions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name.split(".")[0], None
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0], [a.name for a in node.names]


def test_lab_has_scripts():
    assert any(p.parent.name == "benchmarks" for p in scripts())
    assert any("experiments" in p.parts for p in scripts())


@pytest.mark.parametrize("path", scripts(), ids=rel)
def test_no_imports_between_scripts(path):
    modules = script_modules()
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for line, mod, names in imports(tree):
        if not modules.get(mod, set()) - {path}:
            continue
        private = [n for n in names or () if n.startswith("_")]
        if private:
            bad.append(f"line {line}: private {private} from {mod}")
        if mod != SHARED:
            bad.append(f"line {line}: imports the script {mod} (share through {SHARED}.py)")
        elif not (path.parent / f"{SHARED}.py").is_file():
            bad.append(f"line {line}: imports {SHARED} but {rel(path.parent)}/ has no {SHARED}.py")
    aliases = {  # `import X [as Y]` of a script module X
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
        if modules.get(a.name, set()) - {path}
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith("_")
        ):
            bad.append(f"line {node.lineno}: private {node.value.id}.{node.attr}")
    assert not bad, f"{rel(path)}:\n" + "\n".join(bad)


def _is_file_name(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "__file__"


def _own_folder(node, here: set[str]) -> bool:
    """Whether ``node`` evaluates to the folder of the script (``__file__``'s parent), as a
    Path or a str: ``Path(__file__)[.resolve()|.absolute()].parent``, ``str(...)`` of it,
    ``os.path.dirname([os.path.abspath|realpath](__file__))``, or a module-level name bound to
    one of these."""
    if isinstance(node, ast.Name):
        return node.id in here
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = node.value
        while (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Attribute)
            and inner.func.attr in ("resolve", "absolute")
            and not inner.args
        ):
            inner = inner.func.value
        return (
            isinstance(inner, ast.Call)
            and isinstance(inner.func, ast.Name)
            and inner.func.id == "Path"
            and len(inner.args) == 1
            and _is_file_name(inner.args[0])
        )
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        f, arg = node.func, node.args[0]
        if isinstance(f, ast.Name) and f.id == "str":
            return _own_folder(arg, here)
        if ast.unparse(f) == "os.path.dirname":
            while isinstance(arg, ast.Call) and ast.unparse(arg.func) in (
                "os.path.abspath",
                "os.path.realpath",
            ):
                arg = arg.args[0]
            return _is_file_name(arg)
    return False


@pytest.mark.parametrize("path", scripts(), ids=rel)
def test_sys_path_only_for_own_common(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    here: set[str] = set()
    for node in tree.body:  # module-level HERE = Path(__file__).resolve().parent
        if isinstance(node, ast.Assign) and _own_folder(node.value, here):
            here.update(t.id for t in node.targets if isinstance(t, ast.Name))
    inserts = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in ("insert", "append", "extend")
        and ast.unparse(n.func.value) == "sys.path"
    ]
    if not inserts:
        return
    bad = [
        f"line {n.lineno}: {ast.unparse(n)} adds something other than the script's own folder"
        for n in inserts
        if n.func.attr == "extend" or not n.args or not _own_folder(n.args[-1], here)
    ]
    imports_common = any(mod == SHARED for _, mod, _ in imports(tree))
    if not imports_common or not (path.parent / f"{SHARED}.py").is_file():
        bad.append(
            f"sys.path is changed, but the script does not import {rel(path.parent)}/{SHARED}.py"
        )
    assert not bad, f"{rel(path)}:\n" + "\n".join(bad)


def citing_texts() -> dict[str, str]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for d in ("tests", "scripts", ".ci"):
        files += sorted(p for p in (ROOT / d).rglob("*") if p.is_file())
    out = {}
    for p in files:
        if p.resolve() == Path(__file__).resolve() or "__pycache__" in p.parts:
            continue
        try:
            out[rel(p)] = p.read_text()
        except (UnicodeDecodeError, OSError):
            continue
    return out


def test_every_benchmark_is_cited():
    """A file in benchmarks/ is cited as ``benchmarks/NAME``, ``NAME.py``, ``import NAME`` or,
    for an import-path estimator, ``NAME:FACTORY``."""
    texts = citing_texts()
    uncited = []
    for p in sorted((ROOT / "benchmarks").iterdir()):
        if not p.is_file() or p.name == f"{SHARED}.py":
            continue
        stem = re.escape(p.stem)
        pattern = re.compile(
            rf"benchmarks/{re.escape(p.name)}\b|(?<![\w./-]){re.escape(p.name)}\b"
            rf"|import\s+{stem}\b|(?<![\w./-]){stem}:\w"
        )
        if not any(pattern.search(t) for t in texts.values()):
            uncited.append(rel(p))
    assert not uncited, (
        "benchmarks/ files that README.md, docs/**/*.md, tests/, scripts/ and .ci do not cite "
        f"(cite them, or move one-question probes to experiments/<topic>/): {uncited}"
    )


def test_every_probe_is_in_its_readme():
    missing = []
    for folder in sorted(p for p in (ROOT / "experiments").iterdir() if p.is_dir()):
        probes = [p for p in sorted(folder.glob("*.py")) if p.stem != SHARED]
        if not probes:
            continue
        readme = folder / "README.md"
        text = readme.read_text() if readme.is_file() else ""
        missing += [rel(p) for p in probes if not re.search(rf"\b{re.escape(p.name)}\b", text)]
    assert not missing, f"probes their folder's README.md does not name: {missing}"


def test_relative_links_in_the_docs_resolve():
    """Every relative Markdown link of README.md, docs/ and experiments/ names a file or folder
    that exists (anchors are not checked)."""
    link = re.compile(r"\]\(([^)\s]+)\)")
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted((ROOT / "experiments").rglob("*.md"))
    broken = []
    for f in files:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            for m in link.finditer(line):
                target = m.group(1).split("#")[0]
                if target and not target.startswith(("http:", "https:", "mailto:")):
                    if not (f.parent / target).exists():
                        broken.append(f"{f.relative_to(ROOT)}:{i}: {m.group(1)}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)
