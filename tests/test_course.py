"""The course (docs/course/): every command in it runs, every link resolves, every chapter shows
pictures that its documented commands regenerate, every term is defined (in bold) no later than
its first use, and the Japanese course (docs/course/ja/) has every page with the same sections,
code blocks, pictures and links.

Commands of ```console blocks (``$ ...``) run in order, page by page, in one scratch folder:
``python -m minigpu.exercises`` and ``python -m minigpu.lessons`` in this process (the suite
runs on the simulator, which they need; ``docs/course/images`` is replaced by the scratch
folder), ``python -m minigpu.tools.kernel_report`` in a process without the simulator;
``pip install`` lines are checked against pyproject.toml, not run.
"""
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE = ROOT / "docs" / "course"
JA = COURSE / "ja"
PAGES = sorted(COURSE.glob("*.md"))
CHAPTERS = [p for p in PAGES if re.match(r"\d\d-", p.name)]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")

# English section heading -> its Japanese heading
SECTIONS = {
    "The idea": "考え方", "The picture": "図", "Kernels to read": "読むカーネル",
    "Counters": "カウンタ", "On a GPU": "GPU では", "Exercise": "演習",
    "Doing an exercise": "演習の進め方", "The pictures": "図の作り方",
    "Threads and launches (chapter 0)": "スレッドと起動（第 0 章）",
    "Global memory (chapter 1)": "グローバルメモリ（第 1 章）",
    "Counters (chapter 1)": "カウンタ（第 1 章）",
    "Shared memory (chapters 2 and 3)": "共有メモリ（第 2・3 章）",
    "Warps at work (chapters 4 and 5)": "ワープの働き（第 4・5 章）",
    "Atomics and scans (chapters 6 and 7)": "アトミック操作とスキャン（第 6・7 章）",
    "Tiles and registers (chapters 8 and 9)": "タイルとレジスタ（第 8・9 章）",
    "Constant memory, streams, sorting, online softmax (chapters 10 to 12)":
        "定数メモリ・ストリーム・ソート・オンラインソフトマックス（第 10〜12 章）",
    "The grader": "採点",
    "Exercise 1: out of bounds (`debug_bounds`)": "演習 1: 範囲外アクセス（`debug_bounds`）",
    "Exercise 2: an uncoalesced loop (`debug_coalescing`)":
        "演習 2: コアレスでないループ（`debug_coalescing`）",
    "Exercise 3: a missing barrier (`debug_barrier`)": "演習 3: 足りないバリア（`debug_barrier`）",
    "Exercise 4: a lost update (`debug_race`)": "演習 4: 失われる更新（`debug_race`）",
    "Exercise 5: uninitialised shared memory (`debug_uninit`)":
        "演習 5: 初期化されていない共有メモリ（`debug_uninit`）",
    "Exercise 6: a bank conflict (`debug_banks`)": "演習 6: バンクコンフリクト（`debug_banks`）",
    "Graphs and the compiler (chapter 15)": "グラフとコンパイラ（第 15 章）",
}

# term -> the chapter that defines it (bold there, never used in an earlier chapter)
TERMS = {"kernel": 0, "warp": 0, "lane": 0, "SM": 0, "memory-bound": 0, "guard": 0,
         "FMA": 0, "DRAM": 0,
         "sector": 1, "request": 1, "coalesced": 1, "L1": 1, "fuses": 1, "register": 1,
         "flops": 1,
         "shared memory": 2, "barrier": 2, "race": 2, "halo": 2, "cycles": 2, "racecheck": 2,
         "bank": 3, "wavefront": 3, "bank conflict": 3, "padding": 3,
         "divergence": 4, "active mask": 4, "warp efficiency": 4, "reduction": 4,
         "shuffle": 5, "shuffle mask": 5, "warp per row": 5, "CSR": 5,
         "atomic": 6, "contention": 6, "inclusive scan": 7, "up-sweep": 7, "down-sweep": 7,
         "block sum": 7, "tile": 2, "registers": 8, "arithmetic intensity": 8,
         "occupancy": 9, "spills": 9, "PTX": 9, "sm_90": 9, "constant memory": 10,
         "broadcast": 10, "stream": 10, "pinned": 10, "sorting network": 11,
         "compare-exchanges": 11, "merge": 11, "stable": 11, "online softmax": 12,
         "running max": 12, "flash attention": 12, "initcheck": 6, "memcheck": 14,
         "synccheck": 14, "launch-bound": 15, "CUDA graph": 15, "guard key": 15,
         "graph break": 15}
