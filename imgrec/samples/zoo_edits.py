"""The zoo's planted copies: the edits issue 39 names, alone and in pairs, made with
``imgrec.samples.near_duplicates.make_twin`` at the issue's strengths.

A copy is made from the original as saved (its file decoded), as a person copies a file they have, and
saved in the original's format unless the edit is a format change: ``jpeg`` always saves a JPEG at
quality 30-50, ``png`` always a PNG (lossless: the same pixels as the original decodes to).
"""
import random

from PIL import Image

from imgrec.samples.near_duplicates import TWIN_RANGES, make_twin

# The strengths of issue 39: JPEG quality 30-50, scaled to 0.5-0.7, 2-5% cut from each border, brightness
# or contrast changed by 10-20% either way, a caption or watermark bar of 8-12% of the height. Small
# images may shrink to 4 pixels a side and get a caption bar of 2.
ZOO_RANGES = TWIN_RANGES | {'jpeg': (30, 50), 'scale': (0.5, 0.7), 'crop': (0.02, 0.05), 'brightness': (0.10, 0.20),
                            'contrast': (0.10, 0.20), 'caption': (0.08, 0.12), 'min_side': 4, 'min_bar': 2}
SINGLE_EDITS = ('jpeg', 'scale', 'crop', 'brightness', 'contrast', 'caption', 'watermark', 'png')
# Pairs of edits, applied left to right; every single edit but png (which changes nothing) takes part.
COMBINED_EDITS = ('scale+jpeg', 'crop+brightness', 'caption+scale', 'contrast+crop', 'watermark+jpeg',
                  'brightness+scale', 'crop+caption', 'jpeg+contrast')
EDITS = SINGLE_EDITS + COMBINED_EDITS
SINGLE, COMBINED = 'single', 'combined'


def edit_kind(edit: str) -> str:
    """``single`` or ``combined``: what recall target the edit counts towards."""
    return COMBINED if '+' in edit else SINGLE


def copy_extension(edit: str, original_extension: str) -> str:
    """The file extension the copy by ``edit`` is saved with."""
    steps = edit.split('+')
    if 'jpeg' in steps:
        return 'jpg'
    if 'png' in steps:
        return 'png'
    return original_extension


def make_copy(original: Image.Image, edit: str, rng: random.Random) -> tuple[Image.Image, int | None]:
    """(copy, JPEG quality to save it at, or None for the format's default) of the decoded ``original``
    by ``edit``: one of ``EDITS``."""
    if edit not in EDITS:
        raise ValueError(f'unknown edit {edit!r}; known: {", ".join(EDITS)}')
    image, quality = original.convert('RGB'), None
    for step in edit.split('+'):
        image, _, step_quality = make_twin(image, step, rng, ZOO_RANGES)
        if step == 'jpeg':
            quality = step_quality
    return image, quality


def save_copy(image: Image.Image, path: str, extension: str, quality: int | None) -> None:
    """Saves a copy: a JPEG at ``quality`` (90 when the edit named none), a PNG at a compression level
    other than the originals' so that even a pixel-identical PNG copy has bytes of its own."""
    if extension == 'png':
        image.save(path, format='PNG', compress_level=1)
    else:
        image.save(path, format='JPEG', quality=quality or 90)
