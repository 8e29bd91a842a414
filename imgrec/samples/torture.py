"""Writes a labelled folder of every awkward input a real image bucket holds, and the fate each must meet.

    python -m imgrec.samples.torture --output DIR

``write_corpus(root)`` returns {source: Expected} for the build options in ``BUILD_OPTIONS``. Most
images show four coloured quadrants (red, green / blue, yellow when upright), so a wrong rotation, a
mirror, a swapped colour channel or a missed composite shows up when the written JPEG is decoded.

The photos with wide-gamut ICC profiles (Adobe RGB, ProPhoto) use Debian's colord-data profiles
(``PROFILES``), and are left out where it is not installed (``make test`` installs it).
"""
import argparse
import io
import os
import struct
import typing
import zlib

import pillow_heif
from PIL import Image, ImageCms

from imgrec.contract.reasons import (
    CORRUPT,
    EMPTY,
    LABEL_CONFLICT,
    NOT_AN_IMAGE,
    TOO_MANY_PIXELS,
    TOO_SMALL,
    TRUNCATED,
    UNSUPPORTED_FORMAT,
)
from imgrec.imaging import image_ops

# Options the expectations assume: a 3:2 landscape target (height 32, width 48), a small pixel cap, 1x1
# images refused, and a high error rate allowed (a third of this corpus is bad on purpose).
IMAGE_SIZE = (32, 48)
MAX_PIXELS = 1_000_000
MIN_SIZE = 2
BUILD_OPTIONS = ('--image_size', '32x48', '--max_pixels', str(MAX_PIXELS), '--min_size', str(MIN_SIZE),
                 '--max_error_rate', '0.6')

RED, GREEN, BLUE, YELLOW = (230, 20, 20), (20, 200, 20), (20, 20, 230), (240, 220, 30)
WHITE, BLACK = (255, 255, 255), (0, 0, 0)
QUADRANTS = (RED, GREEN, BLUE, YELLOW)  # top-left, top-right, bottom-left, bottom-right
# Where each quadrant's colour is checked in a written image: (x, y) as fractions of width and height.
QUADRANT_CENTRES = ((0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75))

WRITTEN, QUARANTINED, DUPLICATE, IGNORED = 'written', 'quarantined', 'duplicate', 'ignored'
# Where Debian's colord-data keeps its ICC profiles, and the wide-gamut ones the corpus embeds.
PROFILES = '/usr/share/color/icc/colord'
WIDE_GAMUT = ('AdobeRGB1998', 'ProPhotoRGB')
# Quadrant colours such profiles move far: read as sRGB, each is another colour, by up to 90 a channel.
WIDE_GAMUT_QUADRANTS = ((40, 160, 60), (200, 60, 160), (90, 200, 200), (150, 40, 40))


class Expected(typing.NamedTuple):
    """What the build must do with one input file."""
    fate: str  # WRITTEN, QUARANTINED, DUPLICATE or IGNORED
    reason: str = ''  # the quarantine reason
    colours: tuple = ()  # ((x, y), (r, g, b)): colours of the decoded image, when it decodes
    decisions: tuple = ()  # decoding decisions that must be recorded (draft scales aside)
    duplicate_of: str = ''


def quadrants(width, height, colours=QUADRANTS, mode='RGB'):
    """An image of four coloured quadrants, in ``mode`` (colours given in that mode)."""
    image = Image.new(mode, (width, height))
    w, h = width // 2, height // 2
    for box, colour in zip(((0, 0, w, h), (w, 0, width, h), (0, h, w, height), (w, h, width, height)), colours):
        image.paste(colour, box)
    return image


def checks(colours=QUADRANTS):
    return tuple(zip(QUADRANT_CENTRES, colours))


# EXIF orientation -> how to store an upright picture so that a viewer applying the tag shows it
# upright (EXIF 2.3, tag 0x0112): the inverse of the display transform.
_STORE_FOR_ORIENTATION = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,  # displayed mirrored back
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,  # mirrored along the main diagonal
    6: Image.Transpose.ROTATE_90,  # stored turned 90 degrees anticlockwise; displayed turned clockwise
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,  # stored turned clockwise; displayed turned anticlockwise
}


