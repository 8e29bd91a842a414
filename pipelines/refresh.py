"""Decides, before the job runs, how a build relates to the version LATEST names: which labels keep
their numbers, and whether that version's records can be reused (an incremental refresh) or not.

Reuse needs every option that shapes a record to be what it was (``RecordOptions``, and the encoder:
this code's and Pillow's version), a record index, and labels that keep their numbers. Otherwise the
build says why in one line and decodes everything.

A refresh that would publish nothing (``nothing_changed``) is known before any pipeline starts: from one
listing of the input against the previous version's index, by the rule the job applies
(``imgrec.transforms.previous``); the listing stops at the first difference.
"""
import dataclasses
import typing


from imgrec.contract import index, layout, version_ref
from imgrec.contract.reasons import LABEL_CONFLICT, NEAR_DUPLICATE_CONFLICT
from imgrec.console.errors import UserError
from imgrec.imaging import perceptual_hash, record_options
from imgrec.storage import storage
from imgrec.pipelines.preflight import job_storage
from imgrec.transforms import previous as previous_version
from imgrec.transforms.elements import ImageRef
from imgrec.transforms.labels import is_plain_label, unmatched_labels_message
from imgrec.transforms.listing import class_folder_listing, list_top_level, manifest_refs, relative_source

if typing.TYPE_CHECKING:  # for annotations only
    from apache_beam.options.pipeline_options import PipelineOptions
    from imgrec.storage.publication import Latest
    from imgrec.pipelines.options import BuildConfig

# Index columns every reused record must have: facts of the image that a refresh carries over.
_IMAGE_COLUMNS = (index.PERCEPTUAL_HASH, index.SOURCE_WIDTH, index.SOURCE_HEIGHT, index.UPSCALED)
# Index columns of the local stamp besides the mtime: without them an unchanged stamp proves too little.
_STAMP_COLUMNS = (index.SOURCE_CTIME_NS, index.SOURCE_INODE)
# Recorded options that name the build, not its content: they differ between otherwise equal builds.
_NAMING_OPTIONS = ('output', 'version', 'name')
# Quarantined for what the whole input holds, not for the image's own bytes: a copy or a near-duplicate
# filed under another class. The job decides these again from every image, so it decodes them again; but
# an input in which nothing changed gets the same verdicts, so for "nothing changed" they are fates too.
_VERDICTS_ON_THE_INPUT = frozenset((LABEL_CONFLICT, NEAR_DUPLICATE_CONFLICT))


def verdicts_on_the_input(config) -> frozenset:
    """The verdicts on the input an unchanged input gets again: a near-duplicate label conflict only when this
    build quarantines them too (``--near_duplicate_conflicts quarantine``); else it is decided again, and written."""
    if config.near_duplicate_conflicts == 'quarantine':
        return _VERDICTS_ON_THE_INPUT
    return _VERDICTS_ON_THE_INPUT - {NEAR_DUPLICATE_CONFLICT}


@dataclasses.dataclass(frozen=True)
class RefreshPlan:
    previous: str | None = None          # the version LATEST named when the build started
    reuse_dir: str | None = None         # that version's folder, when its records are reused
    document: dict | None = None         # its dataset.json, when reused
    keep_labels: tuple[str, ...] | None = None  # its label order: new classes are appended to it
    full_reason: str | None = None       # why nothing is reused, when there was a version to reuse
    same_options: bool = False    # every option as in the previous version
    same_splits: bool = False     # the same --splits: its images' splits can be kept (near-duplicate groups)
    published_dir: str | None = None     # that version's folder, when its images keep their splits (no --resplit)
    published_document: dict | None = None  # its dataset.json then

    @property
    def keeps_published(self) -> bool:
        return self.published_dir is not None

    @property
    def incremental(self) -> bool:
        return self.reuse_dir is not None

    def may_publish_nothing(self, config):
        """Whether a build of ``config`` publishes nothing if no image changed: it reuses the previous version
        with every option as it was, and --force was not given."""
        return self.incremental and self.same_options and not config.force

    def describe(self) -> dict:
        """The ``refresh`` object of dataset.json, less the counts the job adds."""
        return {'previous': self.previous, 'mode': 'incremental' if self.incremental else 'full',
                'full_reason': self.full_reason}


