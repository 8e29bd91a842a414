"""The perceptual hash's values, recorded: a change to how it is computed must give the same bits, or name
a new ``ALGORITHM`` (a refresh then hashes every image again) and record the new values here.

The pictures are drawn with integer arithmetic and SHA-256 noise alone, so they are the same on every
machine; none is flat grey, whose weak waves' projections are rounding noise."""
import hashlib

import numpy as np
import pytest
from PIL import Image

from imgrec.imaging import perceptual_hash as ph


def _noise(shape, salt):
    """uint8 noise of ``shape`` from SHA-256 of ``salt``."""
    need = int(np.prod(shape))
    data = b''.join(hashlib.sha256(f'{salt}:{block}'.encode()).digest() for block in range(-(-need // 32)))
    return np.frombuffer(data[:need], dtype=np.uint8).reshape(shape)


def _gradient(width, height, corners):
    """An RGB gradient between four corner colours (top left, top right, bottom left, bottom right), bilinear,
    in integers."""
    y, x = np.mgrid[0:height, 0:width, 0:1][:2]
    w, h = width - 1, height - 1
    weights = ((w - x) * (h - y), x * (h - y), (w - x) * y, x * y)
    return (sum(weight * np.array(corner) for weight, corner in zip(weights, corners)) // (w * h)).astype(np.uint8)


def _pictures():
    """(name, picture): a smooth gradient (most of its bits projected), the build's common case (a photo-sized
    RGB picture, reduced before its grid), a grey one, a small one (enlarged to the grid), a palette one
    (converted to RGB) and a flat colour (every bit projected, from its chroma)."""
    gradient = _gradient(640, 480, ((250, 120, 30), (40, 90, 200), (20, 160, 90), (230, 230, 210)))
    textured = (_gradient(500, 333, ((10, 10, 10), (240, 200, 160), (90, 30, 200), (30, 250, 120))) // 2
                + _noise((333, 500, 3), 'textured') // 2)
    grey = (np.add.outer(np.arange(301) // 3, np.arange(401) // 5).astype(np.uint16) + _noise((301, 401), 'grey') // 4)
    return (('gradient', Image.fromarray(gradient, 'RGB')),
            ('textured', Image.fromarray(textured, 'RGB')),
            ('grey', Image.fromarray((grey % 256).astype(np.uint8), 'L')),
            ('small', Image.fromarray(_noise((37, 53, 3), 'small'), 'RGB')),
            ('palette', Image.fromarray(textured, 'RGB').quantize(16)),
            ('flat colour', Image.new('RGB', (120, 90), (200, 40, 60))))


# (whole, centre), as the index writes them (``to_hex``). Every wave is at least 0.4 from WEAK and every
# projection of a weak one at least 1 from 0: far from where the order of a sum could move a bit.
RECORDED = {
    'gradient': 'fbebf240de3dc964fbebf240de3d4964',
    'textured': '04825e124a877f9f060056924a979fd9',
    'grey': '2d37d06a7b4a85222b8acbe0ddd944f5',
    'small': 'c5bb708b605adff0c13f9b7b7f88d903',
    'palette': '04804f9f03867f9f0c0106be03c63f9b',
    'flat colour': 'ecf6305e4ac034dcecf6305e4ac034dc',
}


PICTURES = _pictures()


@pytest.mark.parametrize('name, picture', PICTURES, ids=[name for name, _ in PICTURES])
def test_the_hashes_are_the_recorded_ones(name, picture):
    assert ph.to_hex(ph.perceptual_hashes(picture)) == RECORDED[name], ph.ALGORITHM
