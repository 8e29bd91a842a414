"""A zoo of image styles with planted copies, for choosing and checking the near-duplicate check.

    python -m imgrec.samples.zoo --list
    python -m imgrec.samples.zoo --style digits --output DIR [--per_class 100] [--planted 16] [--combined 8]

Issue 39: a check tuned on photos took distinct low-detail images (a 0 and a 6, two pages, two products
on white) for copies. Each style here draws *distinct* images of one kind, with classes, so that a
corpus is ``DIR/<class>/<image>``; ``write_corpus`` adds planted copies (``zoo_edits``: JPEG at quality
30-50, scaled to 0.5-0.7, a 2-5% border crop, brightness or contrast by 10-20%, a caption or watermark
bar, a PNG re-save, and pairs of these) and returns the ground truth, which ``zoo_scores`` compares with
what a build found. Every image is drawn from (style, seed, class, index) alone: the same bytes on every
run, on any number of processes.

The styles are split in two halves: choose thresholds on ``TUNING_STYLES`` and check them on
``CHECK_STYLES``, which the tuning never saw. Each half has low-detail styles and photos (the photos
split by photo).
"""
import argparse
import dataclasses
import json
import os
import random
from typing import Callable, Sequence

from PIL import Image

from imgrec.samples import parallel, zoo_edits, zoo_flat, zoo_paper, zoo_photos

Draw = Callable[[str, int, int, int], Image.Image]


@dataclasses.dataclass(frozen=True)
class Style:
    """One kind of image: ``draw(label, index, seed, size)`` gives image ``index`` of class ``label``,
    ``size`` pixels on its long side; originals are saved as ``extension`` (``jpg`` or ``png``)."""
    name: str
    draw: Draw
    classes: tuple[str, ...]
    size: int
    extension: str
    about: str
    capacity: Callable[[str, int, int], int] | None = None  # (label, seed, size) -> distinct images; None: any


_HALF = len(zoo_photos.PHOTOS) // 2
STYLES = {style.name: style for style in (
    Style('digits', zoo_paper.draw_digit, zoo_paper.DIGITS, 32, 'png', 'dark digits 0-9 on a light page, MNIST-like'),
    Style('pages', zoo_paper.draw_page, zoo_paper.PAGES, 128, 'png', 'printed pages: letters, invoices, forms...'),
    Style('objects', zoo_paper.draw_object, zoo_paper.OBJECTS, 96, 'jpg', 'one labelled product on white'),
    Style('scans', zoo_flat.draw_scan, zoo_flat.SCANS, 64, 'png', 'grey blobs on black'),
    Style('icons', zoo_flat.draw_icons, zoo_flat.ICONS, 64, 'png', 'one or two small icons on a flat colour'),
    Style('gradients', zoo_flat.draw_gradient, zoo_flat.GRADIENTS, 96, 'jpg', 'smooth gradients of two or three colours'),
    Style('textures', zoo_flat.draw_texture, zoo_flat.TEXTURES, 96, 'jpg', 'stripes, checks, dots, noise, waves, cells'),
    Style('renders', zoo_flat.draw_render, zoo_flat.RENDERS, 96, 'jpg', 'one shape on a plain colour, one flat style'),
    Style('tiny', zoo_flat.draw_tiny, zoo_flat.TINY, 16, 'png', 'very small pictures, 16 pixels or fewer a side'),
    Style('photos', zoo_photos.draw_photo_tile, zoo_photos.PHOTOS[0::2], 96, 'jpg',
          'tiles of real photos (skimage.data), one photo a class', zoo_photos.capacity),
    Style('photos_check', zoo_photos.draw_photo_tile, zoo_photos.PHOTOS[1::2], 96, 'jpg',
          'tiles of the other real photos (skimage.data), one photo a class', zoo_photos.capacity),
)}
# Tune on one half, check on the other: each half has digit-like strokes or shapes on a plain ground,
# smooth or textured fields, and photos.
TUNING_STYLES = ('digits', 'objects', 'scans', 'gradients', 'photos')
CHECK_STYLES = ('pages', 'icons', 'textures', 'renders', 'tiny', 'photos_check')
TRUTH_FORMAT = 'imgrec-zoo-truth/1'
# Raise whenever a style or an edit draws differently, so that cached corpora (benchmarks/zoo_builds.py) are made anew.
DRAWING = 3


