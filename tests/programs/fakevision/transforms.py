"""torchvision.transforms' names for the transforms the corpus uses (on uint8 HxW[xC] arrays)."""
import numpy as np

import minigpu as torch


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x


class ToTensor:
    """HxW or HxWxC uint8 -> CxHxW float32 in [0, 1], as torchvision's ToTensor."""

    def __call__(self, image):
        array = image[:, :, None] if image.ndim == 2 else image
        return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1))).float() / 255


class Normalize:
    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        mean = torch.tensor(self.mean, dtype=x.dtype).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=x.dtype).view(-1, 1, 1)
        return (x - mean) / std


class Lambda:
    def __init__(self, fn):
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)


class _SameSize:
    """Resize / CenterCrop: the corpus only asks for the size the images already have."""

    def __init__(self, size):
        self.size = size

    def __call__(self, image):
        if image.shape[0] != self.size or image.shape[1] != self.size:
            raise NotImplementedError("fakevision serves images of the requested size only")
        return image


Resize = CenterCrop = _SameSize
