"""Decode, normalise, resize and re-encode one image: plain functions, testable without Beam.

Speed comes from never decoding more pixels than the target needs: JPEGs are decoded with libjpeg's
DCT scaling (``Image.draft``) to the smallest power-of-two reduction that still covers the target,
and everything else is shrunk with ``reducing_gap`` (an integer ``reduce`` before the final filter).
Both keep the result visually identical to a full decode (``benchmarks/build_throughput.py`` reports
the PSNR against the naive path).

AVIF is Pillow's own; HEIC/HEIF comes from pillow-heif (libheif), JPEG XL from pillow-jxl-plugin (jxl-oxide),
JPEG 2000 from Pillow's OpenJPEG. Each is registered here, so any process that decodes has them.

Colours are shown as a viewer shows them: an embedded ICC profile (other than sRGB itself) is converted to
sRGB with Pillow's LittleCMS before resizing, with one rendering intent, so the same Pillow gives the same
pixels on any machine; an image without one is left as it is (``_to_srgb``).

Every format decision is made per image and returned in ``notes``; an input that cannot become a
training image raises ImageRejected with a reason code, from its header alone where that suffices
(format, pixel mode, pixel cap, minimum size), so a bomb is refused before a pixel is decoded.
"""
import functools
import io
import math

import PIL
import pillow_heif
import pillow_jxl.JpegXLImagePlugin  # registers JPEG XL with Pillow as it is imported
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from imgrec.contract.reasons import CORRUPT, EMPTY, NOT_AN_IMAGE, TOO_MANY_PIXELS, TOO_SMALL, TRUNCATED, UNSUPPORTED_FORMAT
from imgrec.imaging import perceptual_hash

RESIZE_MODES = ('crop', 'pad', 'stretch')
# Formats we decode. Anything else Pillow can identify (EPS, ICNS, PSD, PPM...) is refused, which also
# keeps Pillow's riskier plugins away from untrusted pixel data.
ACCEPTED_FORMATS = ('JPEG', 'MPO', 'PNG', 'GIF', 'BMP', 'WEBP', 'TIFF', 'AVIF', 'HEIF', 'JXL', 'JPEG2000')
# One decode thread each: the decode threads of a build (decoder_pool) use the cores; no thumbnails or depth
# maps, which only cost memory. JPEG XL decodes as it opens: --max_pixels reads its header first (jxl_size).
pillow_heif.register_heif_opener(thumbnails=False, depth_images=False, aux_images=False, decode_threads=1)
pillow_jxl.JpegXLImagePlugin.DECODE_THREADS = 0
# Transparent pixels are composited onto this colour (white, like a page or a browser would show them).
BACKGROUND = (255, 255, 255)
# Padding colour of ``--resize pad``.
PAD_COLOUR = (0, 0, 0)
# Default pixel cap (width x height), checked from the header before any pixel is decoded.
DEFAULT_MAX_PIXELS = 100_000_000
# Bump when a change here changes the bytes written for the same input: a refresh then re-decodes all.
ENCODER_VERSION = 2  # 2: ICC profiles converted to sRGB


def encoder():
    """What decides the encoded bytes besides the options: this module's version and Pillow's."""
    return f'{ENCODER_VERSION}/pillow-{PIL.__version__}'

