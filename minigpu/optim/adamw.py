"""``torch.optim.adamw``'s module path: AdamW lives beside Adam (``optim/adam.py``)."""
from .adam import AdamW

__all__ = ["AdamW"]
