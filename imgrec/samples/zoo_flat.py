"""The zoo's flat styles: grey scans, icons on flat colour, gradients, textures, one-style renders and
very small images.

Images with little in them: a plain or smooth ground and at most a few simple marks, so that two
unrelated images share their coarse layout far more often than photos do. Each draw function is
``(label, index, seed, size) -> image`` (``imgrec.samples.zoo``).
"""
import math

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from imgrec.samples.zoo_draw import hue_colour, image_rng, noisy, spread

SCANS = ('one_blob', 'two_blobs', 'ring', 'cluster', 'streak')
ICONS = ('star', 'heart', 'arrow', 'plus', 'check', 'bolt')
GRADIENTS = ('linear', 'radial', 'three_stop', 'banded', 'corner')
TEXTURES = ('stripes', 'checks', 'dots', 'noise', 'waves', 'cells')
RENDERS = ('circle', 'square', 'cross', 'triangle')
TINY = ('warm', 'cool', 'grey', 'vivid')


def _blob(draw, rng, centre, rx, ry, fill):
    """An irregular blob about ``centre``: an ellipse whose radius wobbles by a few random waves, so no
    two blobs have one outline."""
    waves = [(k, rng.uniform(0, 0.12), rng.uniform(0, 2 * math.pi)) for k in range(2, 6)]
    points = []
    for step in range(48):
        angle = step * 2 * math.pi / 48
        wobble = 1 + sum(size * math.sin(k * angle + phase) for k, size, phase in waves)
        points.append((centre[0] + rx * wobble * math.cos(angle), centre[1] + ry * wobble * math.sin(angle)))
    draw.polygon(points, fill=fill)


