"""``python -m minigpu.lessons [NAME ...]``: each lesson's variants measured with the simulator's
counters, with what to look for under each table.

Options: ``--lesson NAME`` (the same as a NAME; repeatable), ``--list`` (the lessons),
``--plot [DIR]`` (draw the lessons' before/after pictures from simulator traces into DIR,
default ``pictures/``; needs matplotlib, the ``demos`` extra), ``--markdown`` (rewrite the
measured tables of ``docs/lessons.md``), ``--production`` (the production kernels'
sector-efficiency table), ``--sweep`` (a lesson's measurements over problem sizes, where it
has them: ``attention``). Runs on the CUDA simulator (without ``NUMBA_ENABLE_CUDASIM=1`` it
restarts itself with it), at the small sizes. Nothing here is timed: the simulator counts
accesses, it does not measure speed.
"""
import argparse
import os
import sys

from . import ALL, BY_NAME


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m minigpu.lessons",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="only these lessons")
    ap.add_argument("--lesson", action="append", default=[], help="only this lesson (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the lessons")
    ap.add_argument("--plot", nargs="?", const="pictures", metavar="DIR",
                    help="write the lessons' before/after pictures (PNG) into DIR")
    ap.add_argument("--markdown", action="store_true",
                    help="rewrite the measured tables in docs/lessons.md (with --production: "
                         "the production table)")
    ap.add_argument("--production", action="store_true",
                    help="sector efficiency of the production kernels instead")
    ap.add_argument("--sweep", action="store_true",
                    help="the lessons' measurements over problem sizes (slow: minutes)")
    args = ap.parse_args(argv)
    wanted = args.names + args.lesson
    unknown = [n for n in wanted if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown lesson {', '.join(repr(n) for n in unknown)}; the lessons are: "
                 f"{', '.join(BY_NAME)}")
    if args.list:
        for lesson in ALL:
            print(f"{lesson.describe()}: {lesson.teaches}")
        return 0
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        # minigpu.lessons (and numba) were imported before this ran: start again on the simulator
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "minigpu.lessons", *sys.argv[1:]])
    from . import measure
    lessons = [BY_NAME[n] for n in wanted] if wanted else None
    if args.plot:
        from .pictures import write_lesson_pictures
        for lesson in lessons or ALL:
            try:
                paths = write_lesson_pictures(lesson, args.plot)
            except RuntimeError as exc:   # matplotlib missing
                ap.error(str(exc))
            if not paths:
                print(f"{lesson.name}: no pictures (its lesson is about timing, which the "
                      f"simulator does not see)")
            for path in paths:
                print(f"{lesson.name}: wrote {path}")
        return 0
    if args.sweep:
        for lesson in lessons or ALL:
            if lesson.sweep is not None:
                print(f"== {lesson.name}\n{lesson.sweep()}")
        return 0
    if args.production:
        table = measure.production_table()
        if args.markdown:
            measure.DOC.write_text(measure.between(measure.DOC.read_text(), measure.PROD_BEGIN,
                                                   measure.PROD_END, table))
            print(f"wrote {measure.DOC}")
        else:
            print(table)
        return 0
    measured = measure.measure_all(lessons)
    if args.markdown:
        measure.DOC.write_text(measure.updated_doc(measured, measure.DOC.read_text()))
        print(f"wrote {measure.DOC}")
    else:
        print(measure.text(measured))
    return 0


if __name__ == "__main__":
    sys.exit(main())
