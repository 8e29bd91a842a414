"""Two 64-bit perceptual hashes of a decoded image (the whole and its centre), and the banding that finds near-duplicates without
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

A second hash, the same of the image's centre (``CENTRE_MARGIN`` of each side left out), finds the copies
the whole image's hash misses most: a caption or watermark bar at an edge, or a border crop, moves the
whole picture's lowest waves, but not its centre's (on the zoo, the union finds 6 more of 50 captioned or
cropped gradients and 4 more of 50 tiny images, docs/near-duplicates.md). A pair is a candidate when
either hash is within the threshold.

Two hashes are near-duplicates when their Hamming distance is at most a threshold. The threshold
depends on how many images there are (``threshold_for``): unrelated hashes agree by chance more often
among more images, so it is the largest (up to ``MAX_THRESHOLD``) that keeps the pairs expected by
chance under ``CHANCE_PAIRS_PER_IMAGE``. Candidate pairs are found by banding: the 64 bits are cut into
threshold + 1 bands, and two hashes that differ in at most the threshold agree exactly on at least
one band (pigeonhole), so comparing only the hashes that share a band's value finds every pair within
the threshold.

A candidate is only a near-duplicate if the images' own pixels agree (``imgrec.imaging.picture_check``,
read by reference from the records as written): the hash keeps the signs of the grey layout's lowest
waves and nothing else, so on a plain background with one small subject it sees "a blob about here",
whatever the blob is. Candidates are cheap; decisions are made on the pictures.
"""
import functools
import math

import numpy as np
from PIL import Image

BITS = 64
# The hashes an image has: its whole, and its centre with CENTRE_MARGIN of each side left out.
HASHES = 2
CENTRE_MARGIN = 0.15
# Grey pixels a side the DCT sees, and the frequencies a side kept (after dropping the constant ones).
SIZE = 32
KEPT = 8
# Recorded in dataset.json; a change here changes the hashes, so a refresh hashes everything again.
ALGORITHM = f'dct-sign-64-whole+centre{round(100 * (1 - 2 * CENTRE_MARGIN))}/4'
# Names of the same hashes (none yet: versions hashed by an earlier ALGORITHM are hashed again on refresh).
SAME_HASH = frozenset((ALGORITHM,))
# The threshold for small collections: crops and captions move the hash most (up to 20 bits and more on the
# zoo's styles, docs/near-duplicates.md); the strangers it lets in are for the pixel check to refuse. It
# falls as the collection grows (``threshold_for``).
MAX_THRESHOLD = 20
# Pairs of unrelated images expected within the threshold, per image, by chance alone (hash bits as
# independent coin flips: the measured spread of unrelated photos' distances matches). Ten times what
# the hash alone could afford (0.005): these are only candidates, for the pixel check to refuse;
# what bounds it is the cost of the band buckets, which a looser threshold fills.
CHANCE_PAIRS_PER_IMAGE = 0.05
# Chance candidates in the whole collection the pixel check may be given, a hash (HASHES hashes: up to twice as
# many; 0.1-0.4 ms each with the pictures decoded, a second or two of CPU in all): what lets a small collection
# use a looser threshold than the per-image budget would.
CHANCE_CHECKS = 5_000
_HEX_DIGITS = BITS // 4
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
    """``image`` shrunk by a whole factor (``_REDUCED_SIDE``): one fast pass before the 32x32 box averages."""
    factor = min(image.size) // _REDUCED_SIDE
    return image.reduce(factor) if factor > 1 else image


def _reduced_grey(image):
    """``image`` (any mode) shrunk by a whole factor (``_reduced``) and in grey: what both hashes are cut from."""
    if image.mode not in ('L', 'RGB'):
        image = image.convert('RGB')
    reduced = _reduced(image)
    return reduced if reduced.mode == 'L' else reduced.convert('L')


def _grey_grid(grey, box=None):
    """SIZE x SIZE box averages of the grey image ``grey``, of its ``box`` (left, top, right, bottom) or all."""
    return np.asarray(grey.resize((SIZE, SIZE), Image.Resampling.BOX, box=box), dtype=np.float64)


def _hash_of(grid):
    coefficients = _LOW @ grid @ _LOW.T
    return int.from_bytes(np.packbits((coefficients > 0).ravel()).tobytes(), 'big')


def perceptual_hash(image):
    """The 64-bit hash of the whole of a Pillow image (any mode), as an int in [0, 2**64): frequency (1, 1) is
    the most significant bit, then row by row."""
    return _hash_of(_grey_grid(_reduced_grey(image)))


def _centre(size):
    """The box of the centre of an image of ``size``: CENTRE_MARGIN of each side left out."""
    width, height = size
    return (width * CENTRE_MARGIN, height * CENTRE_MARGIN, width * (1 - CENTRE_MARGIN), height * (1 - CENTRE_MARGIN))


def perceptual_hashes(image):
    """The image's HASHES hashes: (whole, centre), the centre's CENTRE_MARGIN of each side left out. One
    reduction and one grey conversion serve both."""
    grey = _reduced_grey(image)
    return _hash_of(_grey_grid(grey)), _hash_of(_grey_grid(grey, _centre(grey.size)))


def to_hex(values):
    """The index's form of a hash, or of a tuple of them: 16 lowercase hex digits each, most significant
    bit first, one after the other."""
    return ''.join(f'{value:0{_HEX_DIGITS}x}' for value in ((values,) if isinstance(values, int) else values))


def from_hex(text):
    """The hashes of ``to_hex``'s text, as a tuple of ints."""
    return tuple(int(text[start:start + _HEX_DIGITS], 16) for start in range(0, len(text), _HEX_DIGITS))


def distance(a, b):
    """Hamming distance of two hashes (ints)."""
    return (a ^ b).bit_count()


def nearest_distance(a, b):
    """The distance of two images' hashes (tuples, ``perceptual_hashes``): the smallest of their hashes'
    distances, as a pair within the threshold on either hash is a candidate."""
    return min(distance(x, y) for x, y in zip(a, b))


def chance(threshold):
    """The chance that two unrelated hashes (independent fair bits) are within ``threshold``."""
    return sum(math.comb(BITS, k) for k in range(threshold + 1)) / 2 ** BITS


def threshold_for(images):
    """The threshold for ``images`` hashes: the largest up to MAX_THRESHOLD whose chance candidates stay
    within one of two budgets: CHANCE_PAIRS_PER_IMAGE an image ((images - 1) x chance), or CHANCE_CHECKS in
    all (images x (images - 1) / 2 x chance): a small collection can afford a few thousand pixel checks,
    and a looser threshold finds the crops and captions whose hashes move most. 20 up to about 2,000
    images, 19 at 2,400, 16 at 10,000, 13 at 100,000, 10 at 1.28 M."""
    found = 0
    pairs = images * (images - 1) / 2
    for threshold in range(MAX_THRESHOLD + 1):
        if ((images - 1) * chance(threshold) <= CHANCE_PAIRS_PER_IMAGE
                or pairs * chance(threshold) <= CHANCE_CHECKS):
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
