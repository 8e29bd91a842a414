"""What the zoo's styles share: per-image random streams, well-spread parameters, fonts and colours.

Every image of the zoo is drawn from ``(style, seed, label, index)`` alone, so any one image can be drawn
again on any process, byte for byte. Random draws alone let two images of a class land close in every
parameter (two blue bottles of one size in one place: copies to the eye), so the parameters that decide
what an image looks like come from ``spread``, which keeps the images of a class apart in parameter
space, however many there are.
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
    """``dims`` numbers in [0, 1) for image ``index`` of a class, as far from those of images 0 to
    index - 1 as ``CANDIDATES`` tries allow (Mitchell's best-candidate sampling, on the torus: a hue or
    an angle wraps). The images of a class then stay apart in every parameter at once, where independent
    draws (or a low-discrepancy sequence, for some pairs of indexes) put some close. Image ``index`` gets
    the same numbers however many the class has."""
    points = _spread_points(style, seed, label, dims, max(64, 1 << index.bit_length()))
    return [float(value) for value in points[index]]


CANDIDATES = 32


@functools.lru_cache(maxsize=256)
def _spread_points(style: str, seed: int, label: str, dims: int, count: int) -> np.ndarray:
    """The first ``count`` points of ``spread``; each point takes the same draws whatever ``count`` is."""
    stream = np.random.default_rng(random.Random(f'{style}:{seed}:{label}:spread').getrandbits(64))
    points = np.empty((count, dims))
    points[0] = stream.random(dims)
    for n in range(1, count):
        candidates = stream.random((CANDIDATES, dims))
        gap = np.abs(candidates[:, None, :] - points[None, :n, :])
        nearest = (np.minimum(gap, 1 - gap) ** 2).sum(axis=2).min(axis=1)
        points[n] = candidates[nearest.argmax()]
    return points


@functools.lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's own scalable font (shipped with Pillow: no system font needed) at ``size`` pixels."""
    return ImageFont.load_default(max(1, size))


def hue_colour(hue: float, saturation: float, value: float) -> tuple[int, int, int]:
    """An RGB colour from HSV; saturation and value are clipped to [0, 1], the hue wraps."""
    clip = lambda v: min(1.0, max(0.0, v))  # noqa: E731
    red, green, blue = colorsys.hsv_to_rgb(hue % 1, clip(saturation), clip(value))
    return round(red * 255), round(green * 255), round(blue * 255)


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