GLOSSARY_TERMS = ("kernel", "thread", "block", "grid", "`cuda.grid(1)`", "SM", "warp", "lane",
                  "memory-bound", "sector", "request", "coalesced", "L1, L2", "shared memory",
                  "barrier", "race", "halo", "bank", "wavefront", "padding", "divergence",
                  "warp efficiency", "shuffle", "shuffle mask", "atomic", "inclusive scan",
                  "Blelloch scan", "tile", "arithmetic intensity", "register", "occupancy",
                  "spill", "sm_90", "constant memory", "stream", "sorting network",
                  "online softmax", "flash attention", "budget", "seed", "launch overhead",
                  "launch-bound", "CUDA graph", "guard key", "graph break")


def blocks(text):
    return FENCE.findall(text)


def _no_code(text):
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def links(text):
    """(picture mark, text, target) of every link outside code (a code span may be a link's
    text, as in [`file.py`](target); one that holds "](" is code, not a link)."""
    text = re.sub(r"`([^`\n]*)`", lambda m: "" if "](" in m.group(1) else m.group(1),
                  FENCE.sub("", text))
    return LINK.findall(text)


def prose(text):
    """The text without code blocks, code spans and link targets."""
    return LINK.sub(lambda m: m.group(2), _no_code(text))


def commands(path):
    return [line[2:].strip() for info, code in blocks(path.read_text(encoding="utf-8"))
            if info == "console" for line in code.splitlines() if line.startswith("$ ")]


def _main(module, argv):
    """``python -m module argv`` in this process: (exit status, stdout + stderr)."""
    from minigpu.exercises.__main__ import main as exercises_main
    from minigpu.lessons.__main__ import main as lessons_main
    main = {"minigpu.exercises": exercises_main, "minigpu.lessons": lessons_main}[module]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(argv) or 0
        except SystemExit as exc:
            status = exc.code
    return status, out.getvalue()


def run_command(command, scratch):
    argv = shlex.split(command.replace("docs/course/images", str(scratch / "images")))
    if argv[:2] == ["pip", "install"]:
        extras = re.findall(r"\[([\w,]+)\]", command)
        pyproject = (ROOT / "pyproject.toml").read_text()
        assert all(f"\n{e} = [" in pyproject for x in extras for e in x.split(",")), command
        return
    assert argv[:2] == ["python", "-m"], f"not a command the course test knows: {command}"
    module, args = argv[2], argv[3:]
    if module == "minigpu.tools.kernel_report":
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                              text=True, env=env, cwd=scratch, timeout=600)
        from minigpu.tools.kernel_report import TOOLCHAIN_MISSING
        if proc.returncode == TOOLCHAIN_MISSING:
            pytest.skip(f"{command}: the CUDA compiler toolchain is not installed")
        assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
        return
    status, output = _main(module, args)
    graded_stub = args[:1] == ["check"] and status == 1 and "FAILED" in output
    assert status == 0 or graded_stub, f"{command} exited {status}:\n{output[-3000:]}"
    assert "Traceback" not in output, output


# the README's picture commands redraw every picture of the course (~1 min of CPU): slow
@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow)
                                  if p.name == "README.md" else p for p in PAGES],
                         ids=lambda p: p.name)
