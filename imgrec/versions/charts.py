"""The report's charts, drawn as SVG text: bars with their values, an optional line on a right-hand axis.

Drawn here rather than with a plotting library, whose import and layout cost a build's publish step
most of its second: a chart is a few dozen rectangles and texts. Every text is a ``<text>`` node holding
the words as written (a class named ``$x^2$`` stays that), and equal data give equal bytes.
"""
import math
from xml.sax.saxutils import escape

SVG_NS = 'http://www.w3.org/2000/svg'
PLOT_HEIGHT = 170
HEADROOM = 1.12  # the axis reaches past the tallest bar, so that its value fits above it
TOP = 30  # room for the title
LEFT = 56
RIGHT = 24
RIGHT_AXIS = 52  # room for a right-hand axis
CHAR = 6.2  # width of a character of the 11 px labels, for the room rotated labels need
FONT = 'font-family="sans-serif"'


def _number(value):
    """A tick or value label: integers as integers, others to three significant digits."""
    return str(int(value)) if float(value).is_integer() else f'{value:.3g}'


def _edge(value):
    """A histogram's bin edge: whole from 100 on, else three significant digits."""
    return str(round(value)) if abs(value) >= 100 else f'{value:.3g}'


def nice_ticks(top, count=5, whole=False):
    """Round ticks 0, step, 2 step ... reaching ``top`` at least (step 1, 2 or 5 times a power of ten;
    at least 1 when ``whole``)."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if whole:
        step = max(step, 1)
    ticks = [0]
    while ticks[-1] < top:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _text(x, y, words, size=11, anchor='middle', extra=''):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}"{extra}>'
            f'{escape(str(words))}</text>')


def _axis(parts, ticks, x, scale, anchor, label, label_x):
    """Tick labels and gridlines of a vertical axis at ``x`` (its labels on the side ``anchor`` says)."""
    for tick in ticks:
        y = TOP + PLOT_HEIGHT - scale(tick)
        parts.append(_text(x, y + 4, _number(tick), 10, anchor))
    parts.append(_text(label_x, TOP + PLOT_HEIGHT / 2, label, 11, 'middle',
                       f' transform="rotate(-90 {label_x:.1f} {TOP + PLOT_HEIGHT / 2:.1f})"'))


def bar_chart(title, names, values, *, ylabel, color, xlabel=None, line=None, rotate=None, edges=None, log=False):
    """One chart as SVG text.

    ``names``: a label under each bar (None: ``edges`` label the bar boundaries, a histogram's);
    ``values``: the bars' heights (counts), each written on its bar (a 0 of a histogram is left blank);
    ``line``: (values, axis label, colour) drawn as dots joined by a line on a right-hand axis from 0;
    ``rotate``: slant the bar labels (past 6 of them by default); ``log``: the edges are on a log scale,
    which only changes how they are labelled.
    """
    count = len(values)
    slot = 30 if names is not None else max(24.0, 300 / max(count, 1))
    right = RIGHT_AXIS if line else RIGHT
    rotate = (names is not None and count > 6) if rotate is None else rotate
    # Slanted labels hang below the axis, and the first one left of it: room for them, up to 60 characters.
    longest = max((len(str(name)) for name in names), default=1) if names is not None else 4
    first = min(len(str(names[0])), 60) * CHAR if names and rotate else 0
    left = max(LEFT, 0.5 * first - slot / 2 + 6)
    width = left + right + max(slot * count, 280)
    plot_width = width - left - right
    slot = plot_width / max(count, 1)
    below = 22 + (min(longest, 60) * CHAR * 0.87 if rotate else 0) + (18 if xlabel else 0)
    height = TOP + PLOT_HEIGHT + below + 6
    ticks = nice_ticks(max(values, default=0) * HEADROOM, whole=True)
    def scale(value):
        return PLOT_HEIGHT * value / ticks[-1]

    parts = [(f'<svg xmlns="{SVG_NS}" width="{width:.0f}" height="{height:.0f}" '
              f'viewBox="0 0 {width:.0f} {height:.0f}" {FONT}>'),
             f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
             _text(width / 2, 18, title, 13)]
    for tick in ticks:
        y = TOP + PLOT_HEIGHT - scale(tick)
        parts.append(f'<line x1="{left}" x2="{left + plot_width:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
    _axis(parts, ticks, left - 6, scale, 'end', ylabel, left - 40)
    bottom = TOP + PLOT_HEIGHT
    gap = 0.2 * slot if names is not None else 0.5
    for i, value in enumerate(values):
        x, tall = left + i * slot + gap / 2, scale(value)
        parts.append(f'<rect x="{x:.1f}" y="{bottom - tall:.1f}" width="{slot - gap:.1f}" height="{tall:.1f}" '
                     f'fill="{color}"/>')
    for i, value in enumerate(values):  # the values one after another, in bar order
        shown = '' if names is None and not value else _number(value)
        parts.append(_text(left + (i + 0.5) * slot, bottom - scale(value) - 3, shown, 9))
    for i, name in enumerate(names if names is not None else ()):
        x = left + (i + 0.5) * slot
        if rotate:
            parts.append(_text(x, bottom + 14, name, 11, 'end', f' transform="rotate(-60 {x:.1f} {bottom + 14:.1f})"'))
        else:
            parts.append(_text(x, bottom + 16, name, 11))
    if edges is not None:
        step = max(1, math.ceil(len(edges) / 7))
        for i in range(0, len(edges), step):
            parts.append(_text(left + i * slot, bottom + 16, _edge(edges[i]), 10))
    parts.append(f'<line x1="{left}" x2="{left + plot_width:.1f}" y1="{bottom}" y2="{bottom}" stroke="#444"/>')
    parts.append(f'<line x1="{left}" x2="{left}" y1="{TOP}" y2="{bottom}" stroke="#444"/>')
    if xlabel:
        parts.append(_text(left + plot_width / 2, height - 10, xlabel + (' (log scale)' if log else ''), 11))
    if line:
        points, label, line_color = line
        line_ticks = nice_ticks(max(points, default=0) * HEADROOM)

        def line_scale(value):
            return PLOT_HEIGHT * value / line_ticks[-1]

        axis_x = left + plot_width
        parts.append(f'<line x1="{axis_x:.1f}" x2="{axis_x:.1f}" y1="{TOP}" y2="{bottom}" stroke="#444"/>')
        _axis(parts, line_ticks, axis_x + 6, line_scale, 'start', label, width - 10)
        coords = [(left + (i + 0.5) * slot, bottom - line_scale(value)) for i, value in enumerate(points)]
        parts.append(f'<polyline fill="none" stroke="{line_color}" stroke-width="1.5" points="'
                     + ' '.join(f'{x:.1f},{y:.1f}' for x, y in coords) + '"/>')
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{line_color}"/>' for x, y in coords]
    parts.append('</svg>')
    return '\n'.join(parts)
