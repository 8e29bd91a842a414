"""Writes a photo-like labelled corpus with planted near-duplicates: ``<output>/<class>/<name>.<ext>``.

    python -m imgrec.samples.near_duplicates --output DIR [--per_class 120] [--twins 60]

Every original is drawn from its own random seed: a smooth random colour field (a few control points
upsampled), a light source, several shapes of random kind, colour and place, fine texture and noise, at
a random size and aspect ratio. Unrelated images are therefore far apart, as photos are. ``twins``
originals also get a near-duplicate in the same class, made by one of ``TRANSFORMS`` (in turn):
- ``jpeg``: re-compressed at quality 25-45;
- ``scale``: scaled to 45-70% of its size;
- ``crop``: 2-5% cut from each border;
- ``brightness``: brightened or darkened by 8-12%;
- ``caption``: a caption bar of text across the bottom (the image's size unchanged);
- ``png``: re-saved as PNG.
(``make_twin`` also knows ``contrast`` and ``watermark``, and takes other strengths: ``imgrec.samples.zoo``'s.)
Twins get names of their own, unrelated to their original's, so nothing but their pixels ties them.
``write_corpus`` returns the planted pairs; ``--output`` also gets them in ``<output>.pairs.json``.
"""
import argparse
import json
import os
import random

import numpy as np
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter

from imgrec.samples import parallel

CLASSES = ('beach', 'city', 'forest', 'harbour', 'mountain')
TRANSFORMS = ('jpeg', 'scale', 'crop', 'brightness', 'caption', 'png')
_SHAPES = ('ellipse', 'rectangle', 'polygon', 'line')


def _colour(rng, low=0, high=255):
    return tuple(rng.randint(low, high) for _ in range(3))


def draw_photo(width, height, rng):
    """An RGB image that looks like a photo to a hash: smooth random light, shapes, texture and noise."""
    columns, rows = rng.randint(3, 6), rng.randint(3, 6)
    grid = np.array([[_colour(rng) for _ in range(columns)] for _ in range(rows)], dtype=np.uint8)
    image = Image.fromarray(grid, 'RGB').resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(image)
    side = min(width, height)
    for _ in range(rng.randint(4, 9)):
        kind = rng.choice(_SHAPES)
        radius = rng.uniform(0.06, 0.3) * side
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        box = (cx - radius, cy - radius * rng.uniform(0.5, 1.5), cx + radius, cy + radius * rng.uniform(0.5, 1.5))
        colour = _colour(rng)
        if kind == 'ellipse':
            draw.ellipse(box, fill=colour)
        elif kind == 'rectangle':
            draw.rectangle(box, fill=colour)
        elif kind == 'polygon':
            draw.polygon([(cx + radius * rng.uniform(-1, 1), cy + radius * rng.uniform(-1, 1)) for _ in range(5)],
                         fill=colour)
        else:
            draw.line([(rng.uniform(0, width), rng.uniform(0, height)) for _ in range(3)], fill=colour,
                      width=max(1, round(side * rng.uniform(0.01, 0.05))))
    image = image.filter(ImageFilter.GaussianBlur(side * rng.uniform(0.004, 0.012)))
    # Texture: a random-phase stripe pattern, then sensor-like noise.
    y, x = np.mgrid[0:height, 0:width]
    angle, period = rng.uniform(0, np.pi), rng.uniform(3, 12)
    stripes = np.sin((x * np.cos(angle) + y * np.sin(angle)) * 2 * np.pi / period) * rng.uniform(4, 12)
    noise = np.random.default_rng(rng.getrandbits(32)).normal(0, rng.uniform(3, 9), (height, width, 3))
    pixels = np.asarray(image, dtype=np.float64) + stripes[..., None] + noise
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), 'RGB')


# How strong each transform is: (low, high) drawn uniformly; ``min_side`` and ``min_bar`` (pixels) floor a
# scaled image's sides and a caption bar's height. This corpus's own; ``imgrec.samples.zoo`` passes the
# strengths issue 39 names (``zoo_edits.ZOO_RANGES``).
TWIN_RANGES = {'jpeg': (25, 45), 'scale': (0.45, 0.70), 'crop': (0.02, 0.05), 'brightness': (0.08, 0.12),
               'contrast': (0.08, 0.12), 'caption': (0.08, 0.12), 'min_side': 8, 'min_bar': 6}


