"""Decides, before the job runs, how a build relates to the version LATEST names: which labels keep
their numbers, and whether that version's records can be reused (an incremental refresh) or not.

Reuse needs every option that shapes a record to be what it was (``RECORD_OPTIONS``, and the encoder:
this code's and Pillow's version), a record index, and labels that keep their numbers. Otherwise the
build says why in one line and decodes everything.
"""
import dataclasses

from apache_beam.io.filesystems import FileSystems

from contract import layout, metadata
from imgrec_imaging import image_ops
from imgrec_storage import fileio

# Options whose value changes the bytes of a record.
RECORD_OPTIONS = ('image_size', 'resize', 'jpeg_quality', 'max_pixels', 'min_size')
# Recorded options that name the build, not its content: they differ between otherwise equal builds.
_NAMING_OPTIONS = ('output', 'version', 'name')


def record_options(config):
    """The record-shaping options and the encoder, as dataset.json records them."""
    options = config.describe()
    return dict({name: options[name] for name in RECORD_OPTIONS}, encoder=image_ops.encoder())


@dataclasses.dataclass(frozen=True)
class RefreshPlan:
    previous: str = None          # the version LATEST named when the build started
    reuse_dir: str = None         # that version's folder, when its records are reused
    document: dict = None         # its dataset.json, when reused
    keep_labels: tuple = None     # its label order: new classes are appended to it
    full_reason: str = None       # why nothing is reused, when there was a version to reuse
    same_options: bool = False    # every option as in the previous version

    @property
    def incremental(self):
        return self.reuse_dir is not None

    def describe(self):
        """The ``refresh`` object of dataset.json, less the counts the job adds."""
        return {'previous': self.previous, 'mode': 'incremental' if self.incremental else 'full',
                'full_reason': self.full_reason}


def _load(version_dir, policy):
    """The version's dataset.json, or None when it has none this code can read."""
    path = layout.join(version_dir, layout.DATASET_JSON)
    if not FileSystems.exists(path):
        return None
    try:
        return metadata.loads(fileio.read_bytes(path, policy))
    except ValueError:  # another format_version
        return None


def _comparable(options):
    return {name: value for name, value in options.items() if name not in _NAMING_OPTIONS}


def plan(config):
    """The RefreshPlan of ``config`` (its ``previous`` filled in by the pre-flight checks)."""
    previous = config.previous.version if config.previous else None
    if previous is None:
        return RefreshPlan()
    previous_dir = layout.join(config.output, previous)
    document = _load(previous_dir, config.retry_policy())
    if document is None:
        return RefreshPlan(previous=previous,
                           full_reason=f'LATEST names {previous}, which has no dataset.json this build can read')
    labels = tuple(document['labels'])
    same_options = (_comparable(document.get('options', {})) == _comparable(config.describe())
                    and document.get('record_options') == record_options(config))
    base = RefreshPlan(previous=previous, keep_labels=labels, same_options=same_options)
    reason = _why_not_reuse(config, document, labels)
    if reason:
        return dataclasses.replace(base, full_reason=reason)
    return dataclasses.replace(base, reuse_dir=previous_dir, document=document)


def _why_not_reuse(config, document, labels):
    if config.full:
        return '--full was given'
    if 'index' not in document or 'record_options' not in document:
        return f"version {document['version']} has no record index (built before incremental refresh)"
    before, now = document['record_options'], record_options(config)
    for name in (*RECORD_OPTIONS, 'encoder'):
        if before.get(name) != now[name]:
            shown = {'image_size': lambda v: 'x'.join(map(str, v))}.get(name, str)
            return (f"{'the encoder' if name == 'encoder' else '--' + name} changed since version "
                    f"{document['version']} ({shown(before.get(name))} -> {shown(now[name])})")
    if config.labels is not None and tuple(config.labels[:len(labels)]) != labels:
        return f"the --labels file does not keep the label numbers of version {document['version']}"
    return None


def label_order(config, refresh):
    """How the label order is decided, as dataset.json records it."""
    if config.labels is not None:
        return f'--labels file {config.labels_file}'
    if refresh.keep_labels is not None:
        return f'version {refresh.previous}, new classes appended in sorted order'
    return 'sorted class names'

