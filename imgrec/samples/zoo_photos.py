"""The zoo's real photographs: tiles of the photos scikit-image ships (``skimage.data``, no download).

Each photo is a class. A photo is cut into a grid of about ``CELLS`` cells; a tile is a crop of 75-100%
of one cell, at a place of its own in it, resized to the requested size. Tiles never overlap, so no
tile holds another's pixels, and two tiles are never a crop or a scale of each other. Tiles with too
little in them (black sky, a flat wall) are left out, and so is a tile whose 16x16 grey picture
correlates at more than ``MAX_CORRELATION`` with one already taken (a repeating texture): what is left
are distinct pictures a person would not call copies. ``capacity`` says how many a photo gives.
"""
import functools
import math
import random

import numpy as np
from PIL import Image

# The photos with at least 90 distinct tiles, richest first (moon, cell and clock give under 20, retina and
# rocket under 60: mostly flat black or sky): 120-200 each, camera 93. The zoo's two photo styles take
# every other one, so each half has a grass-like texture, a microscope or telescope image and two photos
# of things, and about 120 tiles a class (90 for camera).
PHOTOS = ('grass', 'gravel', 'immunohistochemistry', 'motorcycle', 'hubble_deep_field', 'astronaut', 'chelsea',
          'coins', 'coffee', 'camera')
CELLS = 200
MIN_STD = 12.0           # grey levels, over the tile at its final size
MAX_CORRELATION = 0.9    # of two tiles' 16x16 grey pictures, mean and contrast taken out


@functools.lru_cache(maxsize=None)
def photo(name: str) -> Image.Image:
    """The photo ``name`` of ``skimage.data`` (``motorcycle``: the left of the stereo pair only, as the
    right one is nearly the same picture)."""
    import skimage.data  # pylint: disable=import-outside-toplevel  (a test and benchmark dependency only)
    pixels = skimage.data.stereo_motorcycle()[0] if name == 'motorcycle' else getattr(skimage.data, name)()
    return Image.fromarray(pixels, 'L' if pixels.ndim == 2 else 'RGB')


def _signature(tile: Image.Image) -> np.ndarray:
    grey = np.asarray(tile.convert('L').resize((16, 16), Image.Resampling.BOX), dtype=np.float64).ravel()
    grey -= grey.mean()
    return grey / (np.linalg.norm(grey) or 1)


@functools.lru_cache(maxsize=64)
def tiles(name: str, seed: int, size: int) -> tuple[Image.Image, ...]:
    """The distinct tiles of photo ``name``, ``size`` square, in the order ``seed`` shuffles them to."""
    picture = photo(name)
    width, height = picture.size
    side = max(16, math.floor(math.sqrt(width * height / CELLS)))
    rng = random.Random(f'photos:{seed}:{name}')
    cells = [(x, y) for y in range(0, height - side + 1, side) for x in range(0, width - side + 1, side)]
    rng.shuffle(cells)
    taken: list[Image.Image] = []
    signatures: list[np.ndarray] = []
    for x, y in cells:
        crop = round(side * rng.uniform(0.75, 1.0))
        left, top = x + rng.randint(0, side - crop), y + rng.randint(0, side - crop)
        tile = picture.crop((left, top, left + crop, top + crop)).resize((size, size), Image.Resampling.LANCZOS)
        if np.asarray(tile.convert('L'), dtype=np.float64).std() < MIN_STD:
            continue
        signature = _signature(tile)
        if signatures and max(float(signature @ other) for other in signatures) > MAX_CORRELATION:
            continue
        taken.append(tile)
        signatures.append(signature)
    return tuple(taken)


def capacity(name: str, seed: int = 0, size: int = 64) -> int:
    """How many distinct tiles photo ``name`` gives."""
    return len(tiles(name, seed, size))


def draw_photo_tile(label: str, index: int, seed: int, size: int) -> Image.Image:
    """Tile ``index`` of photo ``label`` (its mode: grey photos stay grey), ``size`` square."""
    available = tiles(label, seed, size)
    if index >= len(available):
        raise ValueError(f'photo {label!r} gives {len(available)} distinct tiles at seed {seed}, size {size}; '
                         f'asked for tile {index}')
    return available[index].copy()
