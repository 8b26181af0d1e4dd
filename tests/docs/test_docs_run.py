"""Every ``python`` and ``bash`` block in README.md and docs/ runs as written, or says why not.

A block runs in a fresh folder per page (the page's blocks in order, its ``python`` blocks sharing one
namespace, as a reader pastes them into one session) laid out as a clone of the repository is (its
``pipelines/``, ``dr_scale/``, ``deploy/`` and ``benchmarks/``); the blocks write under ``data/``. A block
preceded by ``<!-- not run: REASON -->`` is reported as skipped with its reason (a cluster, a container
registry, 10M rows); ``<!-- slow -->`` marks a block of seconds of work ``slow``, and the page's blocks
after it. Blocks of other
languages (``text`` synopses and output, ``toml``, ``json``) are not code to run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN = {"python", "bash"}
FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.+?)\s*-->$")
SLOW = re.compile(r"^<!--\s*slow\s*-->$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    not_run: str | None
    slow: bool

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page`` in order, with the marks in the lines just above each."""
    lines, found, i = page.read_text().splitlines(), [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        above = [line.strip() for line in lines[max(0, i - 3):i] if line.strip()]
        reason = next((NOT_RUN.match(line).group(1) for line in above if NOT_RUN.match(line)), None)
        found.append(Block(page, i + 1, m.group(1), "\n".join(lines[i + 1:j]) + "\n", reason,
                           any(SLOW.match(line) for line in above)))
        i = j + 1
    return found


def runnable() -> list:
    params = []
    for page in PAGES:
        slow = False  # a block after a slow one may need what it made: slow too
        for b in blocks(page):
            if b.lang in RUN:
                slow = slow or (b.slow and not b.not_run)
                params.append(pytest.param(b, id=b.id, marks=[pytest.mark.slow] if slow else []))
    return params


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    """One folder, one Python namespace and the blocks run so far per page, shared by the page's blocks in order."""
    made: dict[Path, tuple[Path, dict, set]] = {}

    def session(page: Path):
        if page not in made:
            folder = tmp_path_factory.mktemp(page.stem)
            for name in ("pipelines", "dr_scale", "deploy", "benchmarks"):
                (folder / name).symlink_to(REPO / name)
            made[page] = (folder, {"__name__": "__main__"}, set())
        return made[page]

    return session


def run_block(block: Block, folder: Path, namespace: dict) -> None:
    """The block in the page's namespace (Python) or a shell in the page's folder (bash); a failure fails here."""
    if block.lang == "python":
        exec(compile(block.code, block.id, "exec"), namespace)  # noqa: S102 - the page's own example
        return
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


@pytest.mark.parametrize("block", runnable())
def test_block_runs_as_written(block: Block, sessions, monkeypatch):
    if block.not_run:
        pytest.skip(f"not run: {block.not_run}")
    folder, namespace, ran = sessions(block.page)
    monkeypatch.chdir(folder)
    # pytest-xdist may hand a page's blocks to several workers: the blocks before this one that this worker has
    # not run are run first, as a reader would have, so each block sees what the page made before it
    for earlier in blocks(block.page):
        if earlier.line < block.line and earlier.lang in RUN and not earlier.not_run and earlier.line not in ran:
            run_block(earlier, folder, namespace)
            ran.add(earlier.line)
    run_block(block, folder, namespace)
    ran.add(block.line)


def test_every_command_block_is_tagged():
    """A block whose lines start with a command is tagged ``bash`` (runs, or says why not) or ``text``."""
    untagged = [b.id for page in PAGES for b in blocks(page)
                if b.lang == "" and re.search(r"^\s*(\$ )?(dr-scale|python|pip) ", b.code, re.M)]
    assert not untagged, f"untagged command blocks: {untagged}"


def test_no_block_names_a_development_machine_folder():
    """Commands use folders a user has (``data/…``), not ``/work/…`` or ``../shared``."""
    bad = [b.id for page in PAGES for b in blocks(page) if re.search(r"/work/|\.\./shared|/root/", b.code)]
    assert not bad, f"blocks naming a development machine's folders: {bad}"
