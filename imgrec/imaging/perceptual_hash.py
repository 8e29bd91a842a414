"""Two 64-bit perceptual hashes of a decoded image (the whole and its centre), from which near-duplicate candidates
are found: plain functions (Pillow and numpy, which Beam brings; no TensorFlow).

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

A wave weaker than re-compression noise (``WEAK``: a quarter of a grey level) has no sign worth keeping:
a smooth gradient has few waves above it, and any re-save drew the signs of the rest again (a JPEG copy of
a gradient moved up to 36 of 64 bits). The bit of such a wave is taken instead from the image's colour
layout as a whole: the sign of a fixed random projection (``_PROJECTIONS``, +1 or -1 each) of its grey
and chroma waves and its mean chroma. A copy moves that layout little, so it keeps those bits; a photo
has few weak waves (7-9 of 64), so its hash is nearly the plain signs. Measured on the zoo
(docs/near-duplicates.md), this found 49-50 of 50 copies of gradients (43 with plain signs) and lost none
on any other style.

A second hash, the same of the image's centre (``CENTRE_MARGIN`` of each side left out), finds the copies
the whole image's hash misses most: a caption or watermark bar at an edge, or a border crop, moves the
whole picture's lowest waves, but not its centre's (on the zoo, the union finds 6 more of 50 captioned or
cropped gradients and 4 more of 50 tiny images, docs/near-duplicates.md). A pair is a candidate when
either hash is within the threshold.

Two images are candidates when one of them is among the other's few nearest by hash distance, within
``MAX_THRESHOLD`` (``imgrec.imaging.hash_neighbours``): how far a crop or caption moves a hash, measured on the
zoo, bounds the distance, and the nearest-first rule bounds the candidates an image, whatever the collection
looks like (a collection of one kind puts most pairs of a class within any threshold that finds crops).

A candidate is only a near-duplicate if the images' own pixels agree (``imgrec.imaging.picture_check``,
read by reference from the records as written): the hash keeps the coarse layout of the lowest waves and
nothing else, so on a plain background with one small subject it sees "a blob about here",
whatever the blob is. Candidates are cheap; decisions are made on the pictures.
"""
import hashlib

import numpy as np
from PIL import Image

BITS = 64
# The hashes an image has: its whole, and its centre with CENTRE_MARGIN of each side left out.
HASHES = 2
CENTRE_MARGIN = 0.15
# Grey pixels a side the DCT sees, and the frequencies a side kept (after dropping the constant ones).
SIZE = 32
KEPT = 8
# A wave whose coefficient is at most this is noise, its bit projected (``_hashes_of``). The coefficients
# are unnormalised: a wave of amplitude A grey levels on the 32x32 grid gives 256 A, so this is A = 1/4.
WEAK = 64.0
# The mean chroma's weight among the waves projected: a mean 16 levels off grey weighs as a wave of one level.
# It tells apart flat pictures, which have no waves to project, by their colour.
MEAN_CHROMA_WEIGHT = 16.0
# A wave or a projection at most this far from 0 is rounding noise (a flat grey picture's are ~1e-13, and differ
# from one BLAS or CPU to another): its bit is 0, so such a picture hashes alike everywhere, in L or RGB.
NOISE = 1e-6
# Recorded in dataset.json; a change here changes the hashes, so a refresh hashes everything again.
ALGORITHM = (f'dct-sign-64-whole+centre{round(100 * (1 - 2 * CENTRE_MARGIN))}'
             f'-weak{round(WEAK)}-colour-projected-noise/6')
# Names of the same hashes: versions hashed by another ALGORITHM are hashed again on refresh. /5 differs from /6
# only where a bit was rounding noise (flat grey pictures), which no two machines were sure to agree on.
SAME_HASH = frozenset((ALGORITHM, ALGORITHM.replace('-noise/6', '/5')))
# The farthest apart two hashes may be and still be candidates: crops and captions move the hash most (up to 20
# bits and more on the zoo's styles, docs/near-duplicates.md); the strangers it lets in are for the nearest-first
# rule to bound and the pixel check to refuse.
MAX_THRESHOLD = 20
_HEX_DIGITS = BITS // 4
# An image is first shrunk by a whole factor (``Image.reduce``: one fast pass of box averages) while
# its short side stays at least this long: each cell of the colour grid (``_GRID``) still averages a pixel or more.
_REDUCED_SIDE = 2 * SIZE


def _dct_rows(n, first, count):
    """Rows ``first``..``first + count - 1`` of the n-point DCT-II matrix (unnormalised: only signs matter)."""
    k = np.arange(first, first + count)[:, None]
    i = np.arange(n)[None, :]
    return np.cos(np.pi * (2 * i + 1) * k / (2 * n))


