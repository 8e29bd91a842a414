"""Each awkward input of the torture corpus through the per-image step (no Beam): its fate, colours and
recorded decisions; and the documented memory bound, measured in a fresh process."""
import io
import json
import os
import subprocess
import sys

import pytest
from PIL import Image

from imgrec.contract.reasons import LABEL_CONFLICT, REASONS
from imgrec.imaging import image_ops
from imgrec.imaging.record_options import RecordOptions
from imgrec.samples import torture
from tests.torture_fixtures import TOLERANCE, colour_errors

CASES = {source: case for source, case in torture.corpus().items() if case[1].fate != torture.IGNORED}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _decode(data):
    return image_ops.decode_resize_encode(data, RecordOptions(torture.IMAGE_SIZE, max_pixels=torture.MAX_PIXELS,
                                                              min_size=torture.MIN_SIZE))


def _decodes(expected):
    """Whether the image itself is usable: written, or only refused by the build for its copies."""
    return expected.fate in (torture.WRITTEN, torture.DUPLICATE) or expected.reason == LABEL_CONFLICT


@pytest.mark.parametrize('source', sorted(source for source, (_, e) in CASES.items() if _decodes(e)))
def test_usable_images_come_out_upright_in_their_colours(source):
    data, expected = CASES[source]
    jpeg, notes = _decode(data)
    assert Image.open(io.BytesIO(jpeg)).size == (torture.IMAGE_SIZE[1], torture.IMAGE_SIZE[0])
    errors = colour_errors(jpeg, expected.colours)
    assert max(errors.values()) <= TOLERANCE, errors
    if expected.fate == torture.WRITTEN:
        recorded = {d for d in image_ops.decisions(notes) if not d.startswith('draft_scale=')}
        assert recorded == set(expected.decisions)


@pytest.mark.parametrize('source', sorted(source for source, (_, e) in CASES.items() if not _decodes(e)))
def test_unusable_inputs_are_refused_with_their_reason(source):
    data, expected = CASES[source]
    with pytest.raises(image_ops.ImageRejected) as refused:
        _decode(data)
    assert refused.value.reason == expected.reason and expected.reason in REASONS
    assert refused.value.message and '\n' not in refused.value.message


@pytest.mark.parametrize('orientation', [1, 6])
def test_exif_rotated_jpeg_keeps_the_draft_fast_path(orientation):
    source = 'alpha/plain.jpg' if orientation == 1 else f'alpha/orientation_{orientation}.jpg'
    _, notes = _decode(CASES[source][0])
    assert notes['draft_scale'] == 8  # 480x320 decoded at 60x40 for a 48x32 target, rotated or not


def test_a_single_pixel_image_is_written_when_min_size_allows():
    data = torture.corpus()['beta/one_pixel.png'][0]
    jpeg, _ = image_ops.decode_resize_encode(data, RecordOptions((32, 32), min_size=1))
    assert max(colour_errors(jpeg, [((0.5, 0.5), torture.RED)]).values()) <= TOLERANCE


def test_the_bomb_is_refused_at_any_cap_below_its_size_before_decoding():
    data = torture.corpus()['beta/bomb.png'][0]
    assert len(data) < 200_000  # 900 megapixels in a small file
    with pytest.raises(image_ops.ImageRejected) as refused:
        image_ops.decode(data, (32, 32))  # the default cap
    assert refused.value.reason == 'too_many_pixels' and '30000x30000' in refused.value.message


def _jxl_header(side):
    """A JPEG XL codestream whose header says side x side pixels (ISO 18181-1 SizeHeader, bits from the lowest:
    not small, the 18-bit size, side - 1, and the 1:1 ratio), then bytes that are no image."""
    bits = 0 | (2 << 1) | ((side - 1) << 3) | (1 << 21)
    return b'\xff\x0a' + bits.to_bytes(3, 'little') + bytes(64)


