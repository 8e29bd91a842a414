"""What the zoo's styles share: per-image random streams, well-spread parameters, fonts and colours.

Every image of the zoo is drawn from ``(style, seed, label, index)`` alone, so any one image can be drawn
again without the others, on any process, byte for byte. Random draws alone let two images of a class
land close in every parameter (two blue bottles of one size in one place: copies to the eye), so the
parameters that decide what an image looks like come from ``spread``: a low-discrepancy sequence that
keeps the images of a class apart in parameter space, however many there are.
"""
import colorsys
import functools
import random

import numpy as np
from PIL import Image, ImageFont

WORDS = ('the', 'of', 'and', 'report', 'total', 'date', 'name', 'order', 'item', 'price', 'account', 'summary',
         'note', 'review', 'office', 'north', 'river', 'model', 'series', 'client', 'figure', 'table', 'value',
         'market', 'annual', 'plan', 'project', 'design', 'section', 'result', 'method', 'study', 'data')


def image_rng(style: str, seed: int, label: str, index: int) -> random.Random:
    """The random stream of one image: the same on every run and machine (a str seed is hashed with
    SHA-512, not Python's salted hash)."""
    return random.Random(f'{style}:{seed}:{label}:{index}')


def spread(style: str, seed: int, label: str, index: int, dims: int) -> list[float]:
    """``dims`` numbers in [0, 1) for image ``index`` of a class: the R_d sequence (Roberts, 2018) from a
    random start per class. Consecutive indexes are far apart and no two come close until there are
    many, unlike independent random draws."""
    phi = 2.0
    for _ in range(30):  # the root of x**(dims + 1) = x + 1
        phi = (1 + phi) ** (1 / (dims + 1))
    start = random.Random(f'{style}:{seed}:{label}:spread')
    return [(start.random() + (index + 1) / phi ** (k + 1)) % 1 for k in range(dims)]


@functools.lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont:
    """Pillow's own scalable font (shipped with Pillow: no system font needed) at ``size`` pixels."""
    return ImageFont.load_default(max(1, size))


def hue_colour(hue: float, saturation: float, value: float) -> tuple[int, int, int]:
    """An RGB colour from HSV in [0, 1]."""
    return tuple(round(c * 255) for c in colorsys.hsv_to_rgb(hue % 1, saturation, value))


def words(rng: random.Random, count: int) -> str:
    return ' '.join(rng.choice(WORDS) for _ in range(count))


def noisy(image: Image.Image, rng: random.Random, sigma: float) -> Image.Image:
    """``image`` with seeded Gaussian noise of ``sigma`` levels (Pillow's own noise takes no seed)."""
    pixels = np.asarray(image, dtype=np.float64)
    noise = np.random.default_rng(rng.getrandbits(64)).normal(0, sigma, pixels.shape)
    return Image.fromarray(np.clip(pixels + noise, 0, 255).round().astype(np.uint8), image.mode)


def warp(mask: np.ndarray, rng: random.Random, amount: float) -> np.ndarray:
    """``mask`` (2-D) bent by a smooth random displacement of up to about ``amount`` of its side, as
    handwriting varies: a coarse random field, upsampled, then nearest-pixel sampling."""
    height, width = mask.shape
    fields = []
    for _ in range(2):
        coarse = np.random.default_rng(rng.getrandbits(64)).normal(0, amount * width, (4, 4)).astype(np.float32)
        fields.append(np.asarray(Image.fromarray(coarse, 'F').resize((width, height), Image.Resampling.BICUBIC)))
    rows, columns = np.mgrid[0:height, 0:width]
    y = np.clip(np.round(rows + fields[0]), 0, height - 1).astype(int)
    x = np.clip(np.round(columns + fields[1]), 0, width - 1).astype(int)
    return mask[y, x]