def _encode(image, fmt, **options):
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def _oriented(image, orientation, fmt, **options):
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _encode(image.transpose(_STORE_FOR_ORIENTATION[orientation]), fmt, exif=exif, **options)


def _png_chunk(kind, payload):
    return struct.pack('>I', len(payload)) + kind + payload + struct.pack('>I', zlib.crc32(kind + payload))


def raw_png(width, height, bit_depth, colour_type, rows):
    """A PNG written by hand from an iterable of unfiltered rows (bytes), compressed as it streams.

    Pillow cannot write 16-bit colour PNGs, nor a huge image without holding its pixels.
    """
    compressor = zlib.compressobj(9)
    idat = b''.join(compressor.compress(b'\0' + row) for row in rows) + compressor.flush()
    header = struct.pack('>IIBBBBB', width, height, bit_depth, colour_type, 0, 0, 0)
    return b'\x89PNG\r\n\x1a\n' + _png_chunk(b'IHDR', header) + _png_chunk(b'IDAT', idat) + _png_chunk(b'IEND', b'')


def _rgb16_quadrants(width, height):
    """Rows of a 16-bit RGB quadrant image: each 8-bit value v stored as v * 257 (same high byte)."""
    def pixel(colour):
        return b''.join(struct.pack('>H', value * 257) for value in colour)
    top = pixel(RED) * (width // 2) + pixel(GREEN) * (width - width // 2)
    bottom = pixel(BLUE) * (width // 2) + pixel(YELLOW) * (width - width // 2)
    return [top] * (height // 2) + [bottom] * (height - height // 2)


def _ten_bit_heic(width, height):
    """A 10-bit HEIC of the quadrants, lossless, as a phone's HDR photo stores its pixels."""
    rows = b''.join(b''.join(struct.pack('<3H', *(value * 257 for value in colour)) * half
                             for colour, half in ((left, width // 2), (right, width - width // 2)))
                    for left, right, count in ((RED, GREEN, height // 2), (BLUE, YELLOW, height - height // 2))
                    for _ in range(count))
    out = io.BytesIO()
    pillow_heif.from_bytes(mode='RGB;16', size=(width, height), data=rows).save(out, quality=-1)
    return out.getvalue()


def _bomb(side):
    """A 1-bit greyscale PNG of side x side pixels, all black: a few hundred KB holding side^2 pixels."""
    return raw_png(side, side, 1, 0, (bytes((side + 7) // 8) for _ in range(side)))


def _cmyk_without_adobe_marker(image):
    """A plain (non-inverted) CMYK JPEG with no Adobe APP14 segment, as some prepress tools write."""
    inverted = image.convert('CMYK').point(lambda value: 255 - value)  # Pillow stores CMYK inverted
    data = _encode(inverted, 'JPEG', quality=95)
    start = data.index(b'\xff\xee')  # APP14 "Adobe"
    length = struct.unpack('>H', data[start + 2:start + 4])[0]
    return data[:start] + data[start + 2 + length:]


def _without_times(data):
    """An ISO media file (an AVIF sequence) with the creation and modification times of its movie, track and
    media headers set to 0: the encoder writes the clock's, and the corpus is the same bytes every time."""
    data = bytearray(data)
    for box in (b'mvhd', b'tkhd', b'mdhd'):
        start = data.find(box)
        while start >= 0:
            times = 8 if data[start + 4] == 0 else 16  # version 0: 32-bit times, version 1: 64-bit
            data[start + 8:start + 8 + times] = bytes(times)
            start = data.find(box, start + 4)
    return bytes(data)


def palette_image(image, transparent_quadrant=None):
    """``image`` as a 'P' image whose palette index i is quadrant colour i (+ optional transparency)."""
    palette = Image.new('P', (1, 1))
    palette.putpalette([c for colour in QUADRANTS for c in colour] + [0, 0, 0] * 252)
    converted = image.quantize(palette=palette, dither=Image.Dither.NONE)
    options = {} if transparent_quadrant is None else {'transparency': transparent_quadrant}
    return converted, options


def _animation(first, fmt, **options):
    rest = [Image.new(first.mode, first.size, BLACK), Image.new(first.mode, first.size, WHITE)]
    return _encode(first, fmt, save_all=True, append_images=rest, duration=100, loop=0, **options)


def profile(name):
    """The bytes of colord-data's ICC profile ``name`` (``WIDE_GAMUT``), or None where it is not installed."""
    try:
        with open(os.path.join(PROFILES, f'{name}.icc'), 'rb') as stream:
            return stream.read()
    except OSError:
        return None


def in_srgb(colours, icc_profile):
    """``colours`` (RGB in the space of ``icc_profile``) as sRGB: LittleCMS's reference conversion, one pixel
    at a time, relative colorimetric as the build converts."""
    pixels = Image.new('RGB', (len(colours), 1))
    for x, colour in enumerate(colours):
        pixels.putpixel((x, 0), colour)
    converted = ImageCms.profileToProfile(pixels, ImageCms.ImageCmsProfile(io.BytesIO(icc_profile)),
                                          ImageCms.createProfile('sRGB'),
                                          renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC, outputMode='RGB')
    assert converted is not None  # returned, not converted in place
    return tuple(converted.getpixel((x, 0)) for x in range(len(colours)))


def corpus():
    """{source: (file bytes, Expected)} of every case; ``source`` is the path under the input folder."""
    upright = quadrants(96, 64)
    large = quadrants(480, 320)  # large enough for JPEG draft decoding at 32x48
    q = checks()
    cases = {}

    def add(source, data, expected):
        cases[source] = (data, expected)

    def written(*decisions, colours=q):
        return Expected(WRITTEN, colours=colours, decisions=decisions)

    def quarantined(reason):
        return Expected(QUARANTINED, reason)

    add('alpha/plain.jpg', _encode(large, 'JPEG', quality=95), written('format=JPEG', 'mode=RGB'))
    for orientation in range(2, 9):
        add(f'alpha/orientation_{orientation}.jpg', _oriented(large, orientation, 'JPEG', quality=95),
            written('format=JPEG', 'mode=RGB', f'orientation={orientation}'))
    add('alpha/orientation_3.png', _oriented(upright, 3, 'PNG'), written('format=PNG', 'mode=RGB', 'orientation=3'))
    add('alpha/orientation_6.webp', _oriented(upright, 6, 'WEBP', lossless=True),
        written('format=WEBP', 'mode=RGB', 'orientation=6'))
    add('alpha/orientation_8.tif', _oriented(upright, 8, 'TIFF'), written('format=TIFF', 'mode=RGB', 'orientation=8'))
    # Colour models and bit depths.
    add('alpha/cmyk_adobe.jpg', _encode(large.convert('CMYK'), 'JPEG', quality=95), written('format=JPEG', 'mode=CMYK'))
    add('alpha/cmyk_no_adobe_marker.jpg', _cmyk_without_adobe_marker(large),
        written('format=JPEG', 'mode=CMYK', 'cmyk_not_inverted'))
    add('alpha/cmyk.tif', _encode(upright.convert('CMYK'), 'TIFF'), written('format=TIFF', 'mode=CMYK'))
    greys = (0, 85, 170, 255)
    grey_checks = checks(tuple((g, g, g) for g in greys))
    add('alpha/grey.png', _encode(quadrants(96, 64, greys, 'L'), 'PNG'), written('format=PNG', 'mode=L', colours=grey_checks))
    add('alpha/grey16.png', _encode(quadrants(96, 64, tuple(g * 257 for g in greys), 'I;16'), 'PNG'),
        written('format=PNG', 'mode=I;16', colours=grey_checks))
    add('alpha/grey16.tif', _encode(quadrants(96, 64, tuple(g * 257 for g in greys), 'I;16'), 'TIFF'),
        written('format=TIFF', 'mode=I;16', colours=grey_checks))
    add('alpha/rgb16.png', raw_png(96, 64, 16, 2, _rgb16_quadrants(96, 64)), written('format=PNG', 'mode=RGB'))
    add('alpha/one_bit.png', _encode(quadrants(96, 64, (255, 0, 0, 255), '1'), 'PNG'),
        written('format=PNG', 'mode=1', colours=checks((WHITE, BLACK, BLACK, WHITE))))
    # Transparency, composited onto the documented background.
    rgba = quadrants(96, 64, (RED + (255,), GREEN + (0,), BLUE + (128,), YELLOW + (255,)), 'RGBA')
    half_blue = tuple(round(b * 128 / 255 + w * 127 / 255) for b, w in zip(BLUE, image_ops.BACKGROUND))
    add('alpha/rgba.png', _encode(rgba, 'PNG'),
        written('format=PNG', 'mode=RGBA', 'alpha_composited', colours=checks((RED, WHITE, half_blue, YELLOW))))
    add('alpha/rgba.webp', _encode(rgba, 'WEBP', lossless=True),
        written('format=WEBP', 'mode=RGBA', 'alpha_composited', colours=checks((RED, WHITE, half_blue, YELLOW))))
    la = quadrants(96, 64, ((0, 255), (0, 0), (255, 255), (0, 255)), 'LA')
    add('alpha/grey_alpha.png', _encode(la, 'PNG'),
        written('format=PNG', 'mode=LA', 'alpha_composited', colours=checks((BLACK, WHITE, WHITE, BLACK))))
    with_hole = checks((RED, WHITE, BLUE, YELLOW))
    palette, options = palette_image(upright, transparent_quadrant=1)
    add('alpha/palette_transparent.gif', _encode(palette, 'GIF', **options),
        written('format=GIF', 'mode=P', 'alpha_composited', colours=with_hole))
    add('alpha/palette_transparent.png', _encode(palette, 'PNG', **options),
        written('format=PNG', 'mode=P', 'alpha_composited', colours=with_hole))
    palette, _ = palette_image(upright)
    add('alpha/palette.bmp', _encode(palette, 'BMP'), written('format=BMP', 'mode=P'))
    add('alpha/bitmap.bmp', _encode(upright, 'BMP'), written('format=BMP', 'mode=RGB'))
    # Animations and multi-page files: the first frame.
    add('alpha/animated.gif', _animation(palette_image(upright)[0], 'GIF'), written('format=GIF', 'mode=P', 'animated'))
    add('alpha/animated.webp', _animation(upright, 'WEBP', lossless=True), written('format=WEBP', 'mode=RGB', 'animated'))
    add('alpha/animated.png', _animation(upright, 'PNG'), written('format=PNG', 'mode=RGB', 'animated'))
    add('alpha/multipage.tif', _animation(upright, 'TIFF'), written('format=TIFF', 'mode=RGB', 'animated'))
    # Formats of phones, cameras and the web: AVIF, HEIC, JPEG XL (whose decoder gives an sRGB profile of its
    # own), JPEG 2000.
    add('alpha/photo.avif', _encode(upright, 'AVIF', quality=90), written('format=AVIF', 'mode=RGB'))
    add('alpha/orientation_6.avif', _oriented(upright, 6, 'AVIF', quality=90),
        written('format=AVIF', 'mode=RGB', 'orientation=6'))
    add('alpha/rgba.avif', _encode(rgba, 'AVIF', quality=95),
        written('format=AVIF', 'mode=RGBA', 'alpha_composited', colours=checks((RED, WHITE, half_blue, YELLOW))))
    add('alpha/animated.avif', _without_times(_animation(upright, 'AVIF', quality=90)), written('format=AVIF', 'mode=RGB', 'animated'))
    add('alpha/IMG_0001.HEIC', _encode(upright, 'HEIF', quality=90), written('format=HEIF', 'mode=RGB'))
    add('alpha/ten_bit.heic', _ten_bit_heic(96, 64), written('format=HEIF', 'mode=RGB'))
    add('alpha/burst.heic', _animation(upright, 'HEIF', quality=90), written('format=HEIF', 'mode=RGB', 'animated'))
    add('alpha/photo.jxl', _encode(upright, 'JXL', quality=95), written('format=JXL', 'mode=RGB', 'icc_srgb'))
    add('alpha/scan.jp2', _encode(upright, 'JPEG2000'), written('format=JPEG2000', 'mode=RGB'))
    # Names that say nothing, or lie: the bytes decide.
    add('alpha/IMG_0002', _encode(large, 'JPEG', quality=92), written('format=JPEG', 'mode=RGB'))
    add('alpha/export.img', _encode(upright, 'WEBP', lossless=True), written('format=WEBP', 'mode=RGB'))
    add('alpha/drawing.jpg', _encode(upright, 'PNG', compress_level=3), written('format=PNG', 'mode=RGB'))
    # Colours as a viewer shows them: embedded profiles converted to sRGB; an sRGB profile left as it is.
    srgb = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile('sRGB')).tobytes())
    srgb[24:36] = bytes(12)  # the profile's creation time: the corpus is the same bytes every time
    add('alpha/srgb_profile.png', _encode(upright, 'PNG', icc_profile=bytes(srgb)), written('format=PNG', 'mode=RGB', 'icc_srgb'))
    wide = quadrants(96, 64, WIDE_GAMUT_QUADRANTS)
    for name, fmt, suffix in zip(WIDE_GAMUT, ('JPEG', 'TIFF'), ('jpg', 'tif')):
        icc = profile(name)
        if icc is not None:
            options = {'quality': 95} if fmt == 'JPEG' else {}
            add(f'alpha/{name}.{suffix}', _encode(wide, fmt, icc_profile=icc, **options), written(
                f'format={fmt}', 'mode=RGB', 'icc_to_srgb', colours=checks(in_srgb(WIDE_GAMUT_QUADRANTS, icc))))
    # Names and shapes.
    add('alpha/UPPER CASE.JPG', _encode(large, 'JPEG', quality=94), written('format=JPEG', 'mode=RGB'))
    add('alpha/naïve café 猫.png', _encode(upright, 'PNG', compress_level=1), written('format=PNG', 'mode=RGB'))
    magenta, cyan = (220, 30, 200), (30, 200, 220)
    add('alpha/wide_600x6.png', _encode(Image.new('RGB', (600, 6), magenta), 'PNG'),
        written('format=PNG', 'mode=RGB', colours=(((0.5, 0.5), magenta),)))
    add('alpha/tall_6x600.jpg', _encode(Image.new('RGB', (6, 600), cyan), 'JPEG', quality=95),
        written('format=JPEG', 'mode=RGB', colours=(((0.5, 0.5), cyan),)))
    # Duplicates: the smallest source name is written, the others recorded.
    copy = _encode(quadrants(96, 64, (YELLOW, BLUE, GREEN, RED)), 'JPEG', quality=93)
    swapped = checks((YELLOW, BLUE, GREEN, RED))
    add('alpha/copy_1.jpg', copy, written('format=JPEG', 'mode=RGB', colours=swapped))
    for source in ('alpha/copy_2.jpg', 'alpha/nested/copy_0.jpg'):
        add(source, copy, Expected(DUPLICATE, colours=swapped, duplicate_of='alpha/copy_1.jpg'))
    # Label conflicts: the same bytes under two labels; every copy is quarantined.
    conflict = Expected(QUARANTINED, LABEL_CONFLICT, colours=q)
    add('alpha/conflict.png', _encode(upright, 'PNG', compress_level=9), conflict)
    add('beta/conflict.png', _encode(upright, 'PNG', compress_level=9), conflict)
    triple = _encode(upright, 'JPEG', quality=91)
    for source in ('alpha/triple_a.jpg', 'alpha/triple_b.jpg', 'beta/triple_c.jpg'):
        add(source, triple, conflict)
    # Good images of the second class.
    for i, colours in enumerate(((GREEN, RED, YELLOW, BLUE), (BLUE, YELLOW, RED, GREEN), (YELLOW, GREEN, BLUE, RED))):
        add(f'beta/good_{i}.jpg', _encode(quadrants(480, 320, colours), 'JPEG', quality=95),
            written('format=JPEG', 'mode=RGB', colours=checks(colours)))
    # Unusable inputs.
    jpeg, png = _encode(large, 'JPEG', quality=95), _encode(upright, 'PNG')
    add('beta/truncated.jpg', jpeg[:len(jpeg) * 2 // 5], quarantined(TRUNCATED))
    add('beta/truncated.png', png[:len(png) // 2], quarantined(TRUNCATED))
    webp = _encode(upright, 'WEBP', quality=80)
    add('beta/truncated.webp', webp[:len(webp) // 2], quarantined(TRUNCATED))
    broken = bytearray(png)
    broken[png.index(b'IDAT') + 6] = 0xFF  # the first deflate block now has the reserved block type
    add('beta/bad_deflate.png', bytes(broken), quarantined(CORRUPT))
    add('alpha/empty.jpg', b'', quarantined(EMPTY))
    add('beta/empty.png', b'', quarantined(EMPTY))
    add('beta/error_page.jpg', b'<!DOCTYPE html><html><body><h1>403 Forbidden</h1></body></html>\n',
        quarantined(NOT_AN_IMAGE))
    add('beta/notes.png', 'just some text, saved under an image name\n'.encode(), quarantined(NOT_AN_IMAGE))
    add('beta/netpbm.png', _encode(upright, 'PPM'), quarantined(UNSUPPORTED_FORMAT))
    add('beta/paintbrush.tiff', _encode(upright, 'PCX'), quarantined(UNSUPPORTED_FORMAT))
    add('beta/lab.tif', _encode(upright.convert('LAB'), 'TIFF'), quarantined(UNSUPPORTED_FORMAT))
    add('beta/float.tif', _encode(Image.new('F', (96, 64), 0.5), 'TIFF'), quarantined(UNSUPPORTED_FORMAT))
    add('beta/bomb.png', _bomb(30_000), quarantined(TOO_MANY_PIXELS))
    add('beta/over_the_cap.jpg', _encode(Image.new('RGB', (1250, 1000), RED), 'JPEG'), quarantined(TOO_MANY_PIXELS))
    add('beta/one_pixel.png', _encode(Image.new('RGB', (1, 1), RED), 'PNG'), quarantined(TOO_SMALL))
    add('beta/sliver_1x40.gif', _encode(Image.new('P', (1, 40)), 'GIF'), quarantined(TOO_SMALL))
    # Not image files: ignored, and counted.
    add('alpha/.DS_Store', b'\x00\x00\x00\x01Bud1' + bytes(100), Expected(IGNORED))
    # A macOS resource fork beside every copied image: image-named, but metadata, so ignored.
    add('alpha/._plain.jpg', b'\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ' + bytes(64), Expected(IGNORED))
    add('alpha/notes.txt', b'photographer: someone\n', Expected(IGNORED))
    add('beta/Thumbs.db', bytes(64), Expected(IGNORED))
    add('README.md', b'# the torture corpus\n', Expected(IGNORED))
    # Known other kinds, never read; a name that says nothing over bytes that are no image; an empty one.
    add('alpha/IMG_0001.MOV', b'\x00\x00\x00\x14ftypqt  ' + bytes(64), Expected(IGNORED))
    add('alpha/IMG_0001.AAE', b'<?xml version="1.0"?><plist/>\n', Expected(IGNORED))
    add('beta/LICENSE', b'Permission is hereby granted\n', Expected(IGNORED))
    add('beta/untitled', b'', Expected(IGNORED))
    return cases


def write_corpus(root):
    """Writes every case under ``root``; returns {source: Expected}."""
    expected = {}
    for source, (data, fate) in corpus().items():
        path = os.path.join(root, *source.split('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as stream:
            stream.write(data)
        expected[source] = fate
    return expected


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--output', required=True, help='folder to write <class>/<file> cases into')
    args = parser.parse_args(argv)
    expected = write_corpus(args.output)
    print(f'wrote {len(expected)} files under {args.output}; build them with: '
          f"build-dataset --input {args.output} {' '.join(BUILD_OPTIONS)}")


if __name__ == '__main__':
    main()