@dataclasses.dataclass
class Corpus:
    """The ground truth of a written corpus. ``images``: the distinct images, [{'source', 'label'}];
    ``pairs``: the planted copies, [{'original', 'copy', 'edit', 'kind' ('single' or 'combined'),
    'cross_label' (bool)}]; sources relative to ``folder``, as the build's index names them."""
    style: str
    folder: str
    seed: int
    size: int
    classes: list[str]
    images: list[dict]
    pairs: list[dict]

    def to_json(self) -> dict:
        return {'format': TRUTH_FORMAT, **dataclasses.asdict(self)}

    def write_json(self, path: str) -> str:
        with open(path, 'w', encoding='utf-8') as out:
            json.dump(self.to_json(), out, indent=1)
        return path

    @classmethod
    def load(cls, path: str) -> 'Corpus':
        with open(path, encoding='utf-8') as stream:
            document = json.load(stream)
        if document.pop('format', None) != TRUTH_FORMAT:
            raise ValueError(f'{path} is not a zoo ground truth ({TRUTH_FORMAT})')
        return cls(**document)


def truth_path(folder: str) -> str:
    """Where ``write_corpus`` writes the ground truth by default: beside the folder, not in it, so that
    a build of the folder does not list it."""
    return folder.rstrip('/') + '.truth.json'


def _write(job):
    """Draws and saves one original and its planted copies."""
    folder, source, style_name, label, index, seed, size, copies = job
    style = STYLES[style_name]
    path = os.path.join(folder, source)
    image = style.draw(label, index, seed, size)
    if style.extension == 'png':
        image.save(path, format='PNG')
    else:
        image.save(path, format='JPEG', quality=92)
    with Image.open(path) as saved:
        original = saved.convert('RGB')
    for edit, copy_seed, copy_source in copies:
        picture, quality = zoo_edits.make_copy(original, edit, random.Random(copy_seed))
        zoo_edits.save_copy(picture, os.path.join(folder, copy_source),
                            zoo_edits.copy_extension(edit, style.extension), quality)


def _classes(style: Style, classes: int | Sequence[str] | None) -> list[str]:
    if classes is None:
        return list(style.classes)
    if isinstance(classes, int):
        if not 1 <= classes <= len(style.classes):
            raise ValueError(f'style {style.name!r} has {len(style.classes)} classes; asked for {classes}')
        return list(style.classes[:classes])
    unknown = sorted(set(classes) - set(style.classes))
    if unknown:
        raise ValueError(f'style {style.name!r} has no class {", ".join(unknown)}; it has {", ".join(style.classes)}')
    return list(classes)


