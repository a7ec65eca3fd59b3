"""The grader's report in Japanese (``check --lang ja``, or a ``ja`` locale): the English
report with its fixed phrases replaced, in order, by the course's Japanese terms
(docs/course/ja/glossary.md). Counter names, Numba's and the sanitizer's own messages and
file paths stay as they are, as in the Japanese course."""
from __future__ import annotations

import os
import re

PHRASES = [
    (r"^exercise (\S+)$", r"演習 \1"),
    (r"^  constants: ", "  定数: "),
    (r"^  seed (\d+): sizes (.*) \(replay: --seed (\d+)\)$", r"  シード \1: サイズ \2（再現: --seed \3）"),
    (r"\[OVER\]", "[超過]"),
    (r" \(budget ([^ ]+) = ([^ ]+) x the reference's ([^)]+)\)",
     r"（バジェット \1 = 参照解の \3 の \2 倍）"),
    (r" \(at least ([^ ]+) = ([^ ]+) x the reference's ([^)]+)\)",
     r"（最低 \1 = 参照解の \3 の \2 倍）"),
    (r" \(budget ([^)]+)\)", r"（バジェット \1）"),
    (r" \(at least ([^)]+)\)", r"（最低 \1）"),
    (r"^  note: ", "  注: "),
    (r"^  FAIL \(correctness\): ", "  不合格（正しさ）: "),
    (r"^  FAIL \(budget\): ", "  不合格（バジェット）: "),
    (r"^  FAIL \(static\): ", "  不合格（静的検査）: "),
    (r"^  FAIL \(import\): ", "  不合格（読み込み）: "),
    (r"size (\S+): wrong result, (\d+) of (\d+) elements differ; first at index (.+?): got (.+?), "
     r"expected (\S+)", r"サイズ \1: 結果が違います。\3 要素中 \2 要素が異なり、最初は添字 \4 で、"
     r"値は \5、期待値は \6 です"),
    (r" \(never written: float outputs start as NaN\)",
     "（一度も書かれていません。float の出力は NaN から始まります）"),
    (r"size (\S+): the kernel raised ", r"サイズ \1: カーネルが例外を送出しました: "),
    (r"(\S[^:]*?) is ([^ ]+), over the budget of ([^ ]+) \(([^ ]+) x the reference solution's "
     r"([^ ]+) at your block size\)", r"\1 は \2 で、バジェット \3（あなたのブロックサイズでの"
     r"参照解の \5 の \4 倍）を超えています"),
    (r"(\S[^:]*?) is ([^ ]+), over the budget of ([^ ]+)", r"\1 は \2 で、バジェット \3 を超えています"),
    (r"(\S[^:]*?) is ([^ ]+), under the budget of ([^ ]+)", r"\1 は \2 で、最低 \3 に届きません"),
    (r"static limits \(layer c\) skipped: missing: ", "静的制限（層 c）は省略しました。不足: "),
    (r"typed for the CUDA target instead \(Numba's front end, no NVVM\): ",
     "代わりに CUDA ターゲット向けに型付けしました（Numba のフロントエンド、NVVM なし）: "),
    (r": checked for types a GPU build refuses and float64 arithmetic; registers, spills and "
     r"occupancy not checked", ": GPU 向けビルドが拒む型と float64 の演算を検査しました。レジスタ、"
     "スピル、占有率は検査していません"),
    (r" does not type for the CUDA target: ", " は CUDA ターゲット向けに型付けできません: "),
    (r" did not compile for sm_90: ", " は sm_90 向けにコンパイルできませんでした: "),
    (r"(\d+) float64 instructions in a float32 kernel", r"float32 のカーネルに float64 の命令が \1 個"),
    (r" \(a kernel holds numbers and arrays only: no Python lists, dicts or objects; see "
     r"(docs/course/[^)]+)\)", r"（カーネルが持てるのは数と配列だけです。Python のリスト、辞書、"
     r"オブジェクトは使えません。\1 を参照）"),
    (r" \(see (docs/course/[^)]+)\)", r"（\1 を参照）"),
    (r"^PASSED \(simulated; not compiled for sm_90: (.*)\)$",
     r"合格（シミュレータ上のみ。sm_90 向けにはコンパイルしていません: \1）"),
    (r"^PASSED$", "合格"),
    (r"^FAILED$", "不合格"),
]
_COMPILED = [(re.compile(p, re.M), r) for p, r in PHRASES]


def translate(report: str) -> str:
    """``report`` (:meth:`grader.Result.text`) in Japanese."""
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