def test_a_jpeg_xl_is_refused_by_its_header_before_its_plugin_decodes_it():
    assert image_ops.jxl_size(_jxl_header(30_000)) == (30_000, 30_000)
    with pytest.raises(image_ops.ImageRejected) as refused:
        image_ops.decode(_jxl_header(30_000), (32, 32))
    assert refused.value.reason == 'too_many_pixels' and '30000x30000' in refused.value.message
    assert image_ops.jxl_size(torture.corpus()['alpha/photo.jxl'][0]) == (96, 64)


_MEASURE = '''
import json, resource, sys
from imgrec.imaging import image_ops
data = open(sys.argv[1], 'rb').read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
image, notes = image_ops.decode(data, (int(sys.argv[2]), int(sys.argv[2])))
image_ops.encode_jpeg(image_ops.resize(image, (32, 32)), 90)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({'peak_bytes': (after - before) * 1024, 'notes': notes}))
'''


def _peak_decode_bytes(path, target_side):
    """Peak memory a fresh process gains decoding ``path`` (its bytes already read)."""
    result = subprocess.run([sys.executable, '-c', _MEASURE, str(path), str(target_side)], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


# Worst cases of each decoder path, 3000x3000: palette + transparency (three buffers), CMYK, 16-bit, and RGBA
# in each format whose codec keeps a copy of its own (encoded at their fastest settings).
_SIDE = 3000
_RGBA = ((255, 0, 0, 255), (0, 0, 0, 0), (0, 0, 255, 128), (0, 255, 0, 255))
_BIG = {
    'palette.png': lambda: (torture.palette_image(torture.quadrants(_SIDE, _SIDE), 1)[0], 'PNG', {'transparency': 1}),
    'cmyk.tif': lambda: (torture.quadrants(_SIDE, _SIDE).convert('CMYK'), 'TIFF', {}),
    'grey16.png': lambda: (torture.quadrants(_SIDE, _SIDE, (0, 30000, 50000, 65535), 'I;16'), 'PNG', {}),
    'rgba.webp': lambda: (torture.quadrants(_SIDE, _SIDE, _RGBA, 'RGBA'), 'WEBP', {'quality': 50}),
    'rgba.avif': lambda: (torture.quadrants(_SIDE, _SIDE, _RGBA, 'RGBA'), 'AVIF', {'quality': 50, 'speed': 10}),
    'rgba.heic': lambda: (torture.quadrants(_SIDE, _SIDE, _RGBA, 'RGBA'), 'HEIF',
                          {'quality': 10, 'enc_params': {'preset': 'ultrafast'}}),
    'rgba.jxl': lambda: (torture.quadrants(_SIDE, _SIDE, _RGBA, 'RGBA'), 'JXL', {'quality': 50, 'effort': 1}),
    'rgba.jp2': lambda: (torture.quadrants(_SIDE, _SIDE, _RGBA, 'RGBA'), 'JPEG2000', {}),
    'cmyk.jpg': lambda: (torture.quadrants(_SIDE, _SIDE).convert('CMYK'), 'JPEG', {}),
}
# Python's own allocations while decoding (the interpreter, the modules' first use) on top of the pixels.
_SLACK = 8 * 2 ** 20


@pytest.mark.parametrize('name', sorted(_BIG))
def test_decoding_stays_within_the_documented_memory_bound(name, tmp_path):
    image, fmt, options = _BIG[name]()
    path = tmp_path / name
    image.save(path, fmt, **options)
    del image
    measured = _peak_decode_bytes(path, _SIDE)  # full-size decode: no draft, the worst case
    per_pixel = image_ops.CODEC_BYTES_PER_PIXEL.get(fmt, image_ops.BYTES_PER_PIXEL)
    assert measured['peak_bytes'] <= per_pixel * _SIDE * _SIDE + _SLACK, measured


def test_jpeg_draft_divides_the_bound_by_the_square_of_its_scale(tmp_path):
    path = tmp_path / 'big.jpg'
    torture.quadrants(_SIDE, _SIDE).save(path, 'JPEG')
    measured = _peak_decode_bytes(path, 32)
    assert measured['notes']['draft_scale'] == 8
    assert measured['peak_bytes'] <= image_ops.BYTES_PER_PIXEL * _SIDE * _SIDE / 64 + _SLACK, measured