# Memory bound: decoding one image holds at most about BYTES_PER_PIXEL bytes per header pixel at once,
# plus its file: the decoded buffer and one converted copy (Pillow keeps RGB, RGBA, LA and CMYK at 4 bytes
# a pixel, 16-bit grey at 2, P and L at 1). The codecs of CODEC_BYTES_PER_PIXEL keep their own copy: libwebp,
# libavif, libheif and jxl-oxide about as much again, OpenJPEG 4 bytes a sample (16 a pixel with alpha). With
# --max_pixels at its default that is ~1 GB an image (2 GB for WebP, 2.8 GB for JPEG 2000); a JPEG decoded with draft needs
# that divided by the square of its DCT scale (up to 64x less). tests/test_image_formats.py measures it.
BYTES_PER_PIXEL = 10
CODEC_BYTES_PER_PIXEL = {'WEBP': 20, 'AVIF': 20, 'HEIF': 20, 'JXL': 20, 'JPEG2000': 28}
# Our cap (checked from the header, configurable) replaces Pillow's global decompression-bomb limit.
Image.MAX_IMAGE_PIXELS = None
RESAMPLE = Image.Resampling.BILINEAR
REDUCING_GAP = 3.0
_ORIENTATION_TAG = 0x0112
# EXIF orientations 5-8 swap width and height.
_TRANSPOSING_ORIENTATIONS = (5, 6, 7, 8)
_TURNED_BY_DECODER = ('HEIF', 'JXL')
_ALPHA_MODES = ('RGBA', 'LA')  # pasted onto the background as they are
_SIXTEEN_BIT_MODES = ('I;16', 'I;16B', 'I;16L', 'I;16N', 'I')  # 'I' (32-bit) is read as 16-bit too
# Pixel modes with a conversion to RGB we trust. Pillow also opens Lab, HSV and float images, but its
# conversions of those give wrong colours, so they are refused.
ACCEPTED_MODES = ('1', 'L', 'P', 'RGB', 'RGBX', 'CMYK', 'YCbCr', 'LA', 'PA', 'La', 'RGBA', 'RGBa') + _SIXTEEN_BIT_MODES


