"""``torch.device``'s ``index`` (the tensors tutorial tests ``torch.device('cuda').index is not
None``): None unless an ordinal was given, as in torch; a device still compares equal to its
string form and to the same type (minigpu has one device of each type)."""
import pytest

import minigpu as mg

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("args", [("cpu",), ("cuda",), ("cuda:0",), ("cuda", 0), ("cpu", 0)])
def test_index_and_repr_as_torch(args):
    ours, theirs = mg.device(*args), torch.device(*args)
    assert ours.index == theirs.index and ours.type == theirs.type
    assert repr(ours) == repr(theirs)
    assert mg.device(ours).index == theirs.index  # a device made from a device keeps it


def test_bad_ordinals_are_refused():
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        mg.device("cuda", 1)
    with pytest.raises(RuntimeError, match="Invalid device string"):
        mg.device("cuda:x")
