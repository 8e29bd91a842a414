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
# The threshold for small collections: measured to keep >= 95% of planted copies and group < 1% of
# images with a stranger (docs/near-duplicates.md). It falls as the collection grows (``threshold_for``).
MAX_THRESHOLD = 13
# Pairs of unrelated images expected within the threshold, per image, by chance alone (hash bits as
# independent coin flips: the measured spread of unrelated photos' distances matches).
CHANCE_PAIRS_PER_IMAGE = 0.005
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


def grey_thumbnail(image):
    """``image`` as SIZE x SIZE grey values: box averages, after a fast whole-factor reduction."""
    if image.mode not in ('L', 'RGB'):
        image = image.convert('RGB')
    factor = min(image.size) // _REDUCED_SIDE
    if factor > 1:
        image = image.reduce(factor)
    grey = image if image.mode == 'L' else image.convert('L')
    return np.asarray(grey.resize((SIZE, SIZE), Image.Resampling.BOX), dtype=np.float64)


def perceptual_hash(image):
    """The 64-bit hash of a Pillow image (any mode), as an int in [0, 2**64): frequency (1, 1) is the
    most significant bit, then row by row."""
    coefficients = _LOW @ grey_thumbnail(image) @ _LOW.T
    return int.from_bytes(np.packbits((coefficients > 0).ravel()).tobytes(), 'big')


def colour_thumbnail(image):
    """``image`` (RGB) as THUMBNAIL_SIDE x THUMBNAIL_SIDE box averages: THUMBNAIL_BYTES bytes, row by row,
    RGB. Kept from decoding so near-duplicate candidates can be checked on what the grey hash cannot
    see (colour) without reading any image again."""
    if image.mode != 'RGB':
        image = image.convert('RGB')
    factor = min(image.size) // _REDUCED_SIDE
    if factor > 1:
        image = image.reduce(factor)
    return image.resize((THUMBNAIL_SIDE, THUMBNAIL_SIDE), Image.Resampling.BOX).tobytes()


def thumbnail_distance(a, b):
    """How far apart two colour thumbnails are once brightness and contrast are taken out: the mean
    absolute difference of their values, each thumbnail standardised (mean 0, spread 1) over all its
    values, so a copy brightened or darkened alike everywhere keeps its distance near 0."""
    x = _standardised(a)
    y = _standardised(b)
    return float(np.mean(np.abs(x - y)))


def _standardised(thumbnail):
    values = np.frombuffer(thumbnail, dtype=np.uint8).astype(np.float64)
    spread = values.std()
    return (values - values.mean()) / (spread if spread > 1.0 else 1.0)


# Thumbnails of near-duplicates are within this distance (docs/near-duplicates.md: measured on planted
# copies and on distinct images of one visual style).
THUMBNAIL_THRESHOLD = 0.35


def same_picture(thumbnail_a, thumbnail_b):
    """The second, independent check of a hash candidate: their colour thumbnails agree. A pair
    without a thumbnail (a record from before thumbnails were kept) is not confirmed."""
    if thumbnail_a is None or thumbnail_b is None:
        return False
    return thumbnail_distance(thumbnail_a, thumbnail_b) <= THUMBNAIL_THRESHOLD


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
    (images - 1) x chance, stay within CHANCE_PAIRS_PER_IMAGE. 13 up to about 5,000 images, 12 to
    21,000, 10 at 100,000, 9 at 1.28 M."""
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


def first_shared_band(a, b, edges):
    """The first band on which two hashes agree, or None: a pair found in several bands is kept once."""
    for band, (x, y) in enumerate(zip(band_values(a, edges), band_values(b, edges))):
        if x == y:
            return band
    return None


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
