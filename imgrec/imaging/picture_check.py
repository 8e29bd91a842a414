"""The confirmation of a near-duplicate candidate on the two images' own pixels: plain functions (Pillow
and numpy, which every worker has; no scikit-image, docs/near-duplicates.md says why).

The perceptual hash only proposes candidates: it keeps the signs of the grey layout's lowest waves, so
on a plain background with one small subject it sees "a blob about here" whatever the blob is (a 0 and
a 6, a circle and a square). A candidate is a near-duplicate only if the pictures themselves agree at a
resolution that sees shape (``SIDE`` pixels a side, grey), once what a near-duplicate may change is
allowed for:
- a **border crop or a scale** (2-5% cut from the borders, the rest enlarged): each image is compared
  with the other zoomed by each of ``ZOOMS`` (the central part resized back), the best kept;
- a **brightness or contrast change**: the grey images are compared by normalised correlation, which
  ignores a gain and an offset;
- a **caption or watermark strip**: the strip of ``DROPPED_ROWS`` rows that disagrees most is left out
  (a bar of up to ~15% of the height, at the top, the bottom or across);
- **a local difference**: a whole-picture correlation averages away a stroke one picture has and the
  other lacks (a 3 and a 0 on the same paper correlate at 0.96), so no block of ``BLOCK`` x ``BLOCK``
  pixels of the kept rows may differ by more than ``MAX_LOCAL`` (standardised) unless it differs by little
  against the pair's range of levels (``MAX_LOCAL_OF_RANGE``: a small icon on a plain ground stands many
  standard deviations off its ground, so the resampling of its edges looks large in standardised units);
- **colour**: a grey match of two pictures of other colours (two gradients of one direction, one bottle
  purple and one green) is not a copy: the kept colour cells' chroma (hue and saturation, not light) must
  agree cell by cell within ``MAX_CHROMA``, allowing the saturation a contrast change moves.
Flat pictures (little grey structure) have no shape to correlate: they must agree in their colour
cells, in levels, once a brightness gain is taken out, on average (``MAX_FLAT_LEVELS``) and in every cell
(``MAX_FLAT_CELL``: a small icon on a plain ground is one or two cells), and in colour, the row of cells
that disagrees most left out if it disagrees as a bar does (a caption or watermark on a plain picture).
A pair is judged as flat only if neither picture has more than ``MAX_FLAT_SPREAD`` levels of spread once
the strip of rows that disagrees most is left out: fine stripes or dots a cell wide have the colour cells
of a plain picture of their mean colour, but not its spread.

Read by reference: a ``Picture`` is made from the JPEG the build wrote (``from_jpeg``), decoded with
Pillow's ``draft`` (the JPEG decoder scales by 1/2 to 1/8 as it decodes), so a candidate costs a ranged
read and a fraction of a millisecond, and nothing is carried on the records.
"""
import io
import typing

import numpy as np
from PIL import Image

