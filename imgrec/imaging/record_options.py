"""The options that decide a record's bytes, as one value from the command line down to the encoder.

They live with the image operations, not in the contract: what they mean (resize modes, the pixel cap's
default) and the encoder that completes them (this code's and Pillow's version) are this layer's, and
the contract stays free of Pillow. ``dataset.json`` keeps them as the plain ``record_options`` object that
``recorded`` gives; a refresh reuses a previous version's records only when that object is unchanged.
"""
import dataclasses

from imgrec.imaging import image_ops


@dataclasses.dataclass(frozen=True)
class RecordOptions:
    """Named as the build's options are (``--image_size``, ``--resize``...), with their defaults."""
    image_size: tuple  # (height, width)
    resize: str = 'crop'
    jpeg_quality: int = 90
    max_pixels: int = image_ops.DEFAULT_MAX_PIXELS
    min_size: int = 1

    def recorded(self):
        """The ``record_options`` object of dataset.json: these options, and the encoder that applies them."""
        return dict(dataclasses.asdict(self), image_size=list(self.image_size), encoder=image_ops.encoder())

    @classmethod
    def from_recorded(cls, recorded):
        """The options a version's ``record_options`` object names (its encoder aside)."""
        values = {name: recorded[name] for name in NAMES}
        return cls(**dict(values, image_size=tuple(values['image_size'])))


NAMES = tuple(field.name for field in dataclasses.fields(RecordOptions))
