"""The bug catalogue of ``benchmarks/mutations.py`` is well formed (cheap: no mutant is run;
``python benchmarks/mutation.py`` runs them)."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("mutation", ROOT / "benchmarks" / "mutation.py")
mutation = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mutation)
BUGS = mutation.load_catalogue()


def test_catalogue_size_and_unique_names():
    assert len(BUGS) >= 30
    assert len({b.name for b in BUGS}) == len(BUGS)


@pytest.mark.parametrize("bug", BUGS, ids=[b.name for b in BUGS])
def test_each_patch_applies_exactly_once(bug):
    text = (ROOT / bug.file).read_text()
    assert text.count(bug.old) == 1, f"{bug.name}: the old snippet must occur exactly once"
    assert bug.new != bug.old and text.replace(bug.old, bug.new) != text
    assert bug.what and bug.gpu and bug.caught
    assert bug.file in mutation.TESTS, f"no tests mapped for {bug.file}"


def test_mapped_tests_exist():
    for targets in mutation.TESTS.values():
        for target in targets:
            path, _, name = target.partition("::")
            source = (ROOT / path).read_text()
            assert not name or f"def {name}(" in source, target


def test_docs_page_is_generated_from_the_catalogue():
    assert (ROOT / "docs" / "bugs.md").read_text() == mutation.docs_text(BUGS), \
        "docs/bugs.md is stale: run python benchmarks/mutation.py --docs"