# Grey pixels a side compared: enough to tell a 0 from a 6 or a page's lines from another's.
SIDE = 32
# A picture is decoded to at least this many pixels a side (JPEG draft) before the zooms are cut from it.
_DECODED = 2 * SIDE
# Zooms undone: a crop of c from every border enlarges the rest by 1 / (1 - 2c) (2-5%: 1.04-1.11); a
# one-sided crop shifts as well as zooms, which the nearest zoom absorbs at 32 pixels.
ZOOMS = (1.0, 1.02, 1.04, 1.06, 1.08, 1.10, 1.12)
# Rows of SIDE left out: the strip of them that disagrees most, a caption or watermark bar of up to ~15% of
# the height, at the top, the bottom or across.
DROPPED_ROWS = 5
# Colour cells a side for the colour term and for flat pictures.
CELLS = 8
# The thresholds (chosen on the zoo's tuning styles, checked on its check styles: docs/near-duplicates.md).
MIN_CORRELATION = 0.92   # normalised correlation of the kept grey rows, best alignment
MAX_LOCAL = 0.4          # the largest block's mean squared difference, standardised grey (``_local_difference``)
MAX_LOCAL_OF_RANGE = 0.007  # ... or that difference over the squared range of the pair's standardised levels
BLOCK = 4                # pixels a side of those blocks, of SIDE
MAX_CHROMA = 0.022       # mean chroma difference of the kept colour cells (``_chroma_difference``)
MAX_SATURATION = 1.5     # a contrast change of 20% either way scales the chroma by up to this
CHROMA_DAMPING = 96.0    # levels added to a cell's r + g + b before its chroma is taken (``_chroma_cells``)
FLAT_STD = 4.0           # grey standard deviation (levels) under which a picture is flat: no shape to compare
MAX_FLAT_LEVELS = 8.0    # flat pictures: mean absolute difference of the colour cells, in levels, after a gain
MAX_FLAT_CELL = 18.0     # flat pictures: the most one colour cell may differ, in levels (another small icon)
MAX_GAIN = 1.25          # the brightness gain allowed for flat pictures (a 20% brightening; 1/1.25 darkening)
MAX_FLAT_SPREAD = 7.0    # a flat pair: each picture's grey standard deviation (levels) over the kept rows
# ``surely_refused``: how far under MIN_CORRELATION a correlation bound must be to refuse (its products of the two
# pictures are summed in another order than the check's, in float32, and its correlation is rearranged: the lab's
# pairs have the check at most 2e-7 over its bound), and the variance a pixel (standardised over the whole
# picture) under which the rows kept are plain (no bound: either correlation is rounding noise).
BOUND_MARGIN = 1e-3
PLAIN_ROWS = 0.01
# Recorded in dataset.json (near_duplicates.check): a change of rule or threshold changes the groups.
ALGORITHM = (f'ncc-grey{SIDE}-zoom{len(ZOOMS)}-strip{DROPPED_ROWS}+local{BLOCK}-of-range+chroma{CELLS}'
             '+flat-cell-spread/5')


class Colour:
    """Where a picture's colour cells come from, cut only when a pair gets that far (``_cells``: most
    candidates are refused on the grey): its small RGB image, or the JPEG it was decoded from, decoded again
    for each zoom first asked (the same pixels: the decoder is deterministic). A picture kept for later
    candidates then holds its JPEG (a few kB) and the cells cut, never the image (38 kB at 112 pixels)."""
    __slots__ = ('_rgb', '_jpeg', '_cells')

    def __init__(self, rgb: Image.Image | None = None, jpeg: bytes | None = None):
        self._rgb = rgb
        self._jpeg = jpeg
        self._cells: dict[int, np.ndarray] = {}

    def rgb(self) -> Image.Image:
        """The small RGB image the cells are cut from (at least _DECODED a side): decoded again from the JPEG
        each time, not kept."""
        if self._rgb is None:
            if self._jpeg is None:
                raise ValueError('a Colour needs an image or the JPEG it is decoded from')
            return _decoded(self._jpeg)
        return self._rgb

    def cells(self, zoom: int) -> np.ndarray:
        """CELLS x CELLS x 3 colour cells (box averages, levels) at ZOOMS[zoom], cut once."""
        if zoom not in self._cells:
            rgb = self.rgb()
            self._cells[zoom] = np.asarray(rgb.resize((CELLS, CELLS), Image.Resampling.BOX,
                                                      box=_box(rgb.size, ZOOMS[zoom])), dtype=np.float32)
        return self._cells[zoom]


