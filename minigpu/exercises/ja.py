"""The grader's report in Japanese (``check --lang ja``, or a ``ja`` locale): the English
report with its budget labels (:data:`LABELS`) and fixed phrases (:data:`PHRASES`) replaced by
the course's Japanese terms (:data:`TERMS`, as docs/course/ja/glossary.md defines them).
Counter names, code, file paths, Python's exception names and the messages of Numba and of
the sanitizer stay as they are, as in the Japanese course; everything the grader itself says
is translated (``tests/test_course.py`` checks every message path).
"""
from __future__ import annotations

import os
import re

TERMS = {
    "bank conflict": "バンクコンフリクト", "race": "データ競合", "barrier": "バリア",
    "shared memory": "共有メモリ", "global memory": "グローバルメモリ", "sector": "セクタ",
    "request": "リクエスト", "wavefront": "ウェーブフロント", "warp": "ワープ",
    "block": "ブロック", "thread": "スレッド", "register": "レジスタ", "spill": "スピル",
    "occupancy": "占有率", "atomic": "アトミック操作", "budget": "バジェット", "seed": "シード",
    "tile": "タイル", "sanitizer": "サニタイザ", "simulator": "シミュレータ",
}
"""The course's Japanese term for each English one: the report uses these and no variant
(``AVOID``), as the Japanese pages do."""

AVOID = {"バンク競合": "バンクコンフリクト", "（fuses）": "融合", "触れ": "アクセスする",
         "動かす": "転送する", "動かし": "転送し", "グローバルロードセクタ": "グローバルロードのセクタ",
         "予算": "バジェット"}
"""Variants (left) that neither the Japanese pages nor the report use, and the term to write."""

LABELS = {
    "global load sectors per request": "リクエストあたりのグローバルロードのセクタ数",
    "global store sectors per request": "リクエストあたりのグローバルストアのセクタ数",
    "global load sectors per output": "出力あたりのグローバルロードのセクタ数",
    "global load sectors per input": "入力あたりのグローバルロードのセクタ数",
    "global load sectors per element": "要素あたりのグローバルロードのセクタ数",
    "global load requests per input element": "入力要素あたりのグローバルロードのリクエスト数",
    "global load requests per element": "要素あたりのグローバルロードのリクエスト数",
    "global load requests per output": "出力あたりのグローバルロードのリクエスト数",
    "global load requests per row": "行あたりのグローバルロードのリクエスト数",
    "global load requests per nonzero": "非ゼロ要素あたりのグローバルロードのリクエスト数",
    "global load requests per warp": "ワープあたりのグローバルロードのリクエスト数",
    "shared load wavefronts per request": "リクエストあたりの共有メモリのロードのウェーブフロント数",
    "shared store wavefronts per request": "リクエストあたりの共有メモリのストアのウェーブフロント数",
    "global atomics per bin per block": "ブロックあたり・ビンあたりのグローバルなアトミック操作の数",
    "barriers per block": "ブロックあたりのバリア数",
}
"""Each budget's label; ``LABEL of KERNEL`` becomes ``KERNEL の`` + its label."""

LIMITS = {"warps": "ワープ数", "blocks": "ブロック数", "registers": "レジスタ",
          "shared memory": "共有メモリ"}
"""What limits occupancy (:class:`minigpu.lessons.occupancy.Occupancy`'s ``limited_by``)."""

