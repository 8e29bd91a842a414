"""Resize modes and the fast decode path, on plain images (no Beam)."""
import io

import pytest
from PIL import Image

from imgrec.imaging import image_ops
from imgrec.imaging.record_options import RecordOptions


def _jpeg(image, **options):
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=95, **options)
    return out.getvalue()


def _halves(width, height):
    """Left half red, right half blue, so crop and pad placement can be seen."""
    image = Image.new('RGB', (width, height), (255, 0, 0))
    image.paste((0, 0, 255), (width // 2, 0, width, height))
    return image


@pytest.mark.parametrize('size', [(2000, 10), (10, 2000), (1, 1), (640, 480)])
@pytest.mark.parametrize('mode', image_ops.RESIZE_MODES)
@pytest.mark.parametrize('target', [(32, 32), (24, 48)])
def test_every_mode_gives_exactly_the_target_size(size, mode, target):
    jpeg, _ = image_ops.decode_resize_encode(_jpeg(_halves(*size)), RecordOptions(target, resize=mode))
    decoded = Image.open(io.BytesIO(jpeg))
    assert decoded.size == (target[1], target[0]) and decoded.mode == 'RGB'


def test_crop_keeps_the_centre_of_a_wide_image():
    image = Image.new('RGB', (300, 100), (255, 0, 0))
    image.paste((0, 255, 0), (100, 0, 200, 100))  # green centre third
    out, _ = image_ops.decode(_jpeg(image), (32, 32), 'crop')
    resized = image_ops.resize(out, (32, 32), 'crop')
    assert all(abs(a - b) < 40 for a, b in zip(resized.getpixel((16, 16)), (0, 255, 0)))
    assert all(abs(a - b) < 40 for a, b in zip(resized.getpixel((1, 16)), (0, 255, 0)))


def test_pad_fits_the_whole_image_between_bars():
    resized = image_ops.resize(_halves(400, 100), (40, 40), 'pad')
    assert resized.getpixel((20, 2)) == image_ops.PAD_COLOUR  # bar above
    assert resized.getpixel((20, 37)) == image_ops.PAD_COLOUR  # bar below
    left, right = resized.getpixel((3, 20)), resized.getpixel((36, 20))
    assert left[0] > 200 and right[2] > 200  # both halves visible


def test_stretch_ignores_the_aspect_ratio():
    resized = image_ops.resize(_halves(400, 100), (40, 40), 'stretch')
    assert resized.getpixel((5, 20))[0] > 200 and resized.getpixel((35, 20))[2] > 200
    assert resized.getpixel((20, 1)) != image_ops.PAD_COLOUR


@pytest.mark.parametrize('target, mode, decoded', [
    ((100, 100), 'crop', (200, 150)),    # needs 134x100: 1/8 scale
    ((160, 160), 'crop', (400, 300)),    # needs 214x160: 1/8 would be too small, 1/4
    ((160, 160), 'pad', (200, 150)),     # needs 160x120
    ((600, 600), 'crop', (800, 600)),    # needs 800x600 exactly: 1/2
    ((700, 700), 'crop', (1600, 1200)),  # needs 934x700: full size
    ((100, 600), 'stretch', (800, 600)),
])
def test_large_jpegs_are_draft_decoded_no_smaller_than_needed(target, mode, decoded):
    image, notes = image_ops.decode(_jpeg(_halves(1600, 1200)), target, mode)
    assert (notes['width'], notes['height']) == (1600, 1200)
    assert image.size == decoded


@pytest.mark.parametrize('text, expected', [('192', (192, 192)), ('192x256', (192, 256)), ('64X32', (64, 32))])
def test_image_size_parses(text, expected):
    assert image_ops.parse_image_size(text) == expected


@pytest.mark.parametrize('text', ['0', '0x5', 'x', '12x', 'ten', '-3', '1x2x3'])
def test_bad_image_sizes_are_refused(text):
    with pytest.raises(ValueError, match='image_size'):
        image_ops.parse_image_size(text)