class Picture(typing.NamedTuple):
    """What the check keeps of one image: its grey at each zoom, standardised, with its rows' sums (so that a
    pair's correlations over any rows cost one product), and where its colour cells are cut from when a
    pair gets that far (``_cells``)."""
    grey: np.ndarray         # len(ZOOMS) x SIDE x SIDE, float32, each zoom standardised (mean 0, sd 1)
    row_sums: np.ndarray     # len(ZOOMS) x SIDE: each row's sum of ``grey``
    row_squares: np.ndarray  # len(ZOOMS) x SIDE: each row's sum of squares
    colour: Colour           # the colour cells, cut when first asked
    spread: float            # grey standard deviation, levels (at zoom 1)

    @property
    def flat(self) -> bool:
        """Whether the picture has too little grey structure to correlate (under FLAT_STD levels)."""
        return self.spread < FLAT_STD


def _box(size: tuple[int, int], zoom: float) -> tuple[float, float, float, float]:
    """The central 1/zoom of an image of ``size``: what a border crop leaves, enlarged by ``zoom``."""
    width, height = size
    w, h = width / zoom, height / zoom
    return (width - w) / 2, (height - h) / 2, (width + w) / 2, (height + h) / 2


def _rgb(image: Image.Image) -> Image.Image:
    return image if image.mode == 'RGB' else image.convert('RGB')


def _decoded(data: bytes) -> Image.Image:
    """JPEG (or any Pillow format's) bytes decoded small, RGB: Pillow's draft lets the JPEG decoder scale down
    as it decodes, the whole of the check's decoding cost."""
    image = Image.open(io.BytesIO(data))
    image.draft('RGB', (_DECODED, _DECODED))
    return _rgb(image)


class Levels(typing.NamedTuple):
    """A picture as a worker keeps it between candidates: its grey levels at each zoom (7 kB, where the Picture's
    standardised floats take 30 kB) with what standardising them gave once (``_levels``), so that ``picture()``
    redoes only the subtraction and the division: the same numbers each time, for a fifth of the work."""
    levels: bytes            # len(ZOOMS) x SIDE x SIDE, uint8: each zoom box-averaged by Pillow
    mean: np.ndarray         # len(ZOOMS) x 1 x 1, float32: each zoom's mean level
    scale: np.ndarray        # len(ZOOMS) x 1 x 1, float32: each zoom's standard deviation (at least 1e-3)
    row_sums: np.ndarray     # the Picture's
    row_squares: np.ndarray  # the Picture's
    spread: float            # the Picture's
    colour: Colour

    def picture(self) -> Picture:
        grey = _grey(self.levels)
        grey -= self.mean
        grey /= self.scale
        return Picture(grey, self.row_sums, self.row_squares, self.colour, self.spread)


def _grey(levels: bytes) -> np.ndarray:
    return np.frombuffer(levels, dtype=np.uint8).reshape(len(ZOOMS), SIDE, SIDE).astype(np.float32)


def _levels(rgb: Image.Image, colour: Colour) -> Levels:
    """Each zoom box-averaged by Pillow (the zooms' bytes read at once: an array a zoom costs more than the resize)
    and standardised (mean 0, standard deviation 1; zoom 1's deviation before is the spread). The rows' sums are
    shared by every Picture made from the Levels: read-only."""
    grey_image = rgb.convert('L')
    levels = b''.join(grey_image.resize((SIDE, SIDE), Image.Resampling.BOX, box=_box(rgb.size, zoom)).tobytes()
                      for zoom in ZOOMS)
    grey = _grey(levels)
    mean = grey.mean(axis=(1, 2), keepdims=True)
    grey -= mean
    deviation = np.sqrt(np.square(grey).mean(axis=(1, 2), keepdims=True))
    scale = np.maximum(deviation, 1e-3)
    grey /= scale
    row_sums, row_squares = grey.sum(axis=2), np.square(grey).sum(axis=2)
    row_sums.setflags(write=False)
    row_squares.setflags(write=False)
    return Levels(levels, mean, scale, row_sums, row_squares, float(deviation[0, 0, 0]), colour)


def from_image(image: Image.Image) -> Picture:
    """A Picture of a Pillow image (any mode)."""
    rgb = _rgb(image)
    return _levels(rgb, Colour(rgb=rgb)).picture()


