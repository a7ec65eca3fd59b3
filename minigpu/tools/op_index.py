"""The op index: every registered op (``ops/registry.py``) as a Markdown table, read from the
registry (nothing here lists ops).

    python -m minigpu.tools.op_index           # the table, one row per op

Columns: the op, its Tensor methods and operators, whether it is ``minigpu.<name>`` and
``nn.functional.<name>``, its in-place variant and its ``nn`` layer.
"""
from __future__ import annotations

import sys

from .. import ops  # noqa: F401  (importing the package registers every op)
from ..ops.registry import OPS

HEADER = ("| op | family | Tensor methods | `mg.` | `F.` | in place | `nn` layer |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")


def rows() -> list:
    """One Markdown row per registered op, in the order the families register them."""
    out = []
    for e in OPS.values():
        methods = ", ".join(f"`{m}`" for m in e.methods) or "-"
        family = e.fn.__module__.rpartition(".")[2]
        out.append(f"| `{e.name}` | {family} | {methods} | {'yes' if e.mg else '-'} | "
                   f"{'yes' if e.F else '-'} | {f'`{e.inplace}`' if e.inplace else '-'} | "
                   f"{f'`{e.module}`' if e.module else '-'} |")
    return out


def render() -> str:
    return "\n".join([HEADER, *rows()]) + "\n"


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