def _load(config, previous, options):
    """The dataset.json of the version LATEST names (``previous``), by the contract's rules, read through the
    job's storage (``options``: the job's); None when its format is not this code's and ``--full`` was given
    (a full build needs nothing from it).

    Any other mistake (no dataset.json there, a format this code does not read without ``--full``) is
    the user's to fix: a UserError in one line, the same line every tool gives.
    """
    files = job_storage(config.output, config, options)
    try:
        return version_ref.read_version(config.output, previous, files.read, files.exists).document
    except version_ref.FormatVersionError as error:
        if config.full:
            return None
        raise UserError(str(error)) from None
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None


def _comparable(options):
    """The options two builds must share to publish the same version, less the record options (dataset.json
    records those in record_options, compared on their own)."""
    return {name: value for name, value in options.items()
            if name not in _NAMING_OPTIONS and name not in record_options.NAMES}


def plan(config: 'BuildConfig', latest: 'Latest | None', options: 'PipelineOptions | None' = None) -> RefreshPlan:
    """The RefreshPlan of ``config`` against ``latest`` (a ``publication.Latest``: what LATEST named when
    the pre-flight checks read it); the previous version is read as the job reads (``options``: the job's)."""
    previous = latest.version if latest else None
    if previous is None:
        return RefreshPlan()
    previous_dir = layout.join(config.output, previous)
    document = _load(config, previous, options)
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
    if config.near_duplicates != 'off' and hashed not in perceptual_hash.SAME_HASH:
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



def nothing_changed(config, plan, options):
    """Whether the refresh ``plan`` of ``config`` publishes nothing new, decided before any pipeline starts: no
    image is new, changed or removed (``imgrec.transforms.previous.nothing_new_changed_or_removed``; an unchanged
    image quarantined as a label conflict is unchanged too: ``_VERDICTS_ON_THE_INPUT``) and the labels are the
    previous version's. ``options``: the job's, for a gs:// listing's client."""
    if not plan.may_publish_nothing(config):
        return False
    classes: dict[str, bool] = {}  # class name -> whether it has images, as the listing goes
    read = job_storage(plan.reuse_dir, config, options).read
    fates = previous_version.read_fates(plan.reuse_dir, plan.document, read,
                                        previous_version.DECODING_VERDICTS | verdicts_on_the_input(config))
    listed = (ref for ref in _listing(config, options, classes)
              if config.labels is None or ref.label in config.labels)  # else quarantined as unknown_label
    return (previous_version.nothing_new_changed_or_removed(listed, fates)
            and _labels(config, classes, plan.keep_labels) == plan.keep_labels)


def _labels(config, classes, keep):
    """The class list ResolveLabels decides from ``classes`` after ``keep``; None when the build would fail on it."""
    if config.labels is None:
        return tuple(keep) + tuple(sorted(set(classes) - set(keep)))
    found = [label for label, has_images in classes.items() if has_images]
    empty = [label for label, has_images in classes.items() if not has_images]
    if unmatched_labels_message(config.labels, found, empty) and not config.allow_unknown_labels:
        return None
    return tuple(config.labels)


def _listing(config, options, classes):
    """The ImageRefs ListImages and ResolveLabels leave (no split: the match does not compare it), noting
    each class in ``classes``. Images of a class whose name labels.txt cannot hold are left out (quarantined
    as bad_label)."""
    source = config.manifest or config.input
    files = job_storage(source, config, options)
    refs = _manifest_refs(config.manifest, files) if config.manifest else _folder_refs(config.input, files, classes)
    for ref in refs:
        if is_plain_label(ref.label):
            classes[ref.label] = True
            yield ref


def _folder_refs(root, files, classes):
    for entry in list_top_level(root, files):
        if not entry.is_folder:  # a file outside any class folder: ignored
            continue
        label = relative_source(root, entry.path)
        if is_plain_label(label):
            classes.setdefault(label, False)  # an empty class folder is a class
        yield from (found for found in class_folder_listing(root, entry.path, files) if isinstance(found, ImageRef))


def _manifest_refs(manifest, files):
    manifest_dir = storage.folder_of(manifest)
    for text_line in files.read(manifest).decode('utf-8').split('\n'):  # as ReadFromText splits it
        yield from (found for found in manifest_refs(text_line.removesuffix('\r'), manifest_dir, files)
                    if isinstance(found, ImageRef))  # a bad line names no image