def test_every_command_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in commands(page):
        run_command(command, tmp_path)
    if page.name == "README.md":    # the picture commands: every picture, non-trivial
        made = {p.name: p for p in (tmp_path / "images").glob("*.png")}
        shown = {Path(t).name for p in PAGES for t in images(p)}
        committed = {p.name for p in (COURSE / "images").glob("*.png")}
        assert shown <= set(made) and committed == shown, (shown - set(made), committed ^ shown)
        for name, path in made.items():
            _assert_picture(path)


def _assert_picture(path):
    import matplotlib.image
    assert path.stat().st_size > 10_000, path
    pixels = matplotlib.image.imread(path)[..., :3]
    assert pixels.shape[0] > 300 and pixels.shape[1] > 400, path
    inked = (pixels.mean(axis=2) < 0.9).mean()
    assert 0.02 < inked < 0.9, (path, inked)      # neither blank nor a solid slab
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20, path


def images(page):
    return [target for bang, _, target in links(page.read_text(encoding="utf-8")) if bang]


# The shell a student types the course's commands into has no NUMBA_ENABLE_CUDASIM. One
# command of each kind (the cheapest) runs here from such a shell, in order, in one folder;
# test_every_command_runs runs every command of the course itself, on the simulator in this
# process. A kind is the module with its subcommand (or NAME for a lesson's name) and each
# option; every kind of every course command is run here or named in SHELL_ELSEWHERE.
SHELL_RUN = [   # (command, exit status, what its output shows)
    ("python -m minigpu.exercises list", 0, "debug_banks"),
    ("python -m minigpu.exercises stub debug_coalescing my_coalescing.py", 0, "wrote"),
    # the starter: FAILED on its budget, and the picture drawn
    ("python -m minigpu.exercises check debug_coalescing my_coalescing.py --plot pictures", 1,
     "picture: pictures/exercise_debug_coalescing.png"),
    ("python -m minigpu.exercises plot debug_coalescing --out pictures", 0, "wrote pictures/"),
    ("python -m minigpu.lessons --list", 0, "occupancy"),
    ("python -m minigpu.lessons occupancy --plot pictures", 0, "occupancy: wrote"),
]
SHELL_ELSEWHERE = {
    "pip install": "checked against pyproject.toml by test_every_command_runs, never run",
    "minigpu.tools.kernel_report NAME": "test_every_command_runs runs it without the variable",
    "minigpu.tools.kernel_report --kernel": "test_every_command_runs runs it without the variable",
    "minigpu.exercises --all": "plot restarts on the simulator before reading --all (plot is "
                               "run here); test_every_command_runs draws every picture",
}


def _kinds(command):
    argv = shlex.split(command)
    if argv[:2] == ["pip", "install"]:
        return {"pip install"}
    module, args = argv[2], argv[3:]
    first = args[0] if module == "minigpu.exercises" or args[0].startswith("--") else "NAME"
    return {f"{module} {first}"} | {f"{module} {a}" for a in args if a.startswith("--")}


def _student_shell():
    return {k: v for k, v in os.environ.items()
            if k not in ("NUMBA_ENABLE_CUDASIM", "MINIGPU_SIM_STRICT", "MINIGPU_SIM_CHECKS")}


@pytest.mark.slow  # ~30 CPU seconds of subprocesses: CI runs it in its slow step
def test_commands_run_from_a_shell_without_the_simulator(tmp_path):
    """Each kind of command the course gives (console blocks of every page; the Japanese
    pages have the same blocks), and its Python programs (the README's trace, chapter 0's
    ``python saxpy.py``), from a shell without NUMBA_ENABLE_CUDASIM: each restarts itself on
    the simulator or selects it, and ends as documented, never in Numba's CudaSupportError."""
    run = set().union(*(_kinds(c) for c, _, _ in SHELL_RUN))
    for page in PAGES:
        for command in commands(page):
            missing = _kinds(command) - run - set(SHELL_ELSEWHERE)
            assert not missing, f"{page.name}: {command}: no command of kind {missing} runs here"
    programs = [("trace.py", COURSE / "README.md", "32 lanes, 32 sectors"),
                ("saxpy.py", CHAPTERS[0], "")]
    for name, page, _ in programs:
        code = [c for info, c in blocks(page.read_text(encoding="utf-8")) if info == "python"]
        (tmp_path / name).write_text(code[0])
    steps = SHELL_RUN + [(f"python {name}", 0, shows) for name, _, shows in programs]
    for command, status, shows in steps:
        proc = subprocess.run([sys.executable, *shlex.split(command)[1:]], capture_output=True,
                              text=True, env=_student_shell(), cwd=tmp_path, timeout=300)
        output = proc.stdout + proc.stderr
        assert proc.returncode == status, f"{command} exited {proc.returncode}:\n{output[-3000:]}"
        assert "CudaSupportError" not in output and "Traceback" not in output, output[-3000:]
        assert shows in output and (status == 0 or output.rstrip().endswith("FAILED")), \
            f"{command}:\n{output[-3000:]}"