class ImageRejected(Exception):
    """An input that cannot become a training image; ``reason`` is a code of ``records.REASONS``."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason
        self.message = message


def parse_image_size(text):
    """'192' -> (192, 192); '192x256' -> (192, 256), as (height, width)."""
    parts = text.lower().split('x')
    if len(parts) not in (1, 2) or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--image_size must be N or HxW (e.g. 192 or 192x256), got {text!r}")
    height, width = (int(parts[0]), int(parts[-1]))
    if height < 1 or width < 1:
        raise ValueError(f'--image_size must be at least 1x1, got {text!r}')
    return height, width


def _decode_size_needed(width, height, target, mode):
    """Smallest (width, height) a decode may shrink to and still give ``mode`` full detail."""
    target_h, target_w = target
    if mode == 'stretch':
        return target_w, target_h
    scales = (target_w / width, target_h / height)
    scale = max(scales) if mode == 'crop' else min(scales)
    return max(1, math.ceil(width * scale)), max(1, math.ceil(height * scale))


def _uninverted(image, notes):
    """Pillow reads every CMYK JPEG with Adobe's inverted polarity; without Adobe's APP14 marker the values
    are plain CMYK (as browsers read them), so the inversion is undone."""
    if image.mode == 'CMYK' and notes['format'] in ('JPEG', 'MPO') and 'adobe' not in image.info:
        notes['cmyk_not_inverted'] = True
        return image.point(lambda value: 255 - value)
    return image


def _to_rgb(image, notes):
    """Converts any decoded mode to 8-bit RGB, compositing transparency onto ``BACKGROUND``."""
    if image.mode in _SIXTEEN_BIT_MODES:
        # 16-bit greyscale: convert() would clip at 255, so scale 0..65535 down to 0..255 instead.
        if image.mode not in ('I;16', 'I'):
            image = image.convert('I')
        image = image.point(lambda value: value * (1 / 256)).convert('L')
    if image.mode in _ALPHA_MODES or image.mode in ('PA', 'La', 'RGBa') or 'transparency' in image.info:
        notes['alpha_composited'] = True
        if image.mode not in _ALPHA_MODES:
            image = image.convert('RGBA')  # palette or colour-key transparency, premultiplied alpha
        canvas = Image.new('RGB', image.size, BACKGROUND)
        canvas.paste(image, mask=image)  # RGBA and LA paste onto RGB as they are, through their alpha
        return canvas
    return image if image.mode == 'RGB' else image.convert('RGB')


# ICC colour spaces and the pixel mode their transform reads; the transform writes RGB.
_PROFILE_MODES = {'RGB': 'RGB', 'CMYK': 'CMYK', 'GRAY': 'L'}
# What an embedded profile came to (a decoding decision): converted to sRGB, sRGB already, or left unused
# (unreadable, or of another colour space than the pixels: the plain conversion is used).
ICC_CONVERTED, ICC_SRGB, ICC_UNUSED = 'icc_to_srgb', 'icc_srgb', 'icc_unused'
_SRGB = ImageCms.createProfile('sRGB')


@functools.lru_cache(maxsize=32)
def _profile_transform(profile):
    """(the pixel mode it reads, the transform to sRGB) of an ICC profile's bytes, or the decision when there
    is nothing to convert: ICC_SRGB, or ICC_UNUSED for a profile LittleCMS cannot read. Relative colorimetric
    (what browsers use), no cache inside the transform, so decode threads share it."""
    try:
        opened = ImageCms.ImageCmsProfile(io.BytesIO(profile))
        mode = _PROFILE_MODES.get(opened.profile.xcolor_space.strip())
        if (opened.profile.profile_description or '').startswith('sRGB'):
            return ICC_SRGB
        if mode is None:
            return ICC_UNUSED
        return mode, ImageCms.buildTransform(opened, _SRGB, mode, 'RGB', ImageCms.Intent.RELATIVE_COLORIMETRIC,
                                             ImageCms.Flags.NOCACHE)
    except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
        return ICC_UNUSED


def _reduced(image, target, resize_mode):
    """``image`` shrunk by the integer factor that still leaves ``REDUCING_GAP`` times the detail ``target``
    needs, as ``resize`` would reduce it first anyway: a profile is then converted on 1/factor^2 of the pixels
    (a 12 MP HEIC for 224x224: 1/16)."""
    width, height = image.size
    needed_width, needed_height = _decode_size_needed(width, height, target, resize_mode)
    factor = int(min(width / needed_width, height / needed_height) / REDUCING_GAP)
    return image.reduce(factor) if factor > 1 else image


def _to_srgb(image, notes, target, resize_mode):
    """8-bit sRGB of a decoded, upright image: its embedded ICC profile applied (before the plain conversion
    for CMYK and grey profiles, after it for RGB ones; on the image ``_reduced`` for ``target``), or the plain
    conversion alone."""
    profile = image.info.get('icc_profile')
    found = _profile_transform(bytes(profile)) if profile else None
    image = _uninverted(image, notes)
    if found is None:
        return _to_rgb(image, notes)
    if isinstance(found, str):
        notes['icc'] = found
        return _to_rgb(image, notes)
    mode, transform = found
    if mode != 'RGB' and image.mode == mode:
        notes['icc'] = ICC_CONVERTED
        return transform.apply(_reduced(image, target, resize_mode))
    rgb = _to_rgb(image, notes)
    if mode != 'RGB':
        notes['icc'] = ICC_UNUSED
        return rgb
    notes['icc'] = ICC_CONVERTED
    return transform.apply(_reduced(rgb, target, resize_mode))


def _orientation(image, notes):
    """The EXIF orientation (1-8); 1 when absent or unreadable, since the pixels may still be fine."""
    try:
        orientation = image.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # Pillow's EXIF parser raises several types on garbage; the image is not at fault
        notes['exif_unreadable'] = True
        return 1
    return orientation if orientation in range(1, 9) else 1


# JPEG XL's SizeHeader (ISO 18181-1, A.2): the width as a ratio of the height, by its 3-bit code (0: given).
_JXL_RATIOS = ((0, 0), (1, 1), (12, 10), (4, 3), (3, 2), (16, 9), (5, 4), (2, 1))
_JXL_SIGNATURE, _JXL_CONTAINER = b'\xff\x0a', b'\x00\x00\x00\x0cJXL \r\n\x87\n'


def _jxl_codestream(data):
    """The start of a JPEG XL file's codestream: the file itself, or the first 'jxlc' or 'jxlp' box of its
    container; None when it cannot be found."""
    if data.startswith(_JXL_SIGNATURE):
        return data
    start = 0
    while start + 8 <= len(data):
        size, kind = int.from_bytes(data[start:start + 4], 'big'), data[start + 4:start + 8]
        if kind == b'jxlc':
            return data[start + 8:]
        if kind == b'jxlp':
            return data[start + 12:]  # after the part's index
        if size < 8:
            return None
        start += size
    return None


def jxl_size(data):
    """(width, height) from a JPEG XL file's header, or None: the JPEG XL plugin decodes as it opens a file,
    so ``--max_pixels`` is checked on this first."""
    codestream = _jxl_codestream(data) if data.startswith((_JXL_SIGNATURE, _JXL_CONTAINER)) else None
    if codestream is None or not codestream.startswith(_JXL_SIGNATURE) or len(codestream) < 12:
        return None
    bits, position = int.from_bytes(codestream[2:12], 'little'), 0

    def read(count):
        nonlocal position
        value = (bits >> position) & ((1 << count) - 1)
        position += count
        return value

    def side(small):
        if small:
            return (read(5) + 1) * 8
        return 1 + read((9, 13, 18, 30)[read(2)])

    small = read(1)
    height = side(small)
    ratio = read(3)
    if ratio:
        across, down = _JXL_RATIOS[ratio]
        return height * across // down, height
    return side(small), height


def _open(data, max_pixels, min_side):
    """Opens ``data`` and checks what the header says, before any pixel is decoded."""
    if not data:
        raise ImageRejected(EMPTY, 'file is empty')
    declared = jxl_size(data)
    if declared is not None and declared[0] * declared[1] > max_pixels:
        width, height = declared
        raise ImageRejected(TOO_MANY_PIXELS,
                            f'{width}x{height} = {width * height} pixels exceeds --max_pixels {max_pixels}')
    try:
        image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ImageRejected(NOT_AN_IMAGE, 'not a recognised image format') from None
    except Exception as error:  # a known format whose header is broken
        raise ImageRejected(_failure_reason(error, data), f'unreadable image header: {_describe(error)}') from None
    if image.format not in ACCEPTED_FORMATS:
        raise ImageRejected(UNSUPPORTED_FORMAT, f'{image.format} images are not accepted')
    if image.mode not in ACCEPTED_MODES:
        raise ImageRejected(UNSUPPORTED_FORMAT, f'{image.format} images in pixel mode {image.mode} are not accepted')
    width, height = image.size
    if width * height > max_pixels:
        raise ImageRejected(TOO_MANY_PIXELS,
                            f'{width}x{height} = {width * height} pixels exceeds --max_pixels {max_pixels}')
    if min(width, height) < min_side:
        raise ImageRejected(TOO_SMALL, f'{width}x{height} has a side under --min_size {min_side}')
    return image


def _failure_reason(error, data=b''):
    """TRUNCATED when Pillow ran out of data or the header declares more bytes than there are, else CORRUPT."""
    if isinstance(error, EOFError) or 'truncated' in str(error).lower():
        return TRUNCATED
    declared = 0  # WebP (RIFF) and BMP headers state the file size; other formats only fail as above
    if data[:4] == b'RIFF':
        declared = int.from_bytes(data[4:8], 'little') + 8
    elif data[:2] == b'BM':
        declared = int.from_bytes(data[2:6], 'little')
    return TRUNCATED if declared > len(data) else CORRUPT


def _describe(error):
    return f'{type(error).__name__}: {error}'.splitlines()[0]


def decode(data, target, mode='crop', *, max_pixels=DEFAULT_MAX_PIXELS, min_side=1):
    """Decodes ``data`` to an upright 8-bit RGB image at no less detail than ``target`` needs.

    Returns (image, notes): ``notes`` records what was decided for this image (source format, mode and
    size, orientation applied, first frame of an animation, transparency composited, draft scale).
    Raises ImageRejected for anything that is not a usable image; never anything else for bad bytes.
    """
    image = _open(data, max_pixels, min_side)
    width, height = image.size
    notes = {'format': image.format, 'mode': image.mode, 'width': width, 'height': height}
    try:
        if getattr(image, 'is_animated', False):
            notes['animated'] = True  # Image.open leaves every format on its first frame
        # PNG may keep its EXIF after the pixels (Pillow would load them to look): read that once loaded.
        # HEIF and JPEG XL turn their pixels as they decode, by their own boxes and header, which their
        # standards make the authority over an EXIF tag (pillow-heif sets it to 1; JPEG XL's is ignored).
        orientation = (1 if image.format in _TURNED_BY_DECODER else None if image.format == 'PNG'
                       else _orientation(image, notes))
        if image.format in ('JPEG', 'MPO'):
            transposing = orientation in _TRANSPOSING_ORIENTATIONS
            needed = _decode_size_needed(*((height, width) if transposing else (width, height)), target, mode)
            drafted = image.draft(None, needed[::-1] if transposing else needed)
            if drafted is not None and image.size != (width, height):
                notes['draft_scale'] = round(width / drafted[1][2])  # box: the full image in drafted pixels
        image.load()
        if orientation is None:
            orientation = _orientation(image, notes)
        if orientation != 1:
            notes['orientation'] = orientation
            ImageOps.exif_transpose(image, in_place=True)  # a no-op for TIFF, which Pillow turns as it loads
        return _to_srgb(image, notes, target, mode), notes
    except Exception as error:  # Pillow's decoders raise many types on bad data; none may fail the job
        raise ImageRejected(_failure_reason(error, data),
                            f"cannot decode {notes['format']}: {_describe(error)}") from None


def decisions(notes):
    """The per-image decisions in ``notes`` as short strings, counted in dataset.json and metrics."""
    found = [f"format={notes['format']}", f"mode={notes['mode']}"]
    found += [f'{key}={notes[key]}' for key in ('orientation', 'draft_scale') if key in notes]
    found += [key for key in ('animated', 'alpha_composited', 'cmyk_not_inverted', 'exif_unreadable') if key in notes]
    found += [notes['icc']] if 'icc' in notes else []
    return tuple(found)


def resize(image, target, mode='crop'):
    """Resizes an RGB image to exactly ``target`` (height, width).

    crop: keep the aspect ratio, cover the target and centre-crop; pad: keep the aspect ratio, fit
    inside and pad with ``PAD_COLOUR``; stretch: ignore the aspect ratio.
    """
    target_h, target_w = target
    width, height = image.size
    if mode == 'stretch':
        return image.resize((target_w, target_h), RESAMPLE, reducing_gap=REDUCING_GAP)
    if mode == 'crop':
        scale = max(target_w / width, target_h / height)
        box_w, box_h = target_w / scale, target_h / scale
        # Clamped: float rounding can put an edge a hair outside the image, which Pillow refuses.
        left, top = max(0.0, (width - box_w) / 2), max(0.0, (height - box_h) / 2)
        box = (left, top, min(float(width), left + box_w), min(float(height), top + box_h))
        return image.resize((target_w, target_h), RESAMPLE, box=box, reducing_gap=REDUCING_GAP)
    if mode == 'pad':
        scale = min(target_w / width, target_h / height)
        inner = (max(1, min(target_w, round(width * scale))), max(1, min(target_h, round(height * scale))))
        canvas = Image.new('RGB', (target_w, target_h), PAD_COLOUR)
        canvas.paste(image.resize(inner, RESAMPLE, reducing_gap=REDUCING_GAP),
                     ((target_w - inner[0]) // 2, (target_h - inner[1]) // 2))
        return canvas
    raise ValueError(f'unknown resize mode {mode!r}; expected one of {", ".join(RESIZE_MODES)}')


def encode_jpeg(image, quality):
    """Baseline JPEG bytes with no metadata, so equal pixels give equal bytes."""
    out = io.BytesIO()
    image.save(out, 'JPEG', quality=quality, comment=b'')  # not the source's comment (Pillow keeps info)
    return out.getvalue()


def upscaled(width, height, target, mode='crop'):
    """Whether ``resize`` enlarges a ``width`` x ``height`` image to reach ``target`` (height, width)."""
    target_h, target_w = target
    if mode == 'stretch':
        return target_w > width or target_h > height
    scales = (target_w / width, target_h / height)
    return (max(scales) if mode == 'crop' else min(scales)) > 1


def decode_resize_encode(data, options, *, with_hash=False):
    """The whole per-image step under ``options`` (``record_options.RecordOptions``): returns
    (jpeg_bytes, notes) or raises ImageRejected.

    ``notes`` also holds the source's upright size (``source_width``, ``source_height``), whether it was
    ``upscaled``, and, ``with_hash``, the ``perceptual_hash`` (hex: ``perceptual_hash.perceptual_hashes``) of the decoded image, before resizing:
    the hash of the source as decoding holds it, the same whatever the resize mode.
    """
    image, notes = decode(data, options.image_size, options.resize, max_pixels=options.max_pixels,
                          min_side=options.min_size)
    width, height = notes['width'], notes['height']
    if notes.get('orientation') in _TRANSPOSING_ORIENTATIONS:
        width, height = height, width
    notes.update(source_width=width, source_height=height,
                 upscaled=upscaled(width, height, options.image_size, options.resize))
    if with_hash:
        notes['perceptual_hash'] = perceptual_hash.to_hex(perceptual_hash.perceptual_hashes(image))
    return encode_jpeg(resize(image, options.image_size, options.resize), options.jpeg_quality), notes