def write_corpus(style: str, folder: str, *, classes: int | Sequence[str] | None = None, per_class: int = 20,
                 planted: int = 2 * len(zoo_edits.SINGLE_EDITS), combined: int = len(zoo_edits.COMBINED_EDITS),
                 cross_label: int = 0, seed: int = 0, size: int | None = None, truth: str | None = None,
                 processes: int = 1) -> Corpus:
    """Writes ``per_class`` distinct images of each class of ``style`` (all its classes, the first
    ``classes`` of them, or those named) under ``folder/<class>/``, and planted copies of some of them:
    ``planted`` by single edits and ``combined`` by pairs of edits (each edit in turn), under the
    original's class, and ``cross_label`` more (single edits in turn) under another class. An original
    has at most one copy. Names are random numbers, so that nothing but the pixels ties a copy to its
    original. ``size``: pixels on the long side (the style's default if None). Writes the ground truth
    to ``truth`` (``truth_path(folder)`` if None; '' for none) and returns it."""
    spec = STYLES[style]
    size = size or spec.size
    labels = _classes(spec, classes)
    short = {label: spec.capacity(label, seed, size) for label in labels} if spec.capacity else {}
    short = {label: count for label, count in short.items() if count < per_class}
    if short:
        raise ValueError(f'style {style!r} has fewer than {per_class} distinct images in '
                         + ', '.join(f'{label} ({count})' for label, count in short.items()))
    copies = planted + combined + cross_label
    if copies > per_class * len(labels):
        raise ValueError(f'{copies} planted copies need as many originals; the corpus has {per_class * len(labels)}')
    if cross_label and len(labels) < 2:
        raise ValueError('cross-label copies need two classes')
    rng = random.Random(f'zoo:{style}:{seed}')
    names = list(range(len(labels) * per_class + copies))
    rng.shuffle(names)
    originals = []
    for label in labels:
        os.makedirs(os.path.join(folder, label), exist_ok=True)
        originals += [(f'{label}/img_{names.pop():06d}.{spec.extension}', label, index) for index in range(per_class)]
    edits = ([(zoo_edits.SINGLE_EDITS[n % len(zoo_edits.SINGLE_EDITS)], False) for n in range(planted)]
             + [(zoo_edits.COMBINED_EDITS[n % len(zoo_edits.COMBINED_EDITS)], False) for n in range(combined)]
             + [(zoo_edits.SINGLE_EDITS[n % len(zoo_edits.SINGLE_EDITS)], True) for n in range(cross_label)])
    copies_of, pairs = {}, []
    for (edit, across), at in zip(edits, rng.sample(range(len(originals)), len(edits))):
        source, label, _ = originals[at]
        copy_label = rng.choice([other for other in labels if other != label]) if across else label
        copy_source = f'{copy_label}/img_{names.pop():06d}.{zoo_edits.copy_extension(edit, spec.extension)}'
        copies_of[source] = [(edit, rng.getrandbits(64), copy_source)]
        pairs.append({'original': source, 'copy': copy_source, 'edit': edit, 'kind': zoo_edits.edit_kind(edit),
                      'cross_label': across})
    jobs = [(folder, source, style, label, index, seed, size, copies_of.get(source, []))
            for source, label, index in originals]
    parallel.run(_write, jobs, processes)
    corpus = Corpus(style=style, folder=os.path.abspath(folder), seed=seed, size=size, classes=labels,
                    images=[{'source': source, 'label': label} for source, label, _ in originals], pairs=pairs)
    if truth != '':
        corpus.write_json(truth or truth_path(folder))
    return corpus


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--list', action='store_true', help='print the styles, their halves and classes, and exit')
    parser.add_argument('--style', choices=sorted(STYLES), help='the style to write')
    parser.add_argument('--output', help='folder to write <class>/<image> files into')
    parser.add_argument('--per_class', type=int, default=20, help='distinct images a class')
    parser.add_argument('--classes', type=int, default=None, help='the first N classes of the style (default: all)')
    parser.add_argument('--planted', type=int, default=2 * len(zoo_edits.SINGLE_EDITS), help='copies by one edit')
    parser.add_argument('--combined', type=int, default=len(zoo_edits.COMBINED_EDITS), help='copies by two edits')
    parser.add_argument('--cross_label', type=int, default=0, help='copies under another class than the original')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--size', type=int, default=None, help="pixels on the long side (default: the style's)")
    parser.add_argument('--truth', default=None, help='where to write the ground truth (default: <output>.truth.json)')
    args = parser.parse_args(argv)
    if args.list:
        for name, style in STYLES.items():
            half = 'tuning' if name in TUNING_STYLES else 'check'
            print(f'{name:13} {half:7} {style.size:4} px  {style.about}; classes: {", ".join(style.classes)}')
        return
    if not args.style or not args.output:
        parser.error('--style and --output are needed (or --list)')
    corpus = write_corpus(args.style, args.output, classes=args.classes, per_class=args.per_class,
                          planted=args.planted, combined=args.combined, cross_label=args.cross_label,
                          seed=args.seed, size=args.size, truth=args.truth, processes=os.cpu_count() or 1)
    print(f'wrote {len(corpus.images)} distinct {args.style} images and {len(corpus.pairs)} planted copies under '
          f'{args.output}; the ground truth is in {args.truth or truth_path(args.output)}')


if __name__ == '__main__':
    main()