def test_every_chapter_shows_a_picture_and_links_the_glossary():
    for page in CHAPTERS:
        text = page.read_text(encoding="utf-8")
        assert images(page), f"{page.name} shows no picture"
        assert "(glossary.md)" in text, f"{page.name} does not link the glossary"
    assert len(CHAPTERS) == 16


@pytest.mark.parametrize("page", PAGES + sorted(JA.glob("*.md")),
                         ids=lambda p: str(p.relative_to(COURSE)))
def test_every_link_resolves(page):
    text = page.read_text(encoding="utf-8")
    for _, _, target in links(text):
        if re.match(r"\w+://", target):
            continue
        file, _, anchor = target.partition("#")
        path = (page.parent / file).resolve() if file else page
        assert path.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in {_slug(h) for h in re.findall(r"^#+ (.*)$", path.read_text(
                encoding="utf-8"), re.M)}, f"{page.name}: no heading for #{anchor} in {file}"


def _slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_terms_are_defined_before_use():
    """Each term is bold in the chapter that defines it, and no earlier chapter uses it."""
    texts = [prose(p.read_text(encoding="utf-8")) for p in CHAPTERS]
    for term, chapter in TERMS.items():
        flags = 0 if term.isupper() or term in ("SM", "L1", "PTX", "CSR") else re.I
        pattern = re.escape(term).replace(r"\ ", r"\s+")
        word = re.compile(rf"(?<![\w-]){pattern}(?![\w-])", flags)
        early = [CHAPTERS[k].name for k in range(chapter) if word.search(texts[k])]
        assert not early, f"'{term}' is used in {early} before chapter {chapter} defines it"
        assert re.search(rf"\*\*{pattern}s?\*\*", texts[chapter], flags), \
            f"chapter {chapter} does not define '{term}' in bold"
    glossary = (COURSE / "glossary.md").read_text(encoding="utf-8")
    for term in GLOSSARY_TERMS:
        assert f"**{term}**" in glossary, f"the glossary has no entry '{term}'"


