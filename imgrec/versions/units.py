"""How the inspection tools print sizes."""


def human_bytes(count):
    """'1.2 MB': a byte count in the largest unit that keeps it at 1 or more."""
    for unit in ('B', 'kB', 'MB', 'GB'):
        if count < 1000 or unit == 'GB':
            return f'{count:.0f} {unit}' if unit == 'B' else f'{count:.1f} {unit}'
        count /= 1000
