"""results/manifest.json against the tree and the docs (file checks only: no JAX, no MuJoCo).

* every file under results/ (tracked, or present and not git-ignored) is named by an entry;
* every file or folder an entry names exists, unless the entry's commit is "pending";
* every ``results/...`` path that README.md or docs/*.md cites exists (paths with glob
  characters are skipped; an upper-case placeholder such as TASK matches any name), so
  removing a cited file fails here;
* results/ stays small: at most 8 MB apart from the policy and checkpoints that other work
  needs (SIZE_EXEMPT).
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
MANIFEST = RESULTS / "manifest.json"
MAX_BYTES = 8_000_000

# Kept whole, outside the size budget: policy A (the jump policy the transfer work uses), and the
# SHAC checkpoints that benchmarks/g1_policy_gradient.py restores by default (DEFAULT_RUN,
# JUMP_RUN). Each exemption holds only while that user still names it (test below).
SIZE_EXEMPT = {
    "results/g1/A_stage29_ff1/": "docs/g1.md",
    "results/g1/shac_checkpoints/analytic_it50/": "benchmarks/g1_policy_gradient.py",
    "results/g1/shac_checkpoints/A_jump_critic20/": "benchmarks/g1_policy_gradient.py",
    # one resumable checkpoint per unfinished arm of the G1 jump recipe (issue 44), while one is:
    "results/g1/jump_in_progress/": "docs/g1_jump_protocol.md",
    # the last policy of every finished arm (issue 44)
    "results/g1/jump/": "docs/g1_jump_protocol.md",
}
ENTRY_KEYS = {"claim", "cited_by", "command", "commit", "files"}
GLOB_CHARS = set("*?[]{}")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]+$")  # TASK, RUN, ... in a documented command
# not after "REV:" (`git show 82ee579:results/...` names a file in git history, not the tree)
DOC_PATH = re.compile(r"(?<![\w/.:])results/[^\s`'\"()<>|\[\]]*")


@pytest.fixture(scope="module")
def manifest():
    return json.loads(MANIFEST.read_text())


def _git(*args):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def result_files():
    """Files under results/: tracked ones and present ones git does not ignore (every present
    file where git is unavailable), manifest.json excepted."""
    out = _git("ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "results")
    if out is None:
        files = {p.relative_to(ROOT).as_posix() for p in RESULTS.rglob("*") if p.is_file()}
    else:
        files = {f for f in out.split("\0") if f}
    files.discard("results/manifest.json")
    return sorted(files)


def covers(name: str, path: str) -> bool:
    return path == name or (name.endswith("/") and path.startswith(name))


def doc_files():
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def cited_paths():
    """(doc, line, path) for every results/ path README.md and docs/*.md cite, without glob
    characters; "a,b" lists are split."""
    for doc in doc_files():
        for i, line in enumerate(doc.read_text().splitlines(), 1):
            for m in DOC_PATH.finditer(line):
                if GLOB_CHARS & set(m.group(0)):
                    continue
                for part in m.group(0).split(","):
                    part = part.rstrip(".,:;")
                    if part.startswith("results/"):
                        yield doc.relative_to(ROOT).as_posix(), i, part


def exists(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    pattern = "/".join("*" if PLACEHOLDER.match(p) else p for p in parts)
    if pattern == path.rstrip("/"):
        return (ROOT / path).exists()
    return any(ROOT.glob(pattern))


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(doc: Path):
    return {slug(line.lstrip("#")) for line in doc.read_text().splitlines() if line.startswith("#")}


def test_entries_are_well_formed(manifest):
    assert manifest["entries"], "no entries"
    for e in manifest["entries"]:
        assert set(e) == ENTRY_KEYS, e
        assert e["claim"].strip() and "\n" not in e["claim"], e
        assert e["command"].strip(), e
        assert e["commit"] == "pending" or re.fullmatch(r"[0-9a-f]{7,40}", e["commit"]), e
        assert e["files"] and all(f.startswith("results/") for f in e["files"]), e
        assert "results/manifest.json" not in e["files"], e
        assert e["cited_by"], e
        for ref in e["cited_by"]:
            doc, _, anchor = ref.partition("#")
            assert (ROOT / doc).is_file(), f"{ref}: no such file"
            if anchor:
                assert anchor in anchors(ROOT / doc), f"{ref}: no such heading"


def test_every_results_file_is_in_the_manifest(manifest):
    names = [f for e in manifest["entries"] for f in e["files"]]
    missing = [p for p in result_files() if not any(covers(n, p) for n in names)]
    assert not missing, f"files under results/ that no manifest entry names: {missing}"


def test_every_manifest_file_exists(manifest):
    missing = []
    for e in manifest["entries"]:
        if e["commit"] == "pending":
            continue
        for f in e["files"]:
            p = ROOT / f
            if f.endswith("/"):
                ok = p.is_dir() and any(q.is_file() for q in p.rglob("*"))
            else:
                ok = p.is_file()
            if not ok:
                missing.append(f)
    assert not missing, f"manifest entries name files that do not exist: {missing}"


def test_every_cited_results_path_exists(manifest):
    generated = manifest.get("generated_outputs", [])
    pending = [f for e in manifest["entries"] if e["commit"] == "pending" for f in e["files"]]

    def allowed(path):
        return any(
            covers(g, path) or covers(g, path + "/") or fnmatch.fnmatch(path, g) for g in generated
        ) or any(covers(p, path) for p in pending)

    cited = list(cited_paths())
    assert cited, "no results/ path found in the docs"
    missing = [f"{doc}:{line}: {p}" for doc, line, p in cited if not exists(p) and not allowed(p)]
    assert not missing, "docs cite results/ paths that do not exist:\n" + "\n".join(missing)


def test_generated_outputs_are_ignored(manifest):
    """The paths user commands write to (the demo, `bcg grad`'s default) stay out of git."""
    if _git("rev-parse", "--git-dir") is None:
        pytest.skip("not a git checkout")
    for g in manifest.get("generated_outputs", []):
        probe = g.replace("*", "probe") + ("probe.txt" if g.endswith("/") else "")
        r = subprocess.run(["git", "check-ignore", "--no-index", "-q", probe], cwd=ROOT)
        assert r.returncode == 0, f"{g} is not git-ignored (.gitignore)"


def test_size_exemptions_are_still_used():
    for prefix, user in SIZE_EXEMPT.items():
        assert prefix.rstrip("/") in (ROOT / user).read_text(), f"{user} no longer names {prefix}"


def test_results_stay_small():
    total = 0
    for f in result_files():
        if any(f.startswith(p) for p in SIZE_EXEMPT):
            continue
        p = ROOT / f
        if p.is_file():
            total += p.stat().st_size
    total += MANIFEST.stat().st_size
    assert total <= MAX_BYTES, f"results/ holds {total / 1e6:.2f} MB outside {sorted(SIZE_EXEMPT)}"
