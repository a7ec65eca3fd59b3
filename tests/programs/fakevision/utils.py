"""torchvision.utils' save_image (writes nothing: the corpus checks losses, not pictures) and
make_grid (the images side by side, 2-pixel padding)."""
import minigpu as torch


def make_grid(tensor, nrow=8, padding=2, **kwargs):
    n, c, h, w = tensor.shape
    pad = torch.zeros(c, h, padding, dtype=tensor.dtype)
    return torch.cat([part for image in tensor for part in (pad, image)] + [pad], dim=2)


def save_image(tensor, fp, **kwargs):
    pass
