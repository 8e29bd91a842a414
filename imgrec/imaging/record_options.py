"""The options that decide a record's bytes, as one value from the command line down to the encoder.

They live with the image operations, not in the contract: what they mean (resize modes, the pixel cap's
default) and the encoder that completes them (this code's and Pillow's version) are this layer's, and
the contract stays free of Pillow. ``dataset.json`` keeps them as the plain ``record_options`` object that
``recorded`` gives; a refresh reuses a previous version's records only when that object is unchanged.
"""
import dataclasses

from imgrec.console.errors import UserError
from imgrec.imaging import image_ops

MAX_IMAGE_SIDE = 8192


@dataclasses.dataclass(frozen=True)
class RecordOptions:
    """Named as the build's options are (``--image_size``, ``--resize``...), with their defaults."""
    image_size: tuple  # (height, width)
    resize: str = 'crop'
    jpeg_quality: int = 90
    max_pixels: int = image_ops.DEFAULT_MAX_PIXELS
    min_size: int = 1

    def __post_init__(self):
        """Refuses what no encoder can apply, in the command line's one-line messages: the command line and
        ``build()`` construct this alike, and both get them."""
        size = self.image_size
        if len(size) != 2 or not all(isinstance(side, int) and not isinstance(side, bool) for side in size):
            raise UserError(f'--image_size must be N or HxW (e.g. 192 or 192x256), got {size!r}')
        shown = show_size(size)
        if min(size) < 1:
            raise UserError(f'--image_size must be at least 1x1, got {shown!r}')
        if max(size) > MAX_IMAGE_SIDE:
            raise UserError(f'--image_size must be at most {MAX_IMAGE_SIDE} a side, got {shown!r}')
        if self.resize not in image_ops.RESIZE_MODES:
            raise UserError(f"--resize must be one of {', '.join(image_ops.RESIZE_MODES)}, got {self.resize!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise UserError(f'--jpeg_quality must be between 1 and 100, got {self.jpeg_quality}')
        if self.max_pixels < 1 or self.min_size < 1:
            raise UserError('--max_pixels and --min_size must be at least 1')

    def recorded(self):
        """The ``record_options`` object of dataset.json: these options, and the encoder that applies them."""
        return dict(dataclasses.asdict(self), image_size=list(self.image_size), encoder=image_ops.encoder())

    @classmethod
    def from_recorded(cls, recorded):
        """The options a version's ``record_options`` object names (its encoder aside)."""
        values = {name: recorded[name] for name in NAMES}
        return cls(**dict(values, image_size=tuple(values['image_size'])))


NAMES = tuple(field.name for field in dataclasses.fields(RecordOptions))


def show_size(size) -> str:
    """(192, 192) -> '192'; (192, 256) -> '192x256': as --image_size is written."""
    height, width = size
    return str(height) if height == width else f'{height}x{width}'
