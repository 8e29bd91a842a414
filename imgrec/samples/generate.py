"""Writes a labelled folder of synthetic photos: ``<output>/<class>/<name>.<ext>``.

Nothing can be downloaded here, so the demo, the tests and the benchmarks draw their own images:
coloured shapes on textured backgrounds, one shape per class, at varied sizes and aspect ratios, so a
small CNN can learn them in a few epochs while the images still look like real JPEGs to the decoder.
"""
import argparse
import multiprocessing
import os
import random

from PIL import Image, ImageDraw, ImageFilter

CLASSES = ('circle', 'square', 'triangle', 'cross')


def draw_image(kind, width, height, rng, noise=None):
    """Returns an RGB image of one ``kind`` of shape on a noisy gradient background. ``noise``: a grey
    image of the same size to blend in; by default Pillow's ``effect_noise``, whose C generator no seed
    reaches (``imgrec.samples.one_style`` passes seeded noise instead)."""
    top = tuple(rng.randrange(256) for _ in range(3))
    bottom = tuple(rng.randrange(256) for _ in range(3))
    background = Image.linear_gradient('L').resize((width, height))
    image = Image.composite(Image.new('RGB', (width, height), bottom),
                            Image.new('RGB', (width, height), top), background)
    if noise is None:
        noise = Image.effect_noise((width, height), 40)
    image = Image.blend(image, noise.convert('RGB'), 0.25)
    draw = ImageDraw.Draw(image)
    side = min(width, height)
    radius = rng.uniform(0.22, 0.38) * side
    cx = rng.uniform(radius, width - radius)
    cy = rng.uniform(radius, height - radius)
    colour = tuple(255 - c for c in top)
    box = (cx - radius, cy - radius, cx + radius, cy + radius)
    if kind == 'circle':
        draw.ellipse(box, fill=colour)
    elif kind == 'square':
        draw.rectangle(box, fill=colour)
    elif kind == 'triangle':
        draw.polygon([(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)], fill=colour)
    elif kind == 'cross':
        bar = radius / 3
        draw.rectangle((cx - radius, cy - bar, cx + radius, cy + bar), fill=colour)
        draw.rectangle((cx - bar, cy - radius, cx + bar, cy + radius), fill=colour)
    else:
        raise ValueError(f'unknown shape {kind!r}')
    return image.filter(ImageFilter.GaussianBlur(0.6))


def write_images(output, per_class, *, seed=0, classes=CLASSES, min_side=96, max_side=320,
                 png_every=10, aspect=(0.6, 1.7)):
    """Writes ``per_class`` images per class and returns their paths, sorted.

    Sizes are drawn from [min_side, max_side] on the long side with an aspect ratio in ``aspect``;
    every ``png_every``-th image is a PNG (0: JPEG only).
    """
    rng = random.Random(seed)
    paths = []
    for kind in classes:
        os.makedirs(os.path.join(output, kind), exist_ok=True)
        for i in range(per_class):
            long_side = rng.randint(min_side, max_side)
            ratio = rng.uniform(*aspect)
            width, height = (long_side, round(long_side / ratio)) if ratio >= 1 else (round(long_side * ratio), long_side)
            image = draw_image(kind, max(width, 8), max(height, 8), rng)
            png = png_every and i % png_every == png_every - 1
            path = os.path.join(output, kind, f'{kind}_{i:05d}.{"png" if png else "jpg"}')
            image.save(path, quality=92) if not png else image.save(path)
            paths.append(path)
    return sorted(paths)


def _write_photo(job):
    path, kind, width, height, seed = job
    draw_image(kind, width, height, random.Random(seed)).save(path, quality=90)


def photo_corpus(cache_dir, count, seed=0):
    """``count`` photo-sized JPEGs (640x480 to 1600x1200) in class folders under ``cache_dir``.

    The benchmarks' corpus: generated once on every core, reused while the folder exists.
    """
    root = os.path.join(cache_dir, f'photos-{count}-{seed}')
    if os.path.isdir(root):
        return root
    rng, jobs = random.Random(seed), []
    for i in range(count):
        kind = CLASSES[i % len(CLASSES)]
        width = rng.randint(640, 1600)
        height = max(480, min(1200, round(width * rng.choice((0.75, 0.5625, 1.333)))))
        os.makedirs(os.path.join(root + '.partial', kind), exist_ok=True)
        jobs.append((os.path.join(root + '.partial', kind, f'{i:06d}.jpg'), kind, width, height, seed + i))
    with multiprocessing.Pool() as pool:
        pool.map(_write_photo, jobs, chunksize=16)
    os.rename(root + '.partial', root)
    return root


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output', required=True, help='folder to write <class>/<image> files into')
    parser.add_argument('--per_class', type=int, default=100)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--min_side', type=int, default=96)
    parser.add_argument('--max_side', type=int, default=320)
    args = parser.parse_args(argv)
    paths = write_images(args.output, args.per_class, seed=args.seed, min_side=args.min_side,
                         max_side=args.max_side)
    print(f'wrote {len(paths)} images in {len(CLASSES)} classes under {args.output}')


if __name__ == '__main__':
    main()
