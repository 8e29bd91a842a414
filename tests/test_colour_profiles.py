"""Colours as a viewer shows them: an embedded ICC profile is converted to sRGB before resizing, the same on
every decode thread; an image without one, or with one LittleCMS cannot read, keeps its numbers. The
wide-gamut profiles are Debian's colord-data (``make test`` installs it)."""
import concurrent.futures
import io

import pytest
from PIL import Image

from imgrec.imaging import image_ops
from imgrec.imaging.record_options import RecordOptions
from imgrec.samples import torture
from tests.torture_fixtures import colour_errors

OPTIONS = RecordOptions(torture.IMAGE_SIZE)
COLOURS = torture.WIDE_GAMUT_QUADRANTS
# Max difference per channel from LittleCMS's own conversion of the colour (JPEG in, JPEG out).
CLOSE = 12
wide_gamut = pytest.mark.skipif(torture.profile('AdobeRGB1998') is None,
                                reason=f'colord-data is not installed (no ICC profiles in {torture.PROFILES}; '
                                       'make test installs it)')


def _photo(fmt, icc_profile=None):
    options = {'quality': 95} if fmt == 'JPEG' else {}
    if icc_profile is not None:
        options['icc_profile'] = icc_profile
    out = io.BytesIO()
    torture.quadrants(480, 320, COLOURS).save(out, fmt, **options)
    return out.getvalue()


@wide_gamut
@pytest.mark.parametrize('name, fmt', [('AdobeRGB1998', 'JPEG'), ('ProPhotoRGB', 'TIFF'), ('AdobeRGB1998', 'HEIF')])
def test_a_wide_gamut_photo_is_converted_to_srgb(name, fmt):
    icc = torture.profile(name)
    jpeg, notes = image_ops.decode_resize_encode(_photo(fmt, icc), OPTIONS)
    assert image_ops.ICC_CONVERTED in image_ops.decisions(notes)
    reference = torture.in_srgb(COLOURS, icc)
    assert max(colour_errors(jpeg, torture.checks(reference)).values()) <= CLOSE
    # Read as sRGB, the numbers would be far off: the check above could fail.
    assert max(colour_errors(jpeg, torture.checks(COLOURS)).values()) > 2 * CLOSE


@wide_gamut
def test_the_conversion_gives_the_same_bytes_on_every_decode_thread():
    data = _photo('JPEG', torture.profile('ProPhotoRGB'))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outputs = set(pool.map(lambda _: image_ops.decode_resize_encode(data, OPTIONS)[0], range(16)))
    assert len(outputs) == 1


@pytest.mark.parametrize('icc_profile, decision', [(None, None), (b'not a profile at all', image_ops.ICC_UNUSED)])
def test_an_image_without_a_usable_profile_keeps_its_numbers(icc_profile, decision):
    data = _photo('PNG', icc_profile)
    image, notes = image_ops.decode(data, torture.IMAGE_SIZE)
    assert notes.get('icc') == decision
    assert image.tobytes() == Image.open(io.BytesIO(data)).convert('RGB').tobytes()


def test_a_grey_profile_converts_grey_pixels():
    """JPEG XL's decoder gives a grey image a grey profile of its own (sRGB's curve): converted, the same greys."""
    greys = (0, 85, 170, 255)
    out = io.BytesIO()
    torture.quadrants(96, 64, greys, 'L').save(out, 'JXL', lossless=True)
    image, notes = image_ops.decode(out.getvalue(), torture.IMAGE_SIZE)
    assert (notes['mode'], notes['icc']) == ('L', image_ops.ICC_CONVERTED)
    for (fx, fy), grey in torture.checks(greys):
        pixel = image.getpixel((int(fx * image.width), int(fy * image.height)))
        assert max(abs(value - grey) for value in pixel) <= 2, (pixel, grey)