def _cells(picture: Picture, zoom: int) -> np.ndarray:
    """The picture's CELLS x CELLS x 3 colour cells (box averages, levels) at ZOOMS[zoom]."""
    return picture.colour.cells(zoom)


def levels_from_jpeg(data: bytes) -> Levels:
    """The Levels of JPEG (or any Pillow format's) bytes, decoded small (``_decoded``); they keep the bytes, not
    the image, for their colour cells (``Colour``)."""
    return _levels(_decoded(data), Colour(jpeg=data))


def from_jpeg(data: bytes) -> Picture:
    """A Picture of JPEG (or any Pillow format's) bytes (``levels_from_jpeg``)."""
    return levels_from_jpeg(data).picture()


# The alignments compared: a at zoom 1 against b at each zoom, then a at each other zoom against b at zoom 1.
_ZOOM_A = np.array([0] * len(ZOOMS) + list(range(1, len(ZOOMS))))
_ZOOM_B = np.array(list(range(len(ZOOMS))) + [0] * (len(ZOOMS) - 1))


def _strip_sums(rows: np.ndarray) -> np.ndarray:
    """Per-row sums (... x SIDE, float32) summed over the rows kept, for each strip of DROPPED_ROWS rows left out
    (... x (SIDE - DROPPED_ROWS + 1)), in float64: the whole less each strip, the strips summed as shifted rows
    (a cumsum along rows this short costs more). Sums of SIDE float32 in float64 are exact while the terms are
    within 2 ** 24 of each other in size, so the order does not matter."""
    rows = rows.astype(np.float64)
    strips = SIDE - DROPPED_ROWS + 1
    kept = rows[..., :strips] + rows[..., 1:strips + 1]
    for first in range(2, DROPPED_ROWS):
        kept += rows[..., first:strips + first]
    return np.subtract(rows.sum(axis=-1, keepdims=True), kept, out=kept)


