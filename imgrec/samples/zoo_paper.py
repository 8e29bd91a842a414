"""The zoo's styles on paper: handwritten-like digits, printed pages, and objects on white.

Low-detail images on a light ground, the kinds the hash-and-thumbnail check of issue 39 took for copies
of each other: a digit is a dark stroke about the middle of a light square, a page is grey lines on
white, a product is a coloured blob on white. Each draw function is ``(label, index, seed, size) -> image``
(``imgrec.samples.zoo``); what makes two images of a class differ is drawn from ``zoo_draw.spread`` and
the image's own random stream.
"""
import functools

import numpy as np
from PIL import Image, ImageDraw

from imgrec.samples.zoo_draw import WORDS, font, hue_colour, image_rng, noisy, spread, warp, words

DIGITS = tuple('0123456789')
PAGES = ('letter', 'invoice', 'form', 'article', 'memo', 'table')
OBJECTS = ('bottle', 'mug', 'box', 'ball', 'lamp', 'book', 'phone', 'vase')


def draw_digit(label: str, index: int, seed: int, size: int) -> Image.Image:
    """A dark digit ``label`` on a light page, grey, ``size`` square, MNIST-like: drawn 4x large with
    Pillow's font at a varied scale, stroke, slant, turn and place, bent a little, then reduced."""
    rng = image_rng('digits', seed, label, index)
    scale, slant, turn, x, y, stroke = spread('digits', seed, label, index, 6)
    big = 4 * size
    glyph = Image.new('L', (big, big), 0)
    height = (0.45 + 0.4 * scale) * big
    ImageDraw.Draw(glyph).text((big / 2, big / 2), label, fill=255, font=font(round(height)), anchor='mm',
                               stroke_width=round(stroke * big / 22), stroke_fill=255)
    room = (big - 0.75 * height) / 2
    glyph = glyph.rotate((turn - 0.5) * 30, Image.Resampling.BILINEAR,
                         translate=(round((x - 0.5) * 1.6 * room), round((y - 0.5) * 1.6 * room)))
    shear = (slant - 0.5) * 0.7
    glyph = glyph.transform(glyph.size, Image.Transform.AFFINE, (1, shear, -shear * big / 2, 0, 1, 0),
                            Image.Resampling.BILINEAR)
    mask = warp(np.asarray(glyph), rng, 0.025)
    ink = np.asarray(Image.fromarray(mask).resize((size, size), Image.Resampling.LANCZOS), dtype=np.float64) / 255
    paper, dark = rng.uniform(215, 250), rng.uniform(0, 70)
    return noisy(Image.fromarray((paper * (1 - ink) + dark * ink).round().astype(np.uint8), 'L'), rng, 3)


def _fitting(rng, width, type_):
    """Random words that fill about ``width`` pixels in font ``type_`` (measured by its mean letter)."""
    letters = width / _letter_width(type_)
    text = ''
    while True:
        word = rng.choice(WORDS)
        if len(text) + len(word) + 1 > letters:
            return text
        text = f'{text} {word}' if text else word


@functools.lru_cache(maxsize=64)
def _letter_width(type_):
    return type_.getlength('the quick brown fox jumps over a lazy dog ') / 42


def _lines(draw, rng, box, line, ragged=True):
    """Grey text lines filling ``box`` (x0, y0, x1, y1) at ``line`` pixels a line, paragraphs apart;
    returns the y below the last."""
    x0, y, x1, bottom = box
    type_ = font(max(1, round(line * 0.8)))
    while y + line <= bottom:
        for _ in range(rng.randint(2, 6)):
            if y + line > bottom:
                break
            end = x1 if not ragged or rng.random() < 0.7 else x0 + (x1 - x0) * rng.uniform(0.3, 0.9)
            draw.text((x0, y), _fitting(rng, end - x0, type_), fill=rng.randint(20, 90), font=type_)
            y += line
        y += line * rng.uniform(0.4, 1.2)
    return y