def draw_scan(label: str, index: int, seed: int, size: int) -> Image.Image:
    """Grey blobs on black, as in a medical or microscope scan: grey, ``size`` square. Blobs of uneven
    outline and mottled inside, faint specks about them, blurred and noisy."""
    rng = image_rng('scans', seed, label, index)
    x, y, scale, bright, turn = spread('scans', seed, label, index, 5)
    big = 2 * size
    image = Image.new('L', (big, big), 0)
    draw = ImageDraw.Draw(image)
    for _ in range(rng.randint(6, 20)):  # debris: a pattern of its own in every scan
        speck = (rng.uniform(0, big), rng.uniform(0, big))
        small = big * rng.uniform(0.008, 0.025)
        draw.ellipse(_box(speck, small, small), fill=rng.randint(50, 140))
    centre = (big * (0.2 + 0.6 * x), big * (0.2 + 0.6 * y))
    radius = big * (0.08 + 0.17 * scale)
    level = round(90 + 150 * bright)
    if label == 'one_blob':
        _blob(draw, rng, centre, radius, radius * rng.uniform(0.6, 1.0), level)
    elif label == 'two_blobs':
        _blob(draw, rng, centre, radius, radius * rng.uniform(0.6, 1.0), level)
        angle = turn * 2 * math.pi
        other = (centre[0] + math.cos(angle) * radius * 2.2, centre[1] + math.sin(angle) * radius * 2.2)
        _blob(draw, rng, other, radius * rng.uniform(0.4, 0.8), radius * rng.uniform(0.4, 0.8), level // 2 + 60)
    elif label == 'ring':
        draw.ellipse(_box(centre, radius * 1.3, radius * 1.3), outline=level, width=max(2, round(radius * rng.uniform(0.15, 0.4))))
        _blob(draw, rng, centre, radius * rng.uniform(0.2, 0.5), radius * rng.uniform(0.2, 0.5), level // 2)
    elif label == 'cluster':
        for _ in range(rng.randint(4, 9)):
            spot = (centre[0] + rng.gauss(0, radius), centre[1] + rng.gauss(0, radius))
            small = radius * rng.uniform(0.15, 0.4)
            _blob(draw, rng, spot, small, small * rng.uniform(0.6, 1), rng.randint(level // 2, level))
    elif label == 'streak':
        angle = turn * math.pi
        dx, dy = math.cos(angle) * radius * 2.5, math.sin(angle) * radius * 2.5
        bend = (rng.uniform(-0.5, 0.5) * radius, rng.uniform(-0.5, 0.5) * radius)
        draw.line((centre[0] - dx, centre[1] - dy, centre[0] + bend[0], centre[1] + bend[1], centre[0] + dx,
                   centre[1] + dy), fill=level, width=max(2, round(radius * rng.uniform(0.2, 0.5))), joint='curve')
    else:
        raise ValueError(f'unknown scan kind {label!r}')
    coarse = np.random.default_rng(rng.getrandbits(64)).uniform(0.45, 1.0, (8, 8)).astype(np.float32)
    mottle = np.asarray(Image.fromarray(coarse, 'F').resize((big, big), Image.Resampling.BICUBIC))
    image = Image.fromarray(np.clip(np.asarray(image) * mottle + rng.randint(0, 25), 0, 255).astype(np.uint8), 'L')
    image = image.filter(ImageFilter.GaussianBlur(big * rng.uniform(0.01, 0.03)))
    return noisy(image.resize((size, size), Image.Resampling.LANCZOS), rng, 6)


def _box(centre, rx, ry):
    return centre[0] - rx, centre[1] - ry, centre[0] + rx, centre[1] + ry


def draw_icon(draw, label, centre, radius, colour, turn):
    """One icon of kind ``label`` about ``centre``, ``radius`` in size, turned by ``turn`` (radians)."""
    cx, cy = centre

    def polygon(points):
        cos, sin = math.cos(turn), math.sin(turn)
        draw.polygon([(cx + (px * cos - py * sin) * radius, cy + (px * sin + py * cos) * radius) for px, py in points],
                     fill=colour)
    if label == 'star':
        polygon([(math.cos(a) * r, math.sin(a) * r) for k in range(10)
                 for a, r in [(k * math.pi / 5 - math.pi / 2, 1 if k % 2 == 0 else 0.42)]])
    elif label == 'heart':
        polygon([(16 * math.sin(t) ** 3 / 17, -(13 * math.cos(t) - 5 * math.cos(2 * t) - 2 * math.cos(3 * t)
                                                - math.cos(4 * t)) / 17) for t in np.linspace(0, 2 * math.pi, 40)])
    elif label == 'arrow':
        polygon([(-1, -0.3), (0.2, -0.3), (0.2, -0.8), (1, 0), (0.2, 0.8), (0.2, 0.3), (-1, 0.3)])
    elif label == 'plus':
        polygon([(-0.3, -1), (0.3, -1), (0.3, -0.3), (1, -0.3), (1, 0.3), (0.3, 0.3), (0.3, 1), (-0.3, 1),
                 (-0.3, 0.3), (-1, 0.3), (-1, -0.3), (-0.3, -0.3)])
    elif label == 'check':
        polygon([(-1, 0), (-0.6, -0.35), (-0.25, 0.05), (0.7, -0.9), (1, -0.5), (-0.25, 0.75)])
    elif label == 'bolt':
        polygon([(0.2, -1), (-0.6, 0.15), (-0.05, 0.15), (-0.25, 1), (0.6, -0.2), (0.05, -0.2)])
    else:
        raise ValueError(f'unknown icon kind {label!r}')


def draw_icons(label: str, index: int, seed: int, size: int) -> Image.Image:
    """One or two small icons of kind ``label`` on a flat colour, RGB, ``size`` square."""
    rng = image_rng('icons', seed, label, index)
    hue, x, y, scale, turn, shade = spread('icons', seed, label, index, 6)
    big = 2 * size
    ground = hue_colour(hue, rng.uniform(0.3, 0.9), 0.4 + 0.5 * shade)
    image = Image.new('RGB', (big, big), ground)
    draw = ImageDraw.Draw(image)
    ink = hue_colour(hue + rng.uniform(0.3, 0.7), rng.uniform(0.0, 0.8), 1.0 - 0.6 * shade)
    radius = big * (0.1 + 0.15 * scale)
    count = 1 + index % 2
    for n in range(count):
        centre = (radius + (big - 2 * radius) * ((x + n * 0.5) % 1), radius + (big - 2 * radius) * ((y + n * 0.37) % 1))
        draw_icon(draw, label, centre, radius * (1 if n == 0 else rng.uniform(0.5, 0.9)), ink, (turn - 0.5) * math.pi / 2)
    return image.resize((size, size), Image.Resampling.LANCZOS)


_GRADIENT_NAMES = ('hue', 'other', 'angle', 'x', 'y', 'value', 'strong', 'light')
# The parameters each kind's look depends on: only these are spread apart (one a kind does not use
# would let two images differ in it alone, i.e. not at all).
_GRADIENT_PARAMETERS = {
    'linear': ('hue', 'other', 'angle', 'value', 'strong', 'light'),
    'three_stop': ('hue', 'other', 'angle', 'value', 'strong', 'light'),
    'banded': ('hue', 'other', 'angle', 'value', 'strong', 'light'),
    'radial': ('hue', 'other', 'x', 'y', 'value', 'strong', 'light'),
    'corner': ('hue', 'other', 'angle', 'x', 'y', 'value', 'strong', 'light'),
}


def draw_gradient(label: str, index: int, seed: int, size: int) -> Image.Image:
    """A smooth gradient of kind ``label`` between colours of its own, RGB, ``size`` square."""
    rng = image_rng('gradients', seed, label, index)
    names = _GRADIENT_PARAMETERS[label] if label in _GRADIENT_PARAMETERS else ()
    drawn = dict(zip(names, spread('gradients', seed, label, index, len(names))))
    hue, other, angle, x, y, value, strong, light = (drawn.get(name, 0.5) for name in _GRADIENT_NAMES)
    rows, columns = np.mgrid[0:size, 0:size] / max(1, size - 1)
    theta = angle * 2 * math.pi
    if label in ('linear', 'three_stop', 'banded'):
        t = (columns - 0.5) * math.cos(theta) + (rows - 0.5) * math.sin(theta) + 0.5
    elif label == 'radial':
        t = np.hypot(columns - x, rows - y) * (0.8 + value)
    elif label == 'corner':
        corner = int(angle * 4)  # which corner the first colour grows from
        across = columns if corner % 2 else 1 - columns
        down = rows if corner // 2 else 1 - rows
        t = across ** (0.5 + x) * down ** (0.5 + y) * (1 + value)
    else:
        raise ValueError(f'unknown gradient kind {label!r}')
    t = np.clip(t, 0, 1)
    if label == 'banded':
        bands = 3 + round(3 * value)  # few: stepped, not smooth
        t = np.floor(t * bands) / bands
    # Saturated and not dark: where colours are dull or dark, a change of hue hardly shows.
    a = np.array(hue_colour(hue, 0.5 + 0.5 * strong, 0.45 + 0.55 * light), dtype=np.float64)
    b = np.array(hue_colour(hue + 0.2 + 0.6 * other, 1.0 - 0.5 * strong * value, 1.0 - 0.55 * light * value),
                 dtype=np.float64)
    if label == 'three_stop':
        c = np.array(hue_colour(hue + 0.5 * other, rng.uniform(0.2, 1), rng.uniform(0.5, 1)), dtype=np.float64)
        t2 = t[..., None]
        pixels = np.where(t2 < 0.5, a + (c - a) * t2 * 2, c + (b - c) * (t2 - 0.5) * 2)
    else:
        pixels = a + (b - a) * t[..., None]
    return Image.fromarray(pixels.round().astype(np.uint8), 'RGB')


def draw_texture(label: str, index: int, seed: int, size: int) -> Image.Image:
    """A texture of kind ``label`` filling the image: a pattern of its own period, angle and colours,
    RGB, ``size`` square."""
    rng = image_rng('textures', seed, label, index)
    hue, period, angle, contrast = spread('textures', seed, label, index, 4)
    rows, columns = np.mgrid[0:size, 0:size].astype(np.float64)
    theta = angle * math.pi
    u = columns * math.cos(theta) + rows * math.sin(theta)
    v = -columns * math.sin(theta) + rows * math.cos(theta)
    wave = size * (0.06 + 0.25 * period)
    noise = np.random.default_rng(rng.getrandbits(64))
    if label == 'stripes':
        t = np.sin(u * 2 * math.pi / wave) > 0
    elif label == 'checks':
        t = (np.floor(u / wave) + np.floor(v / wave)) % 2
    elif label == 'dots':
        t = np.hypot((u % wave) - wave / 2, (v % wave) - wave / 2) < wave * rng.uniform(0.2, 0.4)
    elif label == 'noise':
        coarse = noise.random((max(2, round(size / wave * 2)),) * 2).astype(np.float32)
        t = np.asarray(Image.fromarray(coarse, 'F').resize((size, size), Image.Resampling.BICUBIC))
    elif label == 'waves':
        t = np.sin(u * 2 * math.pi / wave + rng.uniform(1, 3) * np.sin(v * 2 * math.pi / (wave * 3))) / 2 + 0.5
    elif label == 'cells':
        points = noise.random((rng.randint(5, 25), 2)) * size
        nearest = np.min(np.hypot(columns[..., None] - points[:, 0], rows[..., None] - points[:, 1]), axis=-1)
        t = np.clip(nearest / (size / math.sqrt(len(points))), 0, 1)
    else:
        raise ValueError(f'unknown texture kind {label!r}')
    a = np.array(hue_colour(hue, rng.uniform(0.3, 1), rng.uniform(0.5, 1)), dtype=np.float64)
    b = a * (0.7 - 0.6 * contrast) + np.array(hue_colour(hue + rng.uniform(0.2, 0.8), 1, 0.5)) * 0.3
    pixels = a + (b - a) * np.asarray(t, dtype=np.float64)[..., None]
    return noisy(Image.fromarray(np.clip(pixels, 0, 255).round().astype(np.uint8), 'RGB'), rng, 4)


def draw_render(label: str, index: int, seed: int, size: int) -> Image.Image:
    """One shape of kind ``label`` on a plain colour, every image in the same flat style, RGB, ``size``
    square: only the colours, size, place and turn differ."""
    rng = image_rng('renders', seed, label, index)
    hue, other, x, y, scale, turn = spread('renders', seed, label, index, 6)
    big = 2 * size
    image = Image.new('RGB', (big, big), hue_colour(hue, rng.uniform(0.3, 0.9), rng.uniform(0.5, 1)))
    draw = ImageDraw.Draw(image)
    radius = big * (0.12 + 0.22 * scale)
    cx, cy = radius + (big - 2 * radius) * x, radius + (big - 2 * radius) * y
    colour = hue_colour(hue + 0.25 + 0.5 * other, rng.uniform(0.5, 1), rng.uniform(0.3, 1))
    if label == 'circle':
        draw.ellipse(_box((cx, cy), radius, radius), fill=colour)
    elif label == 'square':
        draw.regular_polygon((cx, cy, radius), 4, rotation=turn * 90, fill=colour)
    elif label == 'triangle':
        draw.regular_polygon((cx, cy, radius), 3, rotation=turn * 120, fill=colour)
    elif label == 'cross':
        draw_icon(draw, 'plus', (cx, cy), radius, colour, turn * math.pi / 2)
    else:
        raise ValueError(f'unknown render kind {label!r}')
    return image.resize((size, size), Image.Resampling.LANCZOS)


_TINY_HUES = {'warm': (0.95, 0.15), 'cool': (0.45, 0.7), 'grey': (0, 1), 'vivid': (0, 1)}


def draw_tiny(label: str, index: int, seed: int, size: int) -> Image.Image:
    """A very small picture (``size`` at most 24 pixels on a side, some narrower): a random colour field
    of a few cells, colours of the class's range, with one bright spot."""
    rng = image_rng('tiny', seed, label, index)
    width = size if index % 3 else max(4, round(size * rng.uniform(0.6, 0.9)))
    low, span = _TINY_HUES[label]
    cells = [[rng.random() for _ in range(3)] for _ in range(9)]
    saturation = {'grey': (0, 0), 'vivid': (0.7, 0.3)}.get(label, (0.3, 0.4))
    grid = np.array([hue_colour(low + span * h, saturation[0] + saturation[1] * s, 0.15 + 0.85 * v)
                     for h, s, v in cells], dtype=np.uint8).reshape(3, 3, 3)
    image = Image.fromarray(grid, 'RGB').resize((width, size), Image.Resampling.BILINEAR)
    x, y = rng.randrange(width), rng.randrange(size)
    ImageDraw.Draw(image).point((x, y), fill=(255, 255, 255) if rng.random() < 0.5 else (0, 0, 0))
    return image