def _strip_correlations(cross: np.ndarray, sx: np.ndarray, sy: np.ndarray, qx: np.ndarray,
                        qy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """From two pictures' per-row sums (of x * y, x, y, x ** 2, y ** 2; ... x SIDE), for each strip left out:
    (the correlation over the rows kept, their sum of (x - y) ** 2). The check reads its correlations here; its
    bound (``correlation_bounds``) has the same, rearranged for many pairs."""
    xy, x, y, xx, yy = _strip_sums(np.stack((cross, sx, sy, qx, qy)))
    pixels = float((SIDE - DROPPED_ROWS) * SIDE)
    variance_x, variance_y = xx - x ** 2 / pixels, yy - y ** 2 / pixels
    correlation = (xy - x * y / pixels) / np.sqrt(np.maximum(variance_x * variance_y, 1e-12))
    return correlation, xx + yy - 2 * xy


def _kept_correlation(a: Picture, b: Picture) -> tuple[np.ndarray, np.ndarray]:
    """For each alignment (``_ZOOM_A``, ``_ZOOM_B``): (the correlation of the two grey pictures over the rows
    kept, the kept rows' mask), the strip of DROPPED_ROWS rows that disagrees most left out (the least
    difference kept). Two products of the pair's pictures; the rest is in rows, from the pictures' own row sums."""
    zooms = len(ZOOMS)
    cross = np.empty((len(_ZOOM_A), SIDE), dtype=np.float32)  # alignment x row: sum of x * y
    np.einsum('ij,kij->ki', a.grey[0], b.grey, out=cross[:zooms])
    np.einsum('kij,ij->ki', a.grey[1:], b.grey[0], out=cross[zooms:])
    correlation, difference = _strip_correlations(cross, a.row_sums[_ZOOM_A], b.row_sums[_ZOOM_B],
                                                  a.row_squares[_ZOOM_A], b.row_squares[_ZOOM_B])
    start = np.argmin(difference, axis=1)
    rows = np.arange(SIDE)[None, :]
    keep = (rows < start[:, None]) | (rows >= start[:, None] + DROPPED_ROWS)
    return correlation[np.arange(len(start)), start], keep


def _alignments(a: Picture, b: Picture) -> tuple[np.ndarray, np.ndarray]:
    """(x, y): the standardised grey pictures of each alignment (``_ZOOM_A``, ``_ZOOM_B``)."""
    return a.grey[_ZOOM_A], b.grey[_ZOOM_B]


def _chroma_cells(cells: np.ndarray) -> np.ndarray:
    """Each colour cell's chroma (n x 3): its chromaticity (r, g, b over their sum) less grey's (1/3 each),
    a vector whose direction is the hue and whose length the saturation, nothing of its light; dark cells
    are damped (CHROMA_DAMPING levels added to the sum: the hue of noise on black means nothing)."""
    total = cells.sum(axis=-1, keepdims=True)
    return (cells - total / 3) / (total + CHROMA_DAMPING)


def _chroma_difference(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over the cells of the absolute chroma difference (summed over r, g, b) of two pictures' aligned
    colour cells (n x 3), once a contrast change is allowed for: it scales every chroma (saturation) by up to
    MAX_SATURATION either way, so b's is scaled towards a's first (least squares, clipped)."""
    ca, cb = _chroma_cells(a), _chroma_cells(b)
    scale = float(np.clip((ca * cb).sum() / ((cb * cb).sum() + 1e-9), 1 / MAX_SATURATION, MAX_SATURATION))
    return float(np.abs(ca - scale * cb).sum(axis=-1).mean())


def _local_difference(x: np.ndarray, y: np.ndarray, keep: np.ndarray) -> float:
    """The largest mean squared difference over a block of BLOCK x BLOCK pixels of the kept rows, the two
    grey pictures (SIDE x SIDE) standardised over those rows: a stroke one has and the other lacks (a 3
    against a 0, a label of other words) is local, where a copy's differences (resampling, re-compression)
    are spread thin; a correlation over the whole picture averages it away. Where that difference is
    small against the pair's range of levels (a small subject), it is returned as a multiple of MAX_LOCAL
    instead: whichever of the two verdicts is the milder."""
    mask = np.broadcast_to(keep[:, None], x.shape)

    def standardised(values):
        centred = values - values[mask].mean()
        return centred / (np.sqrt((centred[mask] ** 2).mean()) + 1e-6)

    x, y = standardised(x), standardised(y)
    blocks = ((x - y) ** 2).reshape(SIDE // BLOCK, BLOCK, SIDE // BLOCK, BLOCK).mean(axis=(1, 3))
    kept_blocks = keep.reshape(SIDE // BLOCK, BLOCK).all(axis=1)
    if not kept_blocks.any():
        return 0.0
    largest = float(blocks[kept_blocks].max())
    span = max(float(np.ptp(x[mask])), float(np.ptp(y[mask])))
    return min(largest, largest / span ** 2 / MAX_LOCAL_OF_RANGE * MAX_LOCAL)


def _flat_levels(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each cell's mean absolute difference in levels of two flat pictures' colour cells (n x 3), after
    the gain (brightness, up to MAX_GAIN either way) that brings them closest, half applied to each:
    symmetric."""
    gain = float(np.clip(np.median((a.sum(axis=-1) + 8) / (b.sum(axis=-1) + 8)), 1 / MAX_GAIN, MAX_GAIN))
    root = np.sqrt(gain)
    return np.abs(a / root - b * root).mean(axis=-1)


def _without_strip(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two pictures' colour cells (CELLS x CELLS x 3) as (n x 3) lists, leaving out the row of cells that
    differs most in levels if it differs as a bar does, across (a caption or watermark bar: its median
    cell differs by more than MAX_FLAT_LEVELS), not in a few cells (another icon on the same ground)."""
    cell_differences = np.abs(a - b).mean(axis=2)
    worst = int(np.argmax(cell_differences.mean(axis=1)))
    keep = np.ones(len(a), dtype=bool)
    keep[worst] = np.median(cell_differences[worst]) <= MAX_FLAT_LEVELS
    return a[keep].reshape(-1, 3), b[keep].reshape(-1, 3)


def _kept_spread(picture: Picture, rows: np.ndarray) -> float:
    """The picture's grey standard deviation (levels, zoom 1) over ``rows`` (a mask), from its rows' sums."""
    pixels = float(rows.sum() * SIDE)
    mean = picture.row_sums[0][rows].sum() / pixels
    variance = picture.row_squares[0][rows].sum() / pixels - mean ** 2
    return picture.spread * float(np.sqrt(max(variance, 0.0)))


def _measured(a: Picture, b: Picture) -> tuple[bool, float, float, float]:
    """(judged as flat, ``compare``'s three numbers): a pair with a flat picture is judged as flat if neither
    has more than MAX_FLAT_SPREAD levels of spread outside the strip that disagrees most (at zoom 1)."""
    correlation, keep = _kept_correlation(a, b)
    if (a.flat or b.flat) and max(_kept_spread(a, keep[0]), _kept_spread(b, keep[0])) <= MAX_FLAT_SPREAD:
        first, second = _without_strip(_cells(a, 0), _cells(b, 0))
        levels = _flat_levels(first, second)
        return True, 1.0 - float(levels.mean()) / 255.0, float(levels.max()), _chroma_difference(first, second)
    best = int(np.argmax(correlation))
    za, zb = int(_ZOOM_A[best]), int(_ZOOM_B[best])
    local = _local_difference(a.grey[za], b.grey[zb], keep[best])
    if correlation[best] < MIN_CORRELATION or local > MAX_LOCAL:  # refused on the grey: no colour needed
        return False, float(correlation[best]), local, float('nan')
    kept = keep[best].reshape(CELLS, SIDE // CELLS).all(axis=1)  # colour rows free of dropped grey rows
    cells_a, cells_b = _cells(a, za)[kept].reshape(-1, 3), _cells(b, zb)[kept].reshape(-1, 3)
    chroma = _chroma_difference(cells_a, cells_b) if len(cells_a) else 0.0
    return False, float(correlation[best]), local, chroma


def compare(a: Picture, b: Picture) -> tuple[float, float, float]:
    """(grey correlation, local difference, chroma difference) of two pictures at their best alignment: what
    ``same_picture`` judges; the chroma is NaN (not measured) when the grey already refuses the pair. Flat
    pairs (``_measured``), which have no shape to correlate: (1 - mean levels / 255, the largest cell's
    levels, chroma difference) of their colour cells (``_flat_levels``), a bar's row left out
    (``_without_strip``)."""
    return _measured(a, b)[1:]


def correlation_bounds(pairs: typing.Sequence[tuple[Picture, Picture]]) -> np.ndarray:
    """For each (Picture, Picture) of ``pairs`` (neither flat): the largest grey correlation of the two over every
    alignment ``compare`` tries and every strip of DROPPED_ROWS rows left out. The check leaves out
    one strip at its best alignment, so its correlation is never above this bound: a pair whose bound is under
    MIN_CORRELATION is refused by the check. Two products a pair, the rest for all pairs at once, each picture's
    own terms apart from the pair's (~11 us a pair against the check's ~100)."""
    zooms, pixels = len(ZOOMS), float((SIDE - DROPPED_ROWS) * SIDE)
    # pair x alignment x row: the sum of x * y. The check's alignments (_ZOOM_A, _ZOOM_B): the first picture at
    # zoom 1 against the second at each zoom, then the first at each other zoom against the second at zoom 1.
    cross = np.empty((len(pairs), len(_ZOOM_A), SIDE), dtype=np.float32)
    for pair, (first, second) in enumerate(pairs):  # stacking the pictures first costs more than it saves
        np.vecdot(first.grey[0], second.grey, out=cross[pair, :zooms])
        np.vecdot(first.grey[1:], second.grey[0], out=cross[pair, zooms:])
    products = _strip_sums(cross)
    # Each picture's kept rows (the first pictures', then the seconds'), zoom x strip: their sum and variance, as
    # _strip_correlations has them. Its correlation (xy - x y / pixels) / sqrt(vx vy) is xy sx sy - cx cy with
    # s = 1 / sqrt(v) and c = x s / sqrt(pixels): the same in other float64 roundings (BOUND_MARGIN covers them).
    pictures = [first for first, _ in pairs] + [second for _, second in pairs]
    sums = _strip_sums(np.stack([picture.row_sums for picture in pictures]))
    variance = _strip_sums(np.stack([picture.row_squares for picture in pictures])) - sums ** 2 / pixels
    # Rows kept with next to no variance (a plain picture but for a bar) make the correlation rounding noise: no
    # bound for a pair with such a strip in either picture (every zoom of each is in some alignment).
    lowest = variance.min(axis=(1, 2))
    scale = 1 / np.sqrt(np.maximum(variance, PLAIN_ROWS * pixels))  # plain strips clamped: their pairs have no bound
    centre = sums * scale / np.sqrt(pixels)
    first_scale, second_scale = scale[:len(pairs)], scale[len(pairs):]
    first_centre, second_centre = centre[:len(pairs)], centre[len(pairs):]
    against_zooms = (products[:, :zooms] * second_scale * first_scale[:, :1]
                     - second_centre * first_centre[:, :1]).max(axis=(1, 2))
    zooms_against = (products[:, zooms:] * first_scale[:, 1:] * second_scale[:, :1]
                     - first_centre[:, 1:] * second_centre[:, :1]).max(axis=(1, 2))
    plain = np.minimum(lowest[:len(pairs)], lowest[len(pairs):]) < PLAIN_ROWS * pixels
    return np.where(plain, np.inf, np.maximum(against_zooms, zooms_against))


def surely_refused(pairs: typing.Sequence[tuple[Picture, Picture]]) -> np.ndarray:
    """For each pair, whether ``judge`` refuses it on its correlation bound alone (``correlation_bounds``): a
    cheap first pass over many candidates. A pair with a flat picture may be judged on its colour: never."""
    refused = np.zeros(len(pairs), dtype=bool)
    shaped = [position for position, (a, b) in enumerate(pairs) if not a.flat and not b.flat]
    if shaped:
        bounds = correlation_bounds([pairs[position] for position in shaped])
        refused[shaped] = bounds < MIN_CORRELATION - BOUND_MARGIN
    return refused


def same_picture(a: Picture, b: Picture) -> bool:
    """Whether two candidates are near-duplicates: their grey pictures agree in shape, aligned, as a whole
    and in every block, and their colours agree cell by cell (flat pictures: their colour cells agree in
    levels and in colour)."""
    return judge(a, b)[0]


def judge(a: Picture, b: Picture) -> tuple[bool, float]:
    """(``same_picture``, ``similarity``) of a pair from one comparison."""
    flat, correlation, local, chroma = _measured(a, b)
    if flat:
        same = ((1.0 - correlation) * 255.0 <= MAX_FLAT_LEVELS and local <= MAX_FLAT_CELL
                and chroma <= MAX_CHROMA)
    else:
        same = correlation >= MIN_CORRELATION and local <= MAX_LOCAL and chroma <= MAX_CHROMA
    return bool(same), round(correlation, 4)


def similarity(a: Picture, b: Picture) -> float:
    """The correlation ``compare`` gives, rounded to 4 places: near_duplicates.jsonl's ``similarity``."""
    return round(compare(a, b)[0], 4)