def draw_page(label: str, index: int, seed: int, size: int) -> Image.Image:
    """A printed page of kind ``label``, grey, ``size`` tall and 0.77 as wide: text blocks, rules and
    boxes laid out as that kind of document is, drawn 2x large and reduced."""
    rng = image_rng('pages', seed, label, index)
    margin, line_frac, head_frac, split = spread('pages', seed, label, index, 4)
    height = 2 * size
    width = round(height * 0.77)
    page = Image.new('L', (width, height), rng.randint(235, 255))
    draw = ImageDraw.Draw(page)
    edge = round(width * (0.06 + 0.08 * margin))
    line = max(3, round(height * (0.018 + 0.02 * line_frac)))
    left, right = edge, width - edge
    top = edge + round(height * (0.04 + 0.12 * head_frac))
    draw.text((left, edge), words(rng, 3).title(), fill=10, font=font(round(line * (1.4 + head_frac))))
    if label == 'letter':
        _lines(draw, rng, (round(width * 0.6), edge, right, top + 3 * line), line)
        _lines(draw, rng, (left, top + 4 * line, right, height - edge - 3 * line), line)
    elif label == 'invoice':
        rows = rng.randint(4, 14)
        columns = sorted(rng.sample(range(1, 9), rng.randint(2, 4)))
        y = top + 2 * line
        for r in range(rows + 1):
            draw.line((left, y + r * line * 1.5, right, y + r * line * 1.5), fill=120)
        for c in columns:
            x = left + (right - left) * c / 9
            draw.line((x, y, x, y + rows * line * 1.5), fill=120)
        draw.rectangle((round(width * (0.5 + 0.3 * split)), y + rows * line * 1.5 + line, right,
                        y + rows * line * 1.5 + 2.5 * line), outline=30, width=2)
    elif label == 'form':
        y = top
        while y + 2 * line < height - edge:
            draw.text((left, y), words(rng, rng.randint(1, 3)) + ':', fill=40, font=font(line))
            x = left + round((right - left) * (0.3 + 0.3 * split))
            if rng.random() < 0.3:
                draw.rectangle((x, y, x + line, y + line), outline=40, width=2)
            else:
                draw.rectangle((x, y, right - rng.randint(0, (right - x) // 2), y + round(1.3 * line)), outline=60, width=2)
            y += round(line * rng.uniform(2, 3.2))
    elif label == 'article':
        middle = left + (right - left) * (0.35 + 0.3 * split)
        _lines(draw, rng, (left, top, middle - line, height - edge), line, ragged=False)
        figure = rng.random() < 0.5
        if figure:
            draw.rectangle((middle + line, top, right, top + (height - top) * 0.35), fill=rng.randint(140, 210))
        _lines(draw, rng, (middle + line, top + (height - top) * (0.4 if figure else 0), right, height - edge), line,
               ragged=False)
    elif label == 'memo':
        for n in range(rng.randint(2, 4)):
            draw.text((left, top + n * line * 1.4), words(rng, 2) + ': ' + words(rng, 3), fill=30, font=font(line))
        rule = top + rng.randint(3, 5) * line * 1.4
        draw.line((left, rule, right, rule), fill=0, width=3)
        _lines(draw, rng, (left, rule + line, right, round(height * (0.5 + 0.45 * split))), line)
    elif label == 'table':
        rows, cells = rng.randint(5, 16), rng.randint(2, 6)
        cell_w, cell_h = (right - left) / cells, line * 1.6
        for r in range(rows):
            for c in range(cells):
                box = (left + c * cell_w, top + r * cell_h, left + (c + 1) * cell_w, top + (r + 1) * cell_h)
                draw.rectangle(box, outline=90, fill=220 if r == 0 else None)
                draw.text((box[0] + 3, box[1] + 2), str(rng.randint(0, 10 ** rng.randint(1, 5))), fill=30,
                          font=font(line))
    else:
        raise ValueError(f'unknown page kind {label!r}')
    return noisy(page.resize((width // 2, size), Image.Resampling.LANCZOS), rng, 2)


def _object(draw, label, box, colour, rng):
    """Draws one product of kind ``label`` filling ``box`` (x0, y0, x1, y1); returns its label area."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    if label == 'bottle':
        draw.rectangle((x0 + w * 0.4, y0, x1 - w * 0.4, y0 + h * 0.25), fill=colour)
        draw.rounded_rectangle((x0 + w * 0.15, y0 + h * 0.2, x1 - w * 0.15, y1), w * 0.15, fill=colour)
        return x0 + w * 0.2, y0 + h * 0.5, x1 - w * 0.2, y0 + h * 0.75
    if label == 'mug':
        draw.ellipse((x0 + w * 0.55, y0 + h * 0.25, x1, y0 + h * 0.7), outline=colour, width=max(2, round(w * 0.08)))
        draw.rectangle((x0, y0 + h * 0.1, x0 + w * 0.75, y1), fill=colour)
        return x0 + w * 0.1, y0 + h * 0.4, x0 + w * 0.65, y0 + h * 0.6
    if label == 'box':
        depth = w * 0.2
        draw.polygon([(x0, y0 + depth), (x0 + depth, y0), (x1, y0), (x1 - depth, y0 + depth)], fill=colour)
        draw.rectangle((x0, y0 + depth, x1 - depth, y1), fill=colour, outline=(60, 60, 60))
        return x0 + w * 0.1, y0 + h * 0.45, x1 - depth - w * 0.1, y0 + h * 0.7
    if label == 'ball':
        draw.ellipse(box, fill=colour)
        draw.arc(box, rng.randint(0, 90), rng.randint(180, 300), fill=(255, 255, 255), width=max(1, round(w * 0.04)))
        return x0 + w * 0.25, y0 + h * 0.42, x1 - w * 0.25, y0 + h * 0.58
    if label == 'lamp':
        draw.polygon([(x0 + w * 0.25, y0), (x1 - w * 0.25, y0), (x1, y0 + h * 0.4), (x0, y0 + h * 0.4)], fill=colour)
        draw.rectangle((x0 + w * 0.46, y0 + h * 0.4, x1 - w * 0.46, y1 - h * 0.08), fill=(90, 90, 90))
        draw.rectangle((x0 + w * 0.25, y1 - h * 0.08, x1 - w * 0.25, y1), fill=(70, 70, 70))
        return x0 + w * 0.2, y0 + h * 0.15, x1 - w * 0.2, y0 + h * 0.3
    if label == 'book':
        draw.rectangle(box, fill=colour, outline=(40, 40, 40))
        draw.rectangle((x0, y0, x0 + w * 0.1, y1), fill=tuple(c // 2 for c in colour))
        return x0 + w * 0.2, y0 + h * 0.2, x1 - w * 0.1, y0 + h * 0.35
    if label == 'phone':
        draw.rounded_rectangle(box, w * 0.12, fill=(30, 30, 30))
        draw.rectangle((x0 + w * 0.08, y0 + h * 0.08, x1 - w * 0.08, y1 - h * 0.1), fill=colour)
        return x0 + w * 0.15, y0 + h * 0.4, x1 - w * 0.15, y0 + h * 0.55
    if label == 'vase':
        draw.ellipse((x0, y0 + h * 0.3, x1, y1), fill=colour)
        draw.rectangle((x0 + w * 0.3, y0, x1 - w * 0.3, y0 + h * 0.5), fill=colour)
        return x0 + w * 0.2, y0 + h * 0.55, x1 - w * 0.2, y0 + h * 0.75
    raise ValueError(f'unknown object kind {label!r}')


def draw_object(label: str, index: int, seed: int, size: int) -> Image.Image:
    """One product of kind ``label`` on a white ground, catalogue style, RGB, ``size`` square: a soft
    shadow, the object in a colour of its own, a printed label on it and a caption line under it."""
    rng = image_rng('objects', seed, label, index)
    hue, scale, x, y, aspect, value = spread('objects', seed, label, index, 6)
    big = 2 * size
    image = Image.new('RGB', (big, big), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    h = big * (0.35 + 0.4 * scale)
    w = h * (0.45 + 0.6 * aspect)
    w = min(w, big * 0.85)
    x0 = big * 0.05 + (big * 0.9 - w) * x
    y0 = big * 0.04 + (big * 0.8 - h) * y
    draw.ellipse((x0, y0 + h * 0.93, x0 + w, y0 + h * 1.07), fill=(222, 222, 222))
    colour = hue_colour(hue, rng.uniform(0.35, 0.95), 0.35 + 0.6 * value)
    area = _object(draw, label, (x0, y0, x0 + w, y0 + h), colour, rng)
    draw.rectangle(area, fill=(250, 250, 245))
    name = words(rng, 1).upper()
    draw.text(((area[0] + area[2]) / 2, (area[1] + area[3]) / 2), name, fill=(20, 20, 20),
              font=font(round((area[3] - area[1]) * 0.7)), anchor='mm')
    draw.text((big * 0.05, big * 0.92), f'{name.title()} {rng.randint(100, 9999)}  ${rng.randint(3, 300)}.99',
              fill=(60, 60, 60), font=font(round(big * 0.05)))
    return image.resize((size, size), Image.Resampling.LANCZOS)