def _signs(rows, columns, salt):
    """A rows x columns matrix of +1 and -1 drawn from SHA-256 of ``salt``: fixed whatever numpy's generators do."""
    need = rows * columns
    digest = b''.join(hashlib.sha256(f'{salt}:{block}'.encode()).digest() for block in range(-(-need // 256)))
    bits = np.unpackbits(np.frombuffer(digest, dtype=np.uint8))[:need]
    return (2.0 * bits - 1.0).reshape(rows, columns)


def _box_rows(start, stop, cells, grid):
    """A cells x grid matrix whose rows average ``grid`` cells from ``start`` to ``stop`` (fractions of a cell at
    the ends) in ``cells`` equal boxes: a box resize of a part of the grid, as a matrix product."""
    edges = np.linspace(start, stop, cells + 1)
    left, right = np.arange(grid)[None, :], np.arange(1, grid + 1)[None, :]
    overlap = np.clip(np.minimum(right, edges[1:, None]) - np.maximum(left, edges[:-1, None]), 0, None)
    return overlap / overlap.sum(axis=1, keepdims=True)


_LOW = _dct_rows(SIZE, 1, KEPT)
# The image is box-averaged once to a GRID x GRID colour grid; each hash's box (the whole, the centre) is
# averaged from it to SIZE x SIZE and transformed by one 8 x GRID matrix a side.
_GRID = 2 * SIZE
_WHOLE = _box_rows(0, _GRID, SIZE, _GRID)
_CENTRE = _box_rows(_GRID * CENTRE_MARGIN, _GRID * (1 - CENTRE_MARGIN), SIZE, _GRID)
_WAVES = np.stack([_LOW @ box for box in (_WHOLE, _CENTRE)])  # (whole, centre) x 8 x GRID
# Both hashes' waves in one product a side (``_hashes_of``): all 16 rows for the grid's rows, and each hash's
# transpose for its columns.
_WAVE_ROWS = _WAVES.reshape(HASHES * KEPT, _GRID)
_WAVE_COLUMNS = _WAVES.transpose(0, 2, 1)[:, None]  # (whole, centre) x 1 x GRID x 8
_MEANS = np.stack([box.mean(axis=0) for box in (_WHOLE, _CENTRE)])[:, None]  # (whole, centre) x 1 x GRID
# Y, Cb and Cr of an RGB pixel (JPEG's, without Cb and Cr's offset of 128: grey is 0).
_TO_YCC = np.array([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])
# One projection a bit, over the grey and chroma waves (3 x 64) and the mean chroma (2).
_PROJECTIONS = _signs(BITS, 3 * KEPT * KEPT + 2, 'imgrec perceptual hash: weak waves')


def _reduced(image):
    """``image`` shrunk by a whole factor (``_REDUCED_SIDE``): one fast pass before the box averages."""
    factor = min(image.size) // _REDUCED_SIDE
    return image.reduce(factor) if factor > 1 else image


def _colour_grid(image):
    """The box averages of ``image`` (any mode) on a GRID x GRID grid, levels: GRID x GRID x 3 (RGB), or x 1 (grey)."""
    if image.mode not in ('L', 'RGB'):
        image = image.convert('RGB')
    small = _reduced(image).resize((_GRID, _GRID), Image.Resampling.BOX)
    return np.frombuffer(small.tobytes(), dtype=np.uint8).reshape(_GRID, _GRID, -1)


def _hashes_of(grid):
    """The HASHES hashes (the whole, the centre) of a colour grid (``_colour_grid``): each grey wave's sign, or
    where the wave is WEAK, the sign of its projection of the colour layout (``_PROJECTIONS``).
    The transforms are linear, so they run on the grid's own channels and Y, Cb and Cr are mixed after.

    Both hashes go through each step together, and every sum is the one a hash computed alone, in the same
    order (BLAS sums an entry the same way whatever the rows beside it; a stack of products is run one by one),
    so the bits are the same: a weak wave's projection can be near 0 (within NOISE of it, a bit is 0). The
    means stay products of a vector (gemv): as rows of the waves' product (gemm) they round differently."""
    channels = grid.shape[2]
    levels = grid.reshape(_GRID, -1).astype(float)  # once, for the three products that read it
    # Written transposed, which hands the next product its operands in BLAS's layout (the same sums).
    columns = (levels.T @ _WAVE_ROWS.T).reshape(_GRID, channels, HASHES, KEPT).transpose(2, 1, 3, 0)
    channel_waves = (columns @ _WAVE_COLUMNS).reshape(HASHES, channels, KEPT * KEPT)
    layouts = np.zeros((HASHES, 3 * KEPT * KEPT + 2))
    if channels == 3:
        layouts[:, :-2] = (_TO_YCC @ channel_waves).reshape(HASHES, -1)
        channel_means = _MEANS @ (_MEANS @ levels).reshape(HASHES, _GRID, channels)  # HASHES x 1 x channels
        layouts[:, -2:] = MEAN_CHROMA_WEIGHT * (_TO_YCC[1:] @ channel_means.transpose(0, 2, 1))[..., 0]
    else:  # grey: no chroma
        layouts[:, :KEPT * KEPT] = channel_waves[:, 0]
    layouts[np.abs(layouts) <= NOISE] = 0.0
    grey = layouts[:, :KEPT * KEPT]
    projected = (_PROJECTIONS @ layouts[..., None])[..., 0]
    bits = np.where(np.abs(grey) > WEAK, grey, projected) > NOISE
    return tuple(np.packbits(bits).view('>u8').tolist())


def perceptual_hash(image):
    """The 64-bit hash of the whole of a Pillow image (any mode), as an int in [0, 2**64): frequency (1, 1) is
    the most significant bit, then row by row."""
    return perceptual_hashes(image)[0]


def perceptual_hashes(image):
    """The image's HASHES hashes: (whole, centre), the centre's CENTRE_MARGIN of each side left out, from one
    colour grid."""
    return _hashes_of(_colour_grid(image))


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
