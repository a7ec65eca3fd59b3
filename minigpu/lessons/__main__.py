"""``python -m minigpu.lessons``: every lesson's variants measured with the simulator's counters.

Options: ``--lesson NAME`` (repeatable), ``--markdown`` (rewrite the measured tables of
``docs/lessons.md``), ``--production`` (the production kernels' sector-efficiency table). Runs
on the CUDA simulator (without ``NUMBA_ENABLE_CUDASIM=1`` it restarts itself with it), at the small sizes.
"""
import argparse
import os
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m minigpu.lessons", description=__doc__.split("\n")[0])
    ap.add_argument("--lesson", action="append", help="only this lesson (repeatable)")
    ap.add_argument("--markdown", action="store_true",
                    help="rewrite the measured tables in docs/lessons.md (with --production: "
                         "the production table)")
    ap.add_argument("--production", action="store_true",
                    help="sector efficiency of the production kernels instead")
    args = ap.parse_args(argv)
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        # minigpu.lessons (and numba) were imported before this ran: start again on the simulator
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "minigpu.lessons", *sys.argv[1:]])
    from . import BY_NAME, measure
    if args.production:
        table = measure.production_table()
        if args.markdown:
            measure.DOC.write_text(measure.between(measure.DOC.read_text(), measure.PROD_BEGIN,
                                                   measure.PROD_END, table))
            print(f"wrote {measure.DOC}")
        else:
            print(table)
        return
    lessons = [BY_NAME[n] for n in args.lesson] if args.lesson else None
    measured = measure.measure_all(lessons)
    if args.markdown:
        measure.DOC.write_text(measure.updated_doc(measured, measure.DOC.read_text()))
        print(f"wrote {measure.DOC}")
    else:
        print(measure.text(measured))


if __name__ == "__main__":
    main()
