"""Writes corpora of distinct images with no near-duplicates: ``<output>/<class>/<name>.jpg``.

    python -m imgrec.samples.one_style --output DIR [--count 2000] [--mixed] [--seed 0]

One style (the default): renders like the demo's (``imgrec.samples.generate.draw_image``): one shape (the
class: circle, square, triangle or cross) of random size and place on a noisy gradient of two random
colours, photo-sized (640x480 to 1600x1200 by default). No two are alike to the eye, but they share a
layout (a big blob on a smooth gradient), so their grey hashes meet far more often than photos' do:
the corpus a near-duplicate check must not group. ``--mixed``: the same count spread over three styles
in turn, those renders, photo-like pictures (``imgrec.samples.near_duplicates.draw_photo``) and the same
pictures in grey (where colour tells nothing), with the style as the class.

Every choice is drawn from ``--seed`` first, then each image from its own seed (its noise included),
so a corpus is the same however many processes draw it.
"""
import argparse
import os
import random

import numpy as np
from PIL import Image

from imgrec.samples import generate, near_duplicates, parallel

STYLES = ('render', 'photo', 'grey')
_ASPECTS = (0.75, 0.5625, 1.333)  # height / width, as samples.generate.photo_corpus draws them


def draw_render(kind, width, height, rng):
    """The demo's drawing of one ``kind`` of shape, with noise drawn from ``rng`` (Pillow's is unseeded)."""
    noise = np.random.default_rng(rng.getrandbits(64)).normal(128, 40, (height, width))
    return generate.draw_image(kind, width, height, rng, Image.fromarray(np.clip(noise, 0, 255).astype(np.uint8), 'L'))


def draw(style, kind, width, height, seed):
    """The image of ``style`` drawn from ``seed``."""
    rng = random.Random(seed)
    if style == 'render':
        return draw_render(kind, width, height, rng)
    photo = near_duplicates.draw_photo(width, height, rng)
    return photo.convert('L').convert('RGB') if style == 'grey' else photo


def _write(job):
    path, style, kind, width, height, seed = job
    draw(style, kind, width, height, seed).save(path, quality=90)


def write_corpus(output, count, *, seed=0, mixed=False, min_side=640, max_side=1600, processes=1):
    """Writes ``count`` distinct images under ``output``; returns their paths relative to it, in drawing
    order. Widths are drawn from [min_side, max_side] and heights from the photo aspects, within the
    same bounds scaled by 0.75 (480 to 1200 by default)."""
    rng = random.Random(seed)
    jobs, names = [], []
    for i in range(count):
        style = STYLES[i % len(STYLES)] if mixed else 'render'
        kind = generate.CLASSES[rng.randrange(len(generate.CLASSES))]
        width = rng.randint(min_side, max_side)
        height = max(round(min_side * 0.75), min(round(max_side * 0.75), round(width * rng.choice(_ASPECTS))))
        label = style if mixed else kind
        name = os.path.join(label, f'{i:06d}.jpg')
        os.makedirs(os.path.join(output, label), exist_ok=True)
        jobs.append((os.path.join(output, name), style, kind, width, height, rng.getrandbits(64)))
        names.append(name)
    parallel.run(_write, jobs, processes)
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output', required=True, help='folder to write <class>/<image> files into')
    parser.add_argument('--count', type=int, default=2000)
    parser.add_argument('--mixed', action='store_true', help='three styles in turn instead of one')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--min_side', type=int, default=640, help='narrowest width, pixels')
    parser.add_argument('--max_side', type=int, default=1600, help='widest width, pixels')
    args = parser.parse_args(argv)
    names = write_corpus(args.output, args.count, seed=args.seed, mixed=args.mixed, min_side=args.min_side,
                         max_side=args.max_side, processes=os.cpu_count() or 1)
    print(f"wrote {len(names)} distinct {'mixed' if args.mixed else 'one-style'} images under {args.output}")


if __name__ == '__main__':
    main()
