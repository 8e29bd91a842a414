"""Decides, before the job runs, how a build relates to the version LATEST names: which labels keep
their numbers, and whether that version's records can be reused (an incremental refresh) or not.

Reuse needs every option that shapes a record to be what it was (``RecordOptions``, and the encoder:
this code's and Pillow's version), a record index, and labels that keep their numbers. Otherwise the
build says why in one line and decodes everything.
"""
import dataclasses


from contract import index, layout, version_ref
from imgrec_console.errors import UserError
from imgrec_imaging import perceptual_hash, record_options
from imgrec_storage import storage

# Index columns every reused record must have: facts of the image that a refresh carries over.
_IMAGE_COLUMNS = (index.PERCEPTUAL_HASH, index.SOURCE_WIDTH, index.SOURCE_HEIGHT, index.UPSCALED)
# Index columns of the local stamp besides the mtime: without them an unchanged stamp proves too little.
_STAMP_COLUMNS = (index.SOURCE_CTIME_NS, index.SOURCE_INODE)
# Recorded options that name the build, not its content: they differ between otherwise equal builds.
_NAMING_OPTIONS = ('output', 'version', 'name')


@dataclasses.dataclass(frozen=True)
class RefreshPlan:
    previous: str = None          # the version LATEST named when the build started
    reuse_dir: str = None         # that version's folder, when its records are reused
    document: dict = None         # its dataset.json, when reused
    keep_labels: tuple = None     # its label order: new classes are appended to it
    full_reason: str = None       # why nothing is reused, when there was a version to reuse
    same_options: bool = False    # every option as in the previous version
    same_splits: bool = False     # the same --splits: its images' splits can be kept (near-duplicate groups)
    published_dir: str = None     # that version's folder, when its images keep their splits (no --resplit)
    published_document: dict = None  # its dataset.json then

    @property
    def keeps_published(self):
        return self.published_dir is not None

    @property
    def incremental(self):
        return self.reuse_dir is not None

    def describe(self):
        """The ``refresh`` object of dataset.json, less the counts the job adds."""
        return {'previous': self.previous, 'mode': 'incremental' if self.incremental else 'full',
                'full_reason': self.full_reason}


def _load(config, previous):
    """The dataset.json of the version LATEST names (``previous``), by the contract's rules; None when its
    format is not this code's and ``--full`` was given (a full build needs nothing from it).

    Any other mistake (no dataset.json there, a format this code does not read without ``--full``) is
    the user's to fix: a UserError in one line, the same line every tool gives.
    """
    files = storage.storage_for(config.output, config.retry_policy())
    try:
        return version_ref.read_version(config.output, previous, files.read, files.exists).document
    except version_ref.FormatVersionError as error:
        if config.full:
            return None
        raise UserError(str(error)) from None
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None


def _comparable(options):
    return {name: value for name, value in options.items() if name not in _NAMING_OPTIONS}


def plan(config, latest):
    """The RefreshPlan of ``config`` against ``latest`` (a ``publication.Latest``: what LATEST named when
    the pre-flight checks read it)."""
    previous = latest.version if latest else None
    if previous is None:
        return RefreshPlan()
    previous_dir = layout.join(config.output, previous)
    document = _load(config, previous)
    if document is None:
        return RefreshPlan(previous=previous, full_reason=f'--full was given (version {previous} is of a format '
                                                          f'this code does not read)')
    labels = tuple(document['labels'])
    same_options = (_comparable(document.get('options', {})) == _comparable(config.describe())
                    and document.get('record_options') == config.record_options.recorded())
    same_splits = document.get('options', {}).get('splits') == config.describe()['splits']
    keeps = same_splits and not config.resplit and 'index' in document
    base = RefreshPlan(previous=previous, keep_labels=labels, same_options=same_options, same_splits=same_splits,
                       published_dir=previous_dir if keeps else None, published_document=document if keeps else None)
    reason = _why_not_reuse(config, document, labels)
    if reason:
        return dataclasses.replace(base, full_reason=reason)
    return dataclasses.replace(base, reuse_dir=previous_dir, document=document)


def _why_not_reuse(config, document, labels):
    if config.full:
        return '--full was given'
    if 'index' not in document or 'record_options' not in document:
        return f"version {document['version']} has no record index (built before incremental refresh)"
    before, now = document['record_options'], config.record_options.recorded()
    for name in (*record_options.NAMES, 'encoder'):
        if before.get(name) != now[name]:
            shown = {'image_size': lambda v: 'x'.join(map(str, v))}.get(name, str)
            return (f"{'the encoder' if name == 'encoder' else '--' + name} changed since version "
                    f"{document['version']} ({shown(before.get(name))} -> {shown(now[name])})")
    if config.labels is not None and tuple(config.labels[:len(labels)]) != labels:
        return f"the --labels file does not keep the label numbers of version {document['version']}"
    if not set(_IMAGE_COLUMNS) <= set(document['index'].get('columns', ())):
        return f"version {document['version']}'s index has no source sizes (built before they were recorded)"
    if not set(_STAMP_COLUMNS) <= set(document['index'].get('columns', ())):
        return (f"version {document['version']}'s index has no inode change times and inode numbers (built before "
                f"they were recorded)")
    hashed = (document.get('near_duplicates') or {}).get('hash')
    if config.near_duplicates != 'off' and hashed != perceptual_hash.ALGORITHM:
        return (f"version {document['version']} has no perceptual hashes of this kind "
                f"({hashed or 'built with --near_duplicates off'}), which --near_duplicates {config.near_duplicates} "
                f'needs')
    return None


def label_order(config, refresh):
    """How the label order is decided, as dataset.json records it."""
    if config.labels is not None:
        return f'--labels file {config.labels_file}'
    if refresh.keep_labels is not None:
        return f'version {refresh.previous}, new classes appended in sorted order'
    return 'sorted class names'

