"""Every ```python block of README.md and docs/**/*.md runs, each as its own fresh script.

Blocks that use the cuda device (a "cuda" string, ``.cuda()``, ``@cuda.jit``, ``numba.cuda``)
run with this session's ``NUMBA_ENABLE_CUDASIM`` (the simulator in the suite, the GPU with
``NUMBA_ENABLE_CUDASIM=0``). Every other block runs WITHOUT it, as on a cpu-only machine with
neither a GPU nor the simulator, so a cpu example that would crash there cannot hide behind the
suite's simulator. A block that imports torch is skipped, and listed as skipped, where torch
is not installed (it comes with the ``parity`` extra). Blocks fenced otherwise (```text, ```console, ```bash, ...) are not run; a
fragment that cannot run on its own belongs in one of those.

Files are found when the suite is collected (pages added later are picked up), one test per
block (``README.md:10``), each in a fresh temporary working directory.
"""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^(?P<indent>[ \t]*(?:>[ \t]?)*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
USES_CUDA = re.compile(r"""["']cuda(:\d+)?["']|\.cuda\(|cuda\.jit|from numba import cuda|"""
                       r"""numba\.cuda""")
IMPORTS_TORCH = re.compile(r"^\s*(import torch|from torch[ .])", re.M)
TIMEOUT_S = 180


def markdown_files():
    docs = sorted((ROOT / "docs").rglob("*.md")) if (ROOT / "docs").is_dir() else []
    return [ROOT / "README.md"] + docs


def code_blocks(text):
    """(first line number, info string, code) of every fenced block, in order."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        prefix, fence, info = m["indent"], m["fence"], m["info"].strip()
        body, j = [], i + 1
        while j < len(lines):
            line = lines[j]
            stripped = line[len(prefix):] if line.startswith(prefix) else line.lstrip(" >")
            if stripped.strip().startswith(fence[0] * len(fence)) and \
                    stripped.strip().strip(fence[0]) == "":
                break
            body.append(stripped)
            j += 1
        blocks.append((i + 1, info, "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def python_blocks():
    for path in markdown_files():
        for line, info, code in code_blocks(path.read_text(encoding="utf-8")):
            if info.split()[:1] in (["python"], ["py"]):
                yield pytest.param(path, code, id=f"{path.relative_to(ROOT)}:{line}")


def run_block(code, cwd, cuda):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    if cuda:
        env["NUMBA_ENABLE_CUDASIM"] = os.environ.get("NUMBA_ENABLE_CUDASIM", "1")
    script = Path(cwd) / "block.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("path,code", list(python_blocks()))
def test_python_block_runs(path, code, tmp_path):
    if IMPORTS_TORCH.search(code) and importlib.util.find_spec("torch") is None:
        pytest.skip("the block imports torch, which is not installed (pip install -e "
                    "'.[parity]')")
    cuda = bool(USES_CUDA.search(code))
    result = run_block(code, tmp_path, cuda)
    where = "with the CUDA simulator" if cuda else "without NUMBA_ENABLE_CUDASIM (cpu only)"
    assert result.returncode == 0, (f"a ```python block of {path.name} failed {where}:\n"
                                    f"{code}\n--- stderr ---\n{result.stderr[-4000:]}")


def test_block_parser_and_classifier():
    text = ("# t\n```python\nimport minigpu as mg\n```\n\n```text\nnot run\n```\n"
            "> ```python\n> x = 1\n> ```\n"
            "````python\n```\ninside\n```\n````\n")
    blocks = code_blocks(text)
    assert [(line, info) for line, info, _ in blocks] == [(2, "python"), (6, "text"),
                                                          (9, "python"), (12, "python")]
    assert blocks[0][2] == "import minigpu as mg\n" and blocks[2][2] == "x = 1\n"
    assert blocks[3][2] == "```\ninside\n```\n"
    assert USES_CUDA.search('mg.zeros(2, device="cuda")') and USES_CUDA.search("x.cuda()")
    assert USES_CUDA.search("@cuda.jit") and not USES_CUDA.search("mg.cuda.memory_stats()")
    assert any(p.name == "README.md" for p in markdown_files())
