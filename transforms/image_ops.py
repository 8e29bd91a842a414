"""Decode, normalise, resize and re-encode one image: plain functions, testable without Beam.

Speed comes from never decoding more pixels than the target needs: JPEGs are decoded with libjpeg's
DCT scaling (``Image.draft``) to the smallest power-of-two reduction that still covers the target,
and everything else is shrunk with ``reducing_gap`` (an integer ``reduce`` before the final filter).
Both keep the result visually identical to a full decode (``benchmarks/build_throughput.py`` reports
the PSNR against the naive path).
"""
import io
import math

from PIL import Image, ImageOps, UnidentifiedImageError

RESIZE_MODES = ('crop', 'pad', 'stretch')
# Formats we decode. Anything else Pillow can identify (EPS, ICNS, PSD, ...) is refused, which also
# keeps Pillow's riskier plugins away from untrusted bytes.
ACCEPTED_FORMATS = ('JPEG', 'MPO', 'PNG', 'GIF', 'BMP', 'WEBP', 'TIFF')
# Transparent pixels are composited onto this colour (white, like a page or a browser would show them).
BACKGROUND = (255, 255, 255)
# Padding colour of ``--resize pad``.
PAD_COLOUR = (0, 0, 0)
# Default pixel cap (width x height), checked from the header before any pixel is decoded. At 4 bytes
# a pixel in the widest mode we convert through, it bounds one image's decoded buffer to ~400 MB.
DEFAULT_MAX_PIXELS = 100_000_000
# Our cap (checked from the header, configurable) replaces Pillow's global decompression-bomb limit.
Image.MAX_IMAGE_PIXELS = None
RESAMPLE = Image.Resampling.BILINEAR
REDUCING_GAP = 3.0
# EXIF orientations 5-8 swap width and height.
_TRANSPOSING_ORIENTATIONS = (5, 6, 7, 8)


class ImageRejected(Exception):
    """An input that cannot become a training image; ``reason`` is a stable code for reports."""

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


def _to_rgb(image, notes):
    """Converts any decoded mode to 8-bit RGB, compositing transparency onto ``BACKGROUND``."""
    if image.mode in ('I;16', 'I;16B', 'I;16L', 'I;16N', 'I'):
        # 16/32-bit greyscale: Pillow's convert() would clip at 255; scale the range down instead.
        notes['converted_from'] = image.mode
        image = image.convert('I') if image.mode != 'I' else image
        image = image.point(lambda value: value * (1 / 256)).convert('L')
    if image.mode == 'F':
        notes['converted_from'] = 'F'
        image = image.convert('L')
    has_alpha = image.mode in ('RGBA', 'LA', 'PA', 'La', 'RGBa') or 'transparency' in image.info
    if has_alpha:
        notes['alpha_composited'] = True
        rgba = image.convert('RGBA')
        image = Image.new('RGB', rgba.size, BACKGROUND)
        image.paste(rgba, mask=rgba.getchannel('A'))
        return image
    if image.mode != 'RGB':
        notes.setdefault('converted_from', image.mode)
        image = image.convert('RGB')
    return image


def decode(data, target, mode='crop', *, max_pixels=DEFAULT_MAX_PIXELS, min_side=1):
    """Decodes ``data`` to an upright 8-bit RGB image at no less detail than ``target`` needs.

    Returns (image, notes): ``notes`` records what was decided for this image (format, original size,
    orientation, conversions). Raises ImageRejected for anything that is not a usable image.
    """
    if not data:
        raise ImageRejected('empty', 'file is empty')
    try:
        image = Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise ImageRejected('not_an_image', 'not a recognised image format') from None
    except (OSError, SyntaxError, ValueError) as error:
        raise ImageRejected('corrupt', f'unreadable image header: {error}') from None
    if image.format not in ACCEPTED_FORMATS:
        raise ImageRejected('unsupported_format', f'{image.format} images are not accepted')
    width, height = image.size
    if width * height > max_pixels:
        raise ImageRejected('too_many_pixels',
                            f'{width}x{height} = {width * height} pixels exceeds the cap of {max_pixels}')
    if min(width, height) < min_side:
        raise ImageRejected('too_small', f'{width}x{height} is smaller than the minimum side {min_side}')
    notes = {'format': image.format, 'width': width, 'height': height, 'mode': image.mode}
    if getattr(image, 'n_frames', 1) > 1:
        notes['frames'] = image.n_frames  # Image.open is positioned on the first frame
    orientation = image.getexif().get(0x0112, 1)
    if image.format in ('JPEG', 'MPO'):
        upright = (height, width) if orientation in _TRANSPOSING_ORIENTATIONS else (width, height)
        needed = _decode_size_needed(*upright, target, mode)
        if orientation in _TRANSPOSING_ORIENTATIONS:
            needed = needed[::-1]
        image.draft(None, needed)
    try:
        image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as error:
        raise ImageRejected('corrupt', f'cannot decode image: {error}') from None
    if orientation != 1:
        notes['orientation'] = orientation
        image = ImageOps.exif_transpose(image)
    return _to_rgb(image, notes), notes


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
    image.save(out, 'JPEG', quality=quality)
    return out.getvalue()


def decode_resize_encode(data, target, mode='crop', quality=90, *, max_pixels=DEFAULT_MAX_PIXELS,
                         min_side=1):
    """The whole per-image step: returns (jpeg_bytes, notes) or raises ImageRejected."""
    image, notes = decode(data, target, mode, max_pixels=max_pixels, min_side=min_side)
    return encode_jpeg(resize(image, target, mode), quality), notes

