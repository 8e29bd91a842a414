"""A 64-bit perceptual hash of a decoded image, and the banding that finds near-duplicates without
comparing every pair: plain functions (Pillow and numpy, which Beam brings; no TensorFlow).

The hash is a DCT hash (pHash): the image, in grey, is averaged down to 32x32 pixels and transformed
with a 2-D DCT-II; of its 8x8 lowest frequencies but the constant ones (rows and columns 1-8), each
coefficient gives one bit, 1 where it is positive. What is left is the coarse layout of light and dark,
as waves, so a copy re-compressed, re-saved losslessly, scaled, brightened or darkened (the signs do not
move when every pixel is scaled or shifted alike), lightly cropped or captioned stays within a few
bits, while unrelated photos differ in about half of them, nearly independently: the transform
decorrelates the bits, so images that share a smooth gradient or a plain background do not share
most of their bits, as they do in a difference hash. ``docs/near-duplicates.md`` gives the distances
measured on planted copies, and why this hash was chosen over a difference hash and over pHash's usual
median rule.

Two hashes are near-duplicates when their Hamming distance is at most a threshold. The threshold
depends on how many images there are (``threshold_for``): unrelated hashes agree by chance more often
among more images, so it is the largest (up to ``MAX_THRESHOLD``) that keeps the pairs expected by
chance under ``CHANCE_PAIRS_PER_IMAGE``. Candidate pairs are found by banding: the 64 bits are cut into
threshold + 1 bands, and two hashes that differ in at most the threshold agree exactly on at least
one band (pigeonhole), so comparing only the hashes that share a band's value finds every pair within
the threshold.

A candidate is only a near-duplicate if a second, independent check agrees (``same_picture``). The
hash keeps the signs of the grey layout's waves and nothing else: not colour, not how bright or how
contrasted anything is, not where exactly an edge lies. Pictures of one style (a blob on a gradient)
share those signs whatever their colours, so in one style most images have a hash candidate (1,839 of
2,000 renders at threshold 15). The check compares an 8x8 colour thumbnail (``colour_thumbnail``, 192
bytes) in levels: colour and the absolute light of each cell must agree, once it has taken out what a
near-duplicate may change (a brightness gain, a 2-5% border crop by zooming, a caption strip by
leaving out the cells that differ most). Copies stay within 8 levels (crops, the worst, up to 7.6);
strangers the hash confuses are farther, because nothing ties their colours together: the nearest of
2,000 one-style renders at 8.1, photos' at 34 and more (docs/near-duplicates.md).
"""
import functools
import math

import numpy as np
from PIL import Image

BITS = 64
# Grey pixels a side the DCT sees, and the frequencies a side kept (after dropping the constant ones).
SIZE = 32
KEPT = 8
# Recorded in dataset.json; a change here changes the hashes, so a refresh hashes everything again.
ALGORITHM = 'dct-sign-64+rgb-8x8/2'
# The threshold for small collections: it finds 98-100% of planted crops and captions, whose hashes move
# most (docs/near-duplicates.md); the strangers it lets in are for ``same_picture`` to refuse. It falls
# as the collection grows (``threshold_for``).
MAX_THRESHOLD = 16
# Pairs of unrelated images expected within the threshold, per image, by chance alone (hash bits as
# independent coin flips: the measured spread of unrelated photos' distances matches). Ten times what
# the hash alone could afford (0.005): these are only candidates, and the thumbnail check refused every
# stranger measured; what bounds it is the cost of the band buckets, which a looser threshold fills.
CHANCE_PAIRS_PER_IMAGE = 0.05
_HEX_DIGITS = BITS // 4
# The colour thumbnail that confirms a hash candidate (``same_picture``): box averages, RGB, a byte each.
THUMBNAIL_SIDE = 8
THUMBNAIL_BYTES = THUMBNAIL_SIDE * THUMBNAIL_SIDE * 3
# An image is first shrunk by a whole factor (``Image.reduce``: one fast pass of box averages) while
# its short side stays at least this long; the 32x32 grid averages many pixels either way.
_REDUCED_SIDE = 4 * SIZE


def _dct_rows(n, first, count):
    """Rows ``first``..``first + count - 1`` of the n-point DCT-II matrix (unnormalised: only signs matter)."""
    k = np.arange(first, first + count)[:, None]
    i = np.arange(n)[None, :]
    return np.cos(np.pi * (2 * i + 1) * k / (2 * n))


_LOW = _dct_rows(SIZE, 1, KEPT)  # 8 x 32: a hash is two small matrix products


def _reduced(image):
    """``image`` shrunk by a whole factor (``_REDUCED_SIDE``): the one fast pass the hash and the colour
    thumbnail share (``fingerprint``)."""
    factor = min(image.size) // _REDUCED_SIDE
    return image.reduce(factor) if factor > 1 else image


def _grey_grid(reduced):
    grey = reduced if reduced.mode == 'L' else reduced.convert('L')
    return np.asarray(grey.resize((SIZE, SIZE), Image.Resampling.BOX), dtype=np.float64)


