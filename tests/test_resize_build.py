"""--resize modes through the real build, on images of extreme aspect ratios."""
import io

import pytest
from PIL import Image

from imgrec.contract import features as F
from tests.conftest import run_build
from tests.contract_checks import check_version


@pytest.fixture(scope='module')
def extreme_images(tmp_path_factory):
    """A 1000x10 strip and a 10x1000 pole, each red on its first half and blue on its second."""
    root = tmp_path_factory.mktemp('extreme')
    for label, size in (('strip', (1000, 10)), ('pole', (10, 1000))):
        image = Image.new('RGB', size, (255, 0, 0))
        second_half = (size[0] // 2, 0) + size if size[0] > size[1] else (0, size[1] // 2) + size
        image.paste((0, 0, 255), second_half)
        (root / label).mkdir()
        image.save(root / label / f'{label}.png')
    return root


def _written(output):
    _, by_split = check_version(output, image_size=(24, 48))
    return {r[F.LABEL_TEXT].decode(): Image.open(io.BytesIO(r[F.IMAGE_ENCODED])).convert('RGB')
            for records in by_split.values() for r in records}


def _is(pixel, colour, tolerance=60):
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour))


@pytest.mark.parametrize('mode', ['crop', 'pad', 'stretch'])
def test_extreme_aspect_ratios_give_the_requested_size(extreme_images, tmp_path, mode):
    images = _written(run_build(tmp_path, '--input', extreme_images, '--image_size', '24x48', '--resize', mode,
                                '--splits', 'train=1', '--num_shards', 'train=1'))
    assert set(images) == {'strip', 'pole'} and all(i.size == (48, 24) for i in images.values())
    strip, pole = images['strip'], images['pole']
    if mode == 'crop':  # the centre of each: where red meets blue
        assert _is(strip.getpixel((2, 12)), (255, 0, 0)) and _is(strip.getpixel((45, 12)), (0, 0, 255))
        assert _is(pole.getpixel((24, 2)), (255, 0, 0)) and _is(pole.getpixel((24, 21)), (0, 0, 255))
    elif mode == 'pad':  # the whole image, between black bars
        assert _is(strip.getpixel((24, 1)), (0, 0, 0)) and _is(strip.getpixel((24, 22)), (0, 0, 0))
        assert _is(pole.getpixel((2, 12)), (0, 0, 0)) and _is(pole.getpixel((45, 12)), (0, 0, 0))
    else:  # stretched edge to edge, no bars
        assert _is(strip.getpixel((2, 1)), (255, 0, 0)) and _is(strip.getpixel((45, 22)), (0, 0, 255))
        assert _is(pole.getpixel((2, 1)), (255, 0, 0)) and _is(pole.getpixel((45, 22)), (0, 0, 255))