_OK, _SEE = "[以内]", r"（\1 を参照）"
PHRASES = [
    (r"^exercise (\S+)$", r"演習 \1"),
    (r"^  constants: ", "  定数: "),
    (r"^  seed (\d+): sizes (.*) \(replay: --seed (\d+)\)$", r"  シード \1: サイズ \2（再現: --seed \3）"),
    (r"\[ok  \]", _OK),
    (r"\[OVER\]", "[超過]"),
    (r" \(budget ([^ ]+) = ([^ ]+) x the reference's ([^)]+)\)",
     r"（バジェット \1 = 参照解の \3 の \2 倍）"),
    (r" \(at least ([^ ]+) = ([^ ]+) x the reference's ([^)]+)\)",
     r"（最低 \1 = 参照解の \3 の \2 倍）"),
    (r" \(budget ([^)]+)\)", r"（バジェット \1）"),
    (r" \(at least ([^)]+)\)", r"（最低 \1）"),
    # notes
    (r"^  note: picture: ", "  注: 図: "),
    (r"^  note: no picture: pictures need matplotlib: (.*)$",
     r"  注: 図はありません: 図には matplotlib が必要です: \1"),
    (r"exercise (\S+) has no picture: its bug shows in the sanitizer's message",
     r"演習 \1 には図がありません。バグはサニタイザのメッセージに現れます"),
    (r"^  note: no picture: ", "  注: 図はありません: "),
    (r"^  note: relative budgets skipped: the reference solution does not run with these "
     r"constants \(a grader limitation, not your error\)$",
     "  注: 相対バジェットは省略しました。参照解がこの定数では動きません（採点器の制約で、"
     "あなたの誤りではありません）"),
    (r"^  note: sm_90 (\S+): (\d+) registers, (\d+) B shared, occupancy (\S+), spills (\d+) B, "
     r"float64 (\d+)$", r"  注: sm_90 \1: レジスタ \2 個、共有メモリ \3 B、占有率 \4、スピル \5 B、"
     r"float64 \6"),
    (r"static limits \(layer c\) skipped: missing: (.*) \(pip install -e '\.\[inspect\]'\)$",
     r"静的制限（層 c）は省略しました。不足: \1（pip install -e '.[inspect]' で入ります）"),
    (r"static limits \(layer c\) skipped: the static report could not run ",
     "静的制限（層 c）は省略しました。静的レポートを実行できませんでした"),
    (r"static limits \(layer c\) skipped for (\S+): the compiler failed ",
     r"静的制限（層 c）は \1 について省略しました。コンパイラが失敗しました"),
    (r"typed for the CUDA target instead \(Numba's front end, no NVVM\): ",
     "代わりに CUDA ターゲット向けに型付けしました（Numba のフロントエンド、NVVM なし）: "),
    (r": checked for types a GPU build refuses and float64 arithmetic; registers, spills and "
     r"occupancy not checked", ": GPU 向けビルドが拒む型と float64 の演算を検査しました。レジスタ、"
     "スピル、占有率は検査していません"),
    (r"^  note: ", "  注: "),
    # failures
    (r"^  FAIL \(correctness\): ", "  不合格（正しさ）: "),
    (r"^  FAIL \(budget\): ", "  不合格（バジェット）: "),
    (r"^  FAIL \(static\): ", "  不合格（静的検査）: "),
    (r"^  FAIL \(import\): ", "  不合格（読み込み）: "),
    (r"size (\S+): wrong result, (\d+) of (\d+) elements differ; first at index (.+?): got (.+?), "
     r"expected (\S+)", r"サイズ \1: 結果が違います。\3 要素中 \2 要素が異なり、最初は添字 \4 で、"
     r"値は \5、期待値は \6 です"),
    (r" \(never written: float outputs start as NaN\)",
     "（一度も書かれていません。float の出力は NaN から始まります）"),
    (r"size (\S+): the output has shape (.+), expected (.+?) \(see ",
     r"サイズ \1: 出力の形状が \2 で、期待される形状は \3 です (see "),
    (r"size (\S+): the kernel raised ", r"サイズ \1: カーネルが例外を送出しました: "),
    (r"the grader stopped the kernel after (\d+) s: an endless loop, or a barrier some threads "
     r"never reach\? \(seed (\d+)\)", r"採点器は \1 秒でカーネルを止めました。無限ループか、一部の"
     r"スレッドが到達しないバリアではありませんか（シード \2）"),
    (r"(\S[^:]*?) is ([^ ]+), over the budget of ([^ ]+) \(([^ ]+) x the reference solution's "
     r"([^ ]+) at your block size\)", r"\1 は \2 で、バジェット \3（あなたのブロックサイズでの"
     r"参照解の \5 の \4 倍）を超えています"),
    (r"(\S[^:]*?) is ([^ ]+), over the budget of ([^ ]+)", r"\1 は \2 で、バジェット \3 を超えています"),
    (r"(\S[^:]*?) is ([^ ]+), under the budget of ([^ ]+)", r"\1 は \2 で、最低 \3 に届きません"),
    (r": cannot be measured \((.*)\): keep the kernel names of the stub",
     r": 測定できません（\1）。スタブのカーネル名を変えないでください"),
    (r"no launch of a kernel named ('[^']*')", r"\1 という名前のカーネルの起動がありません"),
    (r" does not type for the CUDA target: ", " は CUDA ターゲット向けに型付けできません: "),
    (r" did not compile for sm_90: ", " は sm_90 向けにコンパイルできませんでした: "),
    (r"(\d+) float64 instructions in a float32 kernel", r"float32 のカーネルに float64 の命令が \1 個"),
    (r" \(e\.g\. (`[^`]*`)\)", r"（例: \1）"),
    (r": a Python float literal or math on float64 promotes the expression; wrap constants in "
     r"float32\(\.\.\.\)", "。Python の float リテラルや float64 の演算が式を float64 に昇格させます。"
     "定数は float32(...) で包んでください"),
    (r": (\d+) bytes of register spills", r": レジスタのスピルが \1 バイト"),
    (r": (\d+) registers per thread, over the cap of (\d+)",
     r": スレッドあたりのレジスタ数 \1 が上限 \2 を超えています"),
    (r": theoretical occupancy (\S+) \(limited by ([^)]*)\), under the minimum of (\S+)",
     lambda m: f": 理論占有率 {m[1]}（制約: {LIMITS.get(m[2], m[2])}）が最小値 {m[3]} に届きません"),
    (r" \(a kernel holds numbers and arrays only: no Python lists, dicts or objects; see "
     r"(docs/course/[^)]+)\)", r"（カーネルが持てるのは数と配列だけです。Python のリスト、辞書、"
     r"オブジェクトは使えません。\1 を参照）"),
    # the solution file and its constants (import)
    (r"the module defines no (\w+): the grader launches with it \(see the stub\)",
     r"モジュールが \1 を定義していません。採点器はこれを使って起動します（スタブを参照）"),
    (r"(\w+) must be an int, got (.*)$", r"\1 は int でなければなりません（値: \2）"),
    (r"(.+) = (\d+) threads per block: the limit is 1024",
     r"\1 = ブロックあたり \2 スレッド。上限は 1024 です"),
    (r"(\w+) must be at least (\d+), got (-?\d+)", r"\1 は \2 以上でなければなりません（値: \3）"),
    (r"(\w+) must be a power of two, got (\d+)", r"\1 は 2 のべき乗でなければなりません（値: \2）"),
    (r"(\w+) must be a multiple of 32 \(whole warps\), got (\d+)",
     r"\1 は 32 の倍数（ワープ単位）でなければなりません（値: \2）"),
    (r"(\w+) must be 1 \.\.\. 32, got (-?\d+)", r"\1 は 1〜32 でなければなりません（値: \2）"),
    (r"TILE \((\d+)\) must be a multiple of ROWS \((\d+)\)",
     r"TILE（\1）は ROWS（\2）の倍数でなければなりません"),
    (r"NBINS \((\d+)\) must be at most TPB \((\d+)\): one thread per bin",
     r"NBINS（\1）は TPB（\2）以下でなければなりません（ビン 1 つに 1 スレッド）"),
    (r"（値: (-?\d+)）: the exercise is a thread computing several elements",
     r"（値: \1）。この演習は 1 つのスレッドが複数の要素を計算するものです"),
    (r"(\S+) defines no (.+)$", r"\1 は \2 を定義していません"),
    (r"(\S+) assigns no module constant (\w+)", r"\1 はモジュール定数 \2 を代入していません"),
    # references, verdicts
    (r" \(see docs/simulator\.md and (docs/course/[^)]+)\)", r"（docs/simulator.md と \1 を参照）"),
    (r" \(see (docs/course/[^)]+)\)", _SEE),
    (r"\(see (docs/course/[^)]+)\)", _SEE),
    (r"the static report could not run", "静的レポートを実行できませんでした"),
    (r"the compiler failed", "コンパイラが失敗しました"),
    # the command line
    (r"^(\S+) does not exist \(write one with: (.*)\)$", r"\1 はありません（次のコマンドで作れます: \2）"),
    (r"^PASSED \(simulated; not compiled for sm_90: (.*)\)$",
     r"合格（シミュレータ上のみ。sm_90 向けにはコンパイルしていません: \1）"),
    (r"^PASSED$", "合格"),
    (r"^FAILED$", "不合格"),
]
_LABEL = re.compile("(?P<label>" + "|".join(re.escape(k) for k in sorted(LABELS, key=len,
                                                                          reverse=True))
                    + r")(?: of (?P<kernel>\w+))?")
_COMPILED = [(re.compile(p, re.M), r) for p, r in PHRASES]


def translate(report: str) -> str:
    """``report`` (:meth:`grader.Result.text`, or one message of it) in Japanese."""
    report = _LABEL.sub(lambda m: (f"{m['kernel']} の" if m["kernel"] else "")
                        + LABELS[m["label"]], report)
    for pattern, repl in _COMPILED:
        report = pattern.sub(repl, report)
    return report


def locale_is_japanese() -> bool:
    """The locale asks for Japanese (``LC_ALL``, ``LC_MESSAGES`` or ``LANG``, in that order)."""
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var)
        if value:
            return value.lower().startswith("ja")
    return False