def test_japanese_terms_are_consistent():
    """The Japanese term list (minigpu/exercises/ja.py, shared with the grader's Japanese
    report): no page uses a variant it avoids, and each term is the glossary's."""
    from minigpu.exercises import ja
    for page in sorted(JA.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for variant, term in ja.AVOID.items():
            assert variant not in text, f"ja/{page.name}: '{variant}' (write '{term}')"
    glossary = (JA / "glossary.md").read_text(encoding="utf-8")
    defined = " ".join(re.findall(r"\*\*([^*]+)\*\*", glossary))
    for english, term in ja.TERMS.items():
        assert term in defined, f"ja/glossary.md defines no '{term}' ({english})"


def test_every_term_and_counter_column_is_in_the_glossary():
    """Each term of TERMS is bold in the glossary (the stem: "spills" as **spill**), and every
    row of the counters' table is explained in chapter 1 and in both glossaries."""
    from minigpu.simulator.counters import METRICS
    glossary = (COURSE / "glossary.md").read_text(encoding="utf-8")
    bold = " ".join(re.findall(r"\*\*([^*]+)\*\*", glossary)).lower()
    for term in TERMS:
        stem = re.sub(r"(es|s)$", "", term.lower()) if len(term) > 4 else term.lower()
        assert stem in bold, f"the glossary defines no '{term}'"
    chapter_1 = CHAPTERS[1].read_text(encoding="utf-8")
    for page in (COURSE / "glossary.md", JA / "glossary.md", CHAPTERS[1], JA / CHAPTERS[1].name):
        text = page.read_text(encoding="utf-8")
        missing = [m for m in METRICS if f"`{m}" not in text and f" {m}`" not in text]
        assert not missing, f"{page.relative_to(COURSE)} explains no {missing}"
    assert "3.35 TB/s" in chapter_1 and "4.8 TB/s" in chapter_1 and "assumption" in chapter_1


def _sections(text):
    return re.findall(r"^## (.*)$", text, re.M)


def _resolved_links(page):
    """{(is a picture, the file it names)}, a Japanese page mapped to its English original
    (so that "the other language" links of both pages name the English page)."""
    out = set()
    for bang, _, target in links(page.read_text(encoding="utf-8")):
        if re.match(r"\w+://", target):
            continue
        path = (page.parent / target.partition("#")[0]).resolve()
        if path.parent == JA.resolve():
            path = COURSE.resolve() / path.name
        out.add((bang, str(path)))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_japanese_page_is_in_sync(page):
    """Same sections (headings translated by SECTIONS), the same code blocks, pictures and
    links; and the prose is Japanese."""
    ja = JA / page.name
    assert ja.exists(), f"docs/course/ja/{page.name} is missing"
    en_text, ja_text = page.read_text(encoding="utf-8"), ja.read_text(encoding="utf-8")
    assert [SECTIONS[h] for h in _sections(en_text)] == _sections(ja_text)
    assert blocks(en_text) == blocks(ja_text)
    assert _resolved_links(page) == _resolved_links(ja), \
        _resolved_links(page) ^ _resolved_links(ja)
    kana = len(re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]", prose(ja_text)))
    assert kana > 0.3 * len(re.sub(r"\s", "", prose(ja_text))), f"{ja.name} is not Japanese"


def test_predicted_time_model(tmp_path, monkeypatch):
    """The counters' time model (chapter 1): launch overhead + the larger of bytes / DRAM
    bandwidth and flops / FP32 peak, the bandwidth derated below 50 % occupancy; the benchmark
    records it next to the measured time and gpu_run summarises measured / predicted."""
    import json

    from minigpu.simulator.counters import predicted_us
    from minigpu.tools import bench
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_run
    assert predicted_us(0) == 3.0 and predicted_us(0, launches=3) == 9.0
    assert predicted_us(4.8e6) == pytest.approx(3 + 1.0)                 # 4.8 MB on an H200
    assert predicted_us(3.35e6, gpu="h100") == pytest.approx(3 + 1.0)
    assert predicted_us(4.8e6, flops=6.7e8) == pytest.approx(3 + 10.0)   # compute-bound
    assert predicted_us(4.8e6, occupancy=0.25) == pytest.approx(3 + 2.0)
    assert predicted_us(4.8e6, occupancy=0.75) == pytest.approx(3 + 1.0)
    monkeypatch.setattr(bench, "_model_gpu", lambda: "h200")
    from minigpu.tools.suites import Group
    group = Group("g", "", "GB/s", 4.8e9, [])
    assert bench._predicted(group) == dict(predicted_ms=pytest.approx(1.003), predicted_for="h200")
    rows = [dict(ms=2.006, predicted_ms=1.003), dict(ms=1.003, predicted_ms=1.003), dict(ms=1.0)]
    (tmp_path / "rows.json").write_text(json.dumps(dict(rows=rows, meta={})))
    numbers = gpu_run.bench_numbers(tmp_path / "rows.json")
    assert numbers["measured_over_predicted_max"] == 2.0
    assert numbers["measured_over_predicted_geomean"] == pytest.approx(1.414, abs=1e-3)
