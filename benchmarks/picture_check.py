"""The cost per candidate of the pixel check (``imgrec.imaging.picture_check``) and of the alternatives
measured before choosing it, on zoo images (``imgrec.samples.zoo``) written as a build writes them.

    python -m benchmarks.picture_check [--styles digits,photos] [--pairs 2000] [--size 64]

For each alternative: the CPU microseconds a candidate pair costs (the two pictures already decoded: an
image is decoded once however many candidates it is in), and, apart, the cost of decoding one written
JPEG small (Pillow's ``draft``), which every image with a candidate pays once. Alternatives, each over
the same 13 alignments (7 zooms either way) and the same caption strip left out where it applies:
- ``ncc`` (chosen): normalised correlation of the grey 32x32 pictures, numpy, vectorised over the
  alignments, plus the colour terms (``picture_check.compare``);
- ``ssim-skimage``: scikit-image's ``structural_similarity`` on the same grey pictures, one call an
  alignment (it is not invariant to a contrast change: measured for its cost);
- ``ssim-numpy``: SSIM with a 7x7 box window in numpy, vectorised over the alignments.
"""
import argparse
import io
import os
import random
import sys
import time

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from imgrec.imaging import picture_check as pc  # noqa: E402
from imgrec.samples import zoo  # noqa: E402


def _written(image, size):
    """The JPEG a build writes of ``image`` at ``size`` (centre crop, quality 90)."""
    image = image.convert('RGB')
    side = min(image.size)
    left, top = (image.width - side) // 2, (image.height - side) // 2
    image = image.crop((left, top, left + side, top + side)).resize((size, size), Image.Resampling.BICUBIC)
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=90)
    return out.getvalue()


def _ssim_numpy(x, y, window=7):
    """Mean SSIM of each alignment of x and y (n x side x side), box window, levels 0-255."""
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def box(values):
        summed = values.cumsum(axis=1).cumsum(axis=2)
        summed = np.pad(summed, ((0, 0), (1, 0), (1, 0)))
        w = window
        return (summed[:, w:, w:] - summed[:, :-w, w:] - summed[:, w:, :-w] + summed[:, :-w, :-w]) / (w * w)

    mx, my = box(x), box(y)
    vx, vy, cxy = box(x * x) - mx * mx, box(y * y) - my * my, box(x * y) - mx * my
    ssim = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return ssim.mean(axis=(1, 2))


def _ssim_skimage(x, y):
    from skimage.metrics import structural_similarity  # pylint: disable=import-outside-toplevel
    return np.array([structural_similarity(a, b, data_range=255.0) for a, b in zip(x, y)])


def measure(styles, pairs, size, seed=0):
    rng = random.Random(seed)
    jpegs = []
    for style in styles:
        spec = zoo.STYLES[style]
        for index in range(40):
            label = spec.classes[index % len(spec.classes)]
            jpegs.append(_written(spec.draw(label, index, seed, spec.size), size))
    clock = time.process_time()
    pictures = [pc.from_jpeg(data) for data in jpegs]
    decode_us = (time.process_time() - clock) / len(jpegs) * 1e6
    chosen = [(rng.randrange(len(pictures)), rng.randrange(len(pictures))) for _ in range(pairs)]
    results = {'decode one written JPEG small (from_jpeg)': decode_us}
    clock = time.process_time()
    for i, j in chosen:
        pc.same_picture(pictures[i], pictures[j])
    results['ncc (chosen): picture_check.same_picture'] = (time.process_time() - clock) / pairs * 1e6
    for name, function in (('ssim-numpy, 7x7 box', _ssim_numpy), ('ssim-skimage structural_similarity', _ssim_skimage)):
        subset = chosen[:max(1, pairs // (10 if 'skimage' in name else 1))]
        clock = time.process_time()
        for i, j in subset:
            x, y = pc._alignments(pictures[i], pictures[j])  # pylint: disable=protected-access
            function(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)).max()
        results[name] = (time.process_time() - clock) / len(subset) * 1e6
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--styles', default='digits,objects,photos')
    parser.add_argument('--pairs', type=int, default=2000)
    parser.add_argument('--size', type=int, default=64, help='pixels a side the images are written at')
    args = parser.parse_args(argv)
    results = measure(args.styles.split(','), args.pairs, args.size)
    alignments = 2 * len(pc.ZOOMS) - 1
    print(f'CPU microseconds, {alignments} alignments of {pc.SIDE}x{pc.SIDE} grey pictures '
          f'({args.size}-pixel written images, styles {args.styles}):')
    for name, micros in results.items():
        print(f'  {name:45s} {micros:8.0f} us')


if __name__ == '__main__':
    main()