def make_twin(image, kind, rng, ranges=None):
    """(twin image, file extension, JPEG quality to save it at) of ``image`` by transform ``kind``.

    ``kind``: one of ``TRANSFORMS``, or ``contrast`` (contrast raised or lowered) or ``watermark`` (a
    translucent bar of text across the image). ``ranges``: the strengths, ``TWIN_RANGES`` by default."""
    ranges = TWIN_RANGES if ranges is None else ranges
    width, height = image.size
    if kind == 'jpeg':
        return image, 'jpg', rng.randint(*ranges['jpeg'])
    if kind == 'scale':
        factor = rng.uniform(*ranges['scale'])
        least = ranges['min_side']
        return image.resize((max(least, round(width * factor)), max(least, round(height * factor))),
                            Image.Resampling.LANCZOS), 'jpg', 90
    if kind == 'crop':
        cut = rng.uniform(*ranges['crop'])
        dx, dy = max(1, round(width * cut)), max(1, round(height * cut))
        return image.crop((dx, dy, width - dx, height - dy)), 'jpg', 90
    if kind in ('brightness', 'contrast'):
        factor = 1 + rng.choice((-1, 1)) * rng.uniform(*ranges[kind])
        enhancer = ImageEnhance.Brightness if kind == 'brightness' else ImageEnhance.Contrast
        return enhancer(image).enhance(factor), 'jpg', 90
    if kind == 'caption':
        twin = image.copy()
        draw = ImageDraw.Draw(twin)
        bar = max(ranges['min_bar'], round(height * rng.uniform(*ranges['caption'])))
        draw.rectangle((0, height - bar, width, height), fill=_colour(rng, 0, 60))
        draw.text((max(2, width // 30), height - bar + max(1, (bar - 10) // 2)), _words(rng), fill=_colour(rng, 200, 255))
        return twin, 'jpg', 90
    if kind == 'watermark':
        overlay = Image.new('RGBA', image.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(overlay)
        bar = max(ranges['min_bar'], round(height * rng.uniform(*ranges['caption'])))
        top = round(rng.uniform(0.1, 0.9) * (height - bar))
        # Dark on a light image, light on a dark one: a watermark that shows.
        shade = 0 if np.asarray(image.convert('L').crop((0, top, width, top + bar))).mean() > 128 else 255
        draw.rectangle((0, top, width, top + bar), fill=(shade, shade, shade, rng.randint(70, 120)))
        words, ink = _words(rng), (255 - shade, 255 - shade, 255 - shade, rng.randint(120, 180))
        if bar >= 10:  # a bar too thin for the font gets no text: text would cover a small image
            draw.text((max(2, width // 30), top + max(1, (bar - 10) // 2)), words, fill=ink)
        return Image.alpha_composite(image.convert('RGBA'), overlay).convert('RGB'), 'jpg', 90
    if kind == 'png':
        return image, 'png', None
    raise ValueError(f'unknown twin transform {kind!r}')


def _words(rng):
    return ' '.join(rng.choice(('summer', 'view', 'from', 'the', 'hill', 'my', 'trip', '2019', 'photo'))
                    for _ in range(rng.randint(2, 5)))


def _photo(image_seed, min_side, max_side, aspect):
    """The original drawn from ``image_seed``: its size and everything in it."""
    rng = random.Random(image_seed)
    long_side = rng.randint(min_side, max_side)
    ratio = rng.uniform(*aspect)
    width, height = (long_side, round(long_side / ratio)) if ratio >= 1 else (round(long_side * ratio), long_side)
    return draw_photo(width, height, rng)


def _write(job):
    """Draws and saves one original and, if it has one, its twin."""
    output, source, image_seed, sizes, twin = job
    image = _photo(image_seed, *sizes)
    image.save(os.path.join(output, source), quality=92)
    if twin:
        kind, twin_seed, twin_source = twin
        picture, _, quality = make_twin(image, kind, random.Random(twin_seed))
        path = os.path.join(output, twin_source)
        picture.save(path, quality=quality) if quality else picture.save(path)


def write_corpus(output, per_class, twins, *, seed=0, classes=CLASSES, min_side=160, max_side=320,
                 aspect=(0.6, 1.7), processes=1):
    """Writes ``per_class`` originals a class and ``twins`` planted near-duplicates (spread over the
    classes); returns the pairs as [{'original', 'twin', 'transform', 'label'}], sources relative to
    ``output``, in planting order. Every choice is drawn first, from ``seed``; then the images are drawn
    on ``processes`` processes, with the same result however many."""
    rng = random.Random(seed)
    names = list(range(len(classes) * (per_class + twins)))
    rng.shuffle(names)  # file numbers drawn at random: a twin's name says nothing about its original
    originals = []
    for label in classes:
        os.makedirs(os.path.join(output, label), exist_ok=True)
        originals += [(f'{label}/img_{names.pop():06d}.jpg', label, rng.getrandbits(64)) for _ in range(per_class)]
    twin_of, pairs = {}, []
    for n, index in enumerate(rng.sample(range(len(originals)), twins)):
        source, label, _ = originals[index]
        kind = TRANSFORMS[n % len(TRANSFORMS)]
        twin_source = f"{label}/img_{names.pop():06d}.{'png' if kind == 'png' else 'jpg'}"
        twin_of[source] = (kind, rng.getrandbits(64), twin_source)
        pairs.append({'original': source, 'twin': twin_source, 'transform': kind, 'label': label})
    jobs = [(output, source, image_seed, (min_side, max_side, aspect), twin_of.get(source))
            for source, _, image_seed in originals]
    parallel.run(_write, jobs, processes)
    return pairs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output', required=True, help='folder to write <class>/<image> files into')
    parser.add_argument('--per_class', type=int, default=120, help='originals a class')
    parser.add_argument('--twins', type=int, default=60, help='planted near-duplicates, over all classes')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--min_side', type=int, default=160, help='shortest long side of an original, pixels')
    parser.add_argument('--max_side', type=int, default=320, help='longest long side of an original, pixels')
    args = parser.parse_args(argv)
    pairs = write_corpus(args.output, args.per_class, args.twins, seed=args.seed, min_side=args.min_side,
                         max_side=args.max_side, processes=os.cpu_count() or 1)
    with open(args.output.rstrip('/') + '.pairs.json', 'w', encoding='utf-8') as out:
        json.dump(pairs, out, indent=1)
    print(f'wrote {args.per_class * len(CLASSES) + len(pairs)} images ({len(pairs)} planted near-duplicates) '
          f'under {args.output}; the pairs are in {args.output.rstrip("/")}.pairs.json')


if __name__ == '__main__':
    main()