def _hash_of(grid):
    coefficients = _LOW @ grid @ _LOW.T
    return int.from_bytes(np.packbits((coefficients > 0).ravel()).tobytes(), 'big')


def _colour_grid(reduced):
    return reduced.resize((THUMBNAIL_SIDE, THUMBNAIL_SIDE), Image.Resampling.BOX).tobytes()


def grey_thumbnail(image):
    """``image`` as SIZE x SIZE grey values: box averages, after a fast whole-factor reduction."""
    if image.mode not in ('L', 'RGB'):
        image = image.convert('RGB')
    return _grey_grid(_reduced(image))


def perceptual_hash(image):
    """The 64-bit hash of a Pillow image (any mode), as an int in [0, 2**64): frequency (1, 1) is the
    most significant bit, then row by row."""
    return _hash_of(grey_thumbnail(image))


def colour_thumbnail(image):
    """``image`` (RGB) as THUMBNAIL_SIDE x THUMBNAIL_SIDE box averages: THUMBNAIL_BYTES bytes, row by row,
    RGB. Kept from decoding so near-duplicate candidates can be checked on what the grey hash cannot
    see (colour, levels) without reading any image again. Box averages, so a copy scaled or
    re-compressed gives the same cells to a level or two."""
    return _colour_grid(_reduced(image if image.mode == 'RGB' else image.convert('RGB')))


def fingerprint(image):
    """(``perceptual_hash``, ``colour_thumbnail``) of an image, from one shared reduction: what decoding
    keeps of every image."""
    reduced = _reduced(image if image.mode == 'RGB' else image.convert('RGB'))
    return _hash_of(_grey_grid(reduced)), _colour_grid(reduced)


def _zoom_matrix(side, zoom):
    """The side x side linear interpolation that samples the central 1/zoom of a row of cells at
    ``side`` points (edges held): a crop of every border by (1 - 1/zoom) / 2, undone on a thumbnail."""
    inner = side / zoom
    centres = (side - inner) / 2 + (np.arange(side) + 0.5) * inner / side - 0.5
    centres = np.clip(centres, 0, side - 1)
    low = np.minimum(np.floor(centres).astype(int), side - 2)
    weight = centres - low
    matrix = np.zeros((side, side))
    matrix[np.arange(side), low] = 1 - weight
    matrix[np.arange(side), low + 1] = weight
    return matrix


# Border crops the check undoes: a crop of c from every border enlarges the rest by 1 / (1 - 2c), so
# 2-5% crops are 1.04-1.11; each image of the pair is zoomed by each of these in turn, the nearest kept.
ZOOMS = (1.03, 1.06, 1.09, 1.12)
_ZOOMED = np.array([_zoom_matrix(THUMBNAIL_SIDE, zoom) for zoom in ZOOMS])[:, None, None]  # zoom x 1 x 1 x side x side
_ZOOMED_T = _ZOOMED.swapaxes(-1, -2)
# Brightening or darkening by up to this factor is taken out (a caption bar cannot bias the median).
MAX_GAIN = 1.25
# The cells that differ most are left out of the mean: a caption bar or an overlay covers about a row.
DROPPED_CELLS = THUMBNAIL_SIDE


def _cells(thumbnail):
    """A thumbnail as channel x row x column levels."""
    cells = np.frombuffer(thumbnail, dtype=np.uint8).reshape(THUMBNAIL_SIDE, THUMBNAIL_SIDE, 3)
    return cells.transpose(2, 0, 1).astype(np.float64)


def _aligned_distances(x, y):
    """For each alignment (first axis) of x and y (alignment x channel x row x column levels): the
    mean absolute difference in levels of their closest cells, after a common gain."""
    ratio = np.median((y.sum(axis=1) + 1) / (x.sum(axis=1) + 1), axis=(1, 2))
    root = np.sqrt(np.clip(ratio, 1 / MAX_GAIN, MAX_GAIN))[:, None, None, None]  # half on each side: symmetric
    cells = np.abs(x * root - y / root).sum(axis=1).reshape(len(x), -1) / 3
    return np.partition(cells, -DROPPED_CELLS, axis=1)[:, :-DROPPED_CELLS].mean(axis=1)


def thumbnail_distance(a, b):
    """How far apart two colour thumbnails are, in levels (0-255) a channel, once what a near-duplicate
    may change is taken out: a brightness gain (up to MAX_GAIN), a border crop (each image zoomed by
    ZOOMS in turn, the nearest alignment kept) and a strip of cells such as a caption bar (the
    DROPPED_CELLS that differ most). Everything else, colour and the layout at 8x8, must agree."""
    return float(thumbnail_distances([a], [b])[0])


# Pairs measured at once: numpy's cost per call, not per cell, was most of a pair's (0.3 ms alone).
PAIRS_AT_ONCE = 256


def thumbnail_distances(firsts, seconds):
    """``thumbnail_distance`` of each pair (firsts[i], seconds[i]), as an array: the same per-pair arithmetic,
    many pairs a call."""
    found = []
    for start in range(0, len(firsts), PAIRS_AT_ONCE):
        x = np.stack([_cells(a) for a in firsts[start:start + PAIRS_AT_ONCE]])  # pair x channel x row x column
        y = np.stack([_cells(b) for b in seconds[start:start + PAIRS_AT_ONCE]])
        zoomed_x, zoomed_y = _ZOOMED @ x[None] @ _ZOOMED_T, _ZOOMED @ y[None] @ _ZOOMED_T  # zoom x pair x ...
        xs = np.concatenate((x[None], zoomed_x, np.broadcast_to(x, zoomed_y.shape)))  # alignment x pair x ...
        ys = np.concatenate((y[None], np.broadcast_to(y, zoomed_x.shape), zoomed_y))
        distances = _aligned_distances(xs.reshape(-1, *x.shape[1:]), ys.reshape(-1, *y.shape[1:]))
        found.append(distances.reshape(len(xs), len(x)).min(axis=0))
    return np.concatenate(found) if found else np.zeros(0)


# Thumbnails of near-duplicates are within this distance (docs/near-duplicates.md: measured on planted
# copies and on distinct images of one visual style).
THUMBNAIL_THRESHOLD = 8.0


def same_picture(thumbnail_a, thumbnail_b):
    """The second, independent check of a hash candidate: their colour thumbnails agree. A pair
    without a thumbnail (a record from before thumbnails were kept) is not confirmed."""
    return same_pictures([(thumbnail_a, thumbnail_b)])[0]


def same_pictures(pairs):
    """``same_picture`` of each (thumbnail, thumbnail) of ``pairs``, as a list: checked together."""
    whole = [i for i, (a, b) in enumerate(pairs) if a is not None and b is not None]
    distances = thumbnail_distances([pairs[i][0] for i in whole], [pairs[i][1] for i in whole])
    agree = [False] * len(pairs)
    for i, distance in zip(whole, distances):
        agree[i] = bool(distance <= THUMBNAIL_THRESHOLD)
    return agree


def to_hex(value):
    """The index's form of a hash: 16 lowercase hex digits, most significant bit first."""
    return f'{value:0{_HEX_DIGITS}x}'


def from_hex(text):
    return int(text, 16)


def distance(a, b):
    """Hamming distance of two hashes (ints)."""
    return (a ^ b).bit_count()


def chance(threshold):
    """The chance that two unrelated hashes (independent fair bits) are within ``threshold``."""
    return sum(math.comb(BITS, k) for k in range(threshold + 1)) / 2 ** BITS


def threshold_for(images):
    """The threshold for ``images`` hashes: the largest up to MAX_THRESHOLD whose chance pairs per image,
    (images - 1) x chance, stay within CHANCE_PAIRS_PER_IMAGE. 16 up to about 1,300 images, 15 to
    4,100, 14 to 14,000, 12 at 100,000, 10 at 1.28 M."""
    found = 0
    for threshold in range(MAX_THRESHOLD + 1):
        if (images - 1) * chance(threshold) <= CHANCE_PAIRS_PER_IMAGE:
            found = threshold
    return found


@functools.cache
def band_edges(bands, bits=BITS):
    """(start, stop) bit positions of each band, counted from the most significant bit: as equal as
    ``bits`` allows, the first ``bits % bands`` bands one bit wider."""
    base, wider = divmod(bits, bands)
    edges, start = [], 0
    for band in range(bands):
        stop = start + base + (band < wider)
        edges.append((start, stop))
        start = stop
    return tuple(edges)


def bands_for(threshold):
    """Bands for ``threshold``: one more than it, so a pair within it shares one (pigeonhole)."""
    return threshold + 1


def band_values(value, edges, bits=BITS):
    """The value of each band of ``value``: a hash's keys in the band index are (band, value)."""
    return tuple((value >> (bits - stop)) & ((1 << (stop - start)) - 1) for start, stop in edges)


def pairs_within(hashes, threshold, block_cells=1 << 18):
    """(i, j, distance) for every i < j whose hashes (ints) are within ``threshold``: all pairs of one
    band's bucket, vectorised, a block of rows at a time so memory stays bounded however big the bucket."""
    values = np.asarray(hashes, dtype=np.uint64)
    count = len(values)
    rows = max(1, block_cells // max(count, 1))
    for start in range(0, count, rows):
        block = np.bitwise_count(values[start:start + rows, None] ^ values[None, start:])
        for i, j in zip(*np.nonzero(block <= threshold)):
            if j > i:  # columns start at ``start``: j > i is the upper triangle
                yield start + int(i), start + int(j), int(block[i, j])


def confirmed_pairs(hashes, thumbnails, threshold):
    """(i, j, distance) of every pair within ``threshold`` whose thumbnails are ``same_picture`` too:
    the near-duplicates both checks agree on, by brute force (``pairs_within``), for measuring."""
    for i, j, found in pairs_within(hashes, threshold):
        if same_picture(thumbnails[i], thumbnails[j]):
            yield i, j, found
