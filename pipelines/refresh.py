"""Decides, before the job runs, how a build relates to the version LATEST names: which labels keep
their numbers, and whether that version's records can be reused (an incremental refresh) or not.

Reuse needs every option that shapes a record to be what it was (``RecordOptions``, and the encoder:
this code's and Pillow's version), a record index, and labels that keep their numbers. Otherwise the
build says why in one line and decodes everything.

Settings not given take that version's values (``carry_over``, before the pre-flight checks tell a rerun of
a published --version): a cron line that leaves an option out keeps the published dataset as it is.

A refresh that would publish nothing (``nothing_changed``) is known before any pipeline starts: from one
listing of the input against the previous version's index, by the rule the job applies
(``imgrec.transforms.previous``); the listing stops at the first difference.
"""
import dataclasses
import io
import json
import typing

import pyarrow.parquet


from imgrec.contract import index, layout, metadata, version_ref
from imgrec.contract.reasons import LABEL_CONFLICT, NEAR_DUPLICATE_CONFLICT
from imgrec.console.errors import UserError
from imgrec.imaging import perceptual_hash, record_options
from imgrec.pipelines.config import CARRIED, pairs_text
from imgrec.pipelines.preflight import job_storage
from imgrec.pipelines.refresh_plan import RefreshPlan
from imgrec.transforms import previous as previous_version
from imgrec.transforms.elements import ImageRef
from imgrec.transforms.labels import is_plain_label, unmatched_labels_message
from imgrec.transforms.listing import class_folder_listing, list_top_level, manifest_entries, relative_source

if typing.TYPE_CHECKING:  # for annotations only
    from apache_beam.options.pipeline_options import PipelineOptions
    from imgrec.storage.latest import Latest
    from imgrec.pipelines.config import BuildConfig

# Index columns every reused record must have: facts of the image that a refresh carries over.
_IMAGE_COLUMNS = (index.PERCEPTUAL_HASH, index.SOURCE_WIDTH, index.SOURCE_HEIGHT, index.UPSCALED)
# Index columns of the local stamp besides the mtime: without them an unchanged stamp proves too little.
_STAMP_COLUMNS = (index.SOURCE_CTIME_NS, index.SOURCE_INODE)
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


def _load(config, previous, options):
    """The dataset.json of the version LATEST names (``previous``), by the contract's rules, read through the
    job's storage (``options``: the job's); None when its format is not this code's and ``--full`` was given
    (a full build needs nothing from it).

    Any other mistake (no dataset.json there, a format this code does not read without ``--full``) is
    the user's to fix: a UserError in one line, the same line every tool gives.
    """
    storage = job_storage(config.output, config, options)
    marker = layout.join(config.output, previous, layout.DATASET_JSON)
    try:
        return version_ref.read_version(config.output, previous, storage.read, storage.exists).document
    except version_ref.FormatVersionError as error:
        if config.full:
            return None
        raise UserError(str(error)) from None
    except version_ref.VersionError as error:
        if storage.exists(marker):  # there, but unreadable: nothing of it is trusted, nothing of it is needed
            raise UnreadablePrevious(f'the dataset.json of version {previous}, {marker}, is unreadable ({error}): '
                                     f'nothing of it is reused, and its labels and splits are decided afresh '
                                     f'(pass --resplit to say so)') from None
        raise UserError(str(error)) from None
    except OSError as error:  # the read itself failed (a permanent error)
        raise UnreadablePrevious(f'{marker} cannot be read ({error}): nothing of version {previous} is reused, and '
                                 f'its labels and splits are decided afresh (pass --resplit to say so)') from None


class UnreadablePrevious(Exception):
    """The previous version's dataset.json is there but cannot be read: a full build, said in one line."""


# What a refresh reads of each line of the previous version's lists (transforms.previous): a line without them
# would fail the job.
_LIST_KEYS = {'quarantine': ('source', 'reason', 'message', 'bytes'),
              'duplicates': ('source', 'label', 'sha256', 'bytes')}
# Index columns every row must hold for its record to be found, matched and placed in its split.
_ROW_COLUMNS = (index.SOURCE, index.SOURCE_SIZE, index.LABEL, index.SHA256, index.SHARD, index.OFFSET, index.LENGTH,
                index.SPLIT)


def previous_problem(version_dir, document, storage):
    """Why the previous version's files a build would read (its index parts, quarantine.jsonl and
    duplicates.jsonl, listed by ``document``, its dataset.json) cannot be trusted: one phrase naming the file
    and the cause (unreadable, truncated, a label number out of range, a line that is not a whole JSON
    object); None when every one reads. Read whole, as the job would: a damaged file is found before the
    job, and the build falls back instead of failing."""
    labels = document.get('labels')
    try:
        parts = [layout.join(version_dir, name) for name in document['index']['files']]
        lists = {kind: layout.join(version_dir, document[kind]['file']) for kind in _LIST_KEYS}
    except (KeyError, TypeError) as error:
        return f'its dataset.json lacks {error} (it lists no index or lists)'
    if not isinstance(labels, list):
        return 'its dataset.json lists no labels'
    labels_txt = layout.join(version_dir, layout.LABELS_TXT)
    try:
        written = storage.read(labels_txt).decode('utf-8').splitlines()
    except Exception as error:  # pylint: disable=broad-except  # missing, not UTF-8
        return f'its {labels_txt} is unreadable ({_cause(error)})'
    if written != labels:
        return f'its {labels_txt} does not list the labels its dataset.json does'
    for path in parts:
        try:
            table = pyarrow.parquet.ParquetFile(io.BytesIO(storage.read(path))).read()
        except Exception as error:  # pylint: disable=broad-except  # ArrowInvalid, OSError, a missing part
            return f'its index part {path} is unreadable ({_cause(error)})'
        missing = [column for column in _ROW_COLUMNS if column not in table.column_names]
        if missing:
            return f"its index part {path} has no {', '.join(missing)} column"
        numbers = [number for number in table.column(index.LABEL).to_pylist()]
        wrong = [number for number in numbers if not isinstance(number, int) or not 0 <= number < len(labels)]
        if wrong:
            return (f'its index part {path} holds label number {wrong[0]}, which labels.txt does not have '
                    f'({len(labels)} labels)')
    for kind, path in lists.items():
        try:
            with storage.open_read(path) as stream:
                for number, line in enumerate(stream, 1):
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if not isinstance(item, dict) or any(key not in item for key in _LIST_KEYS[kind]):
                        return f'its {path} line {number} is not a whole entry'
        except Exception as error:  # pylint: disable=broad-except  # a cut line, bytes that are not UTF-8
            return f'its {path} is unreadable ({_cause(error)})'
    return None


def _cause(error):
    text = ' '.join(str(error).split())
    return f'{type(error).__name__}: {text[:160]}' if text else type(error).__name__


def verified(config, refresh_plan, options):
    """``refresh_plan`` once the previous version's files it would read are found readable
    (``previous_problem``); else a full build that reads none of them, saying why in its ``full_reason``: the
    file and the cause, and, where its images would have kept their splits, that they are dealt afresh."""
    version_dir = refresh_plan.reuse_dir or refresh_plan.published_dir
    if version_dir is None:
        return refresh_plan
    document = refresh_plan.document or refresh_plan.published_document
    problem = previous_problem(version_dir, document, job_storage(version_dir, config, options))
    if problem is None:
        return refresh_plan
    reason = f'version {refresh_plan.previous} cannot be trusted: {problem}'
    if refresh_plan.full_reason:
        reason = f'{refresh_plan.full_reason}; {reason}'
    if refresh_plan.keeps_published:
        reason += '; its images are dealt into splits afresh (pass --resplit to say so)'
    return dataclasses.replace(refresh_plan, reuse_dir=None, document=None, published_dir=None,
                               published_document=None, full_reason=reason)


def carry_over(config: 'BuildConfig', latest: 'Latest | None',
               options: 'PipelineOptions | None' = None) -> 'BuildConfig':
    """``config`` completed from the version LATEST names (``latest``): each setting that was not given
    (``BuildConfig.given``) takes that version's value (``carried_over``). Refuses, before any worker
    starts, a given setting that would move its published images between splits without --resplit."""
    previous = latest.version if latest else None
    if previous is None:
        return config
    try:
        document = _load(config, previous, options)
    except UnreadablePrevious:  # nothing of it is trusted: ``plan`` makes it a full build and says so
        return config
    if document is None:
        return config
    config = carried_over(config, document)
    for line in dealing_changes(config, document):
        print(line, flush=True)
    return config


# Given settings that change how new images are dealt, but move no published one (``carried_over``).
_DEALING = ('stratify', 'near_duplicates')


def dealing_changes(config: 'BuildConfig', document: dict) -> list[str]:
    """One line for each given setting of ``_DEALING`` other than the published one (without --resplit):
    the build goes on, and says what the change does."""
    if config.resplit:
        return []
    published = published_settings(document)
    return [f"build-dataset: {_shown(name, getattr(config, name))} differs from version {document.get('version')}'s "
            f'{_shown(name, published[name])}: its images keep their splits; new images are dealt by the new setting'
            for name in _DEALING if name in config.given and name in published
            and published[name] != getattr(config, name)]


def published_settings(document: dict) -> dict[str, typing.Any]:
    """{BuildConfig field or record option: value} of the settings (``config.CARRIED`` and the record
    options) a dataset.json records, as BuildConfig holds them; those an older version did not record are
    left out."""
    recorded = metadata.current(document)
    options = recorded.get('options') or {}
    settings = {name: options[name] for name in CARRIED if name in options}
    if 'splits' in settings:  # recorded as an object, its keys sorted: BuildConfig's order is lost
        settings['splits'] = tuple(settings['splits'].items())
    if 'formats' in settings:
        settings['formats'] = tuple(settings['formats'])
    shaping = recorded.get('record_options') or {}
    if all(name in shaping for name in record_options.NAMES):
        settings.update(dataclasses.asdict(record_options.RecordOptions.from_recorded(shaping)))
    return settings


def _shown(name: str, value: typing.Any) -> str:
    """A setting as the command line gives it: '--splits train=80,validation=20', '--no_stratify'."""
    if isinstance(value, bool):
        return f'--{name}' if value else f'--no_{name}'
    text = {'splits': pairs_text, 'num_shards': lambda v: pairs_text(v.items()) if v else 'none',
            'formats': ','.join, 'image_size': record_options.show_size}.get(name, str)(value)
    return f'--{name} {text}'


def _same_setting(name: str, one: typing.Any, other: typing.Any) -> bool:
    return dict(one) == dict(other) if name == 'splits' else one == other


def carried_over(config: 'BuildConfig', document: dict) -> 'BuildConfig':
    """``config`` with every setting not given taken from ``document`` (the previous version's dataset.json),
    the names taken in ``carried``. A given --splits other than the published one moves published images
    between splits (``imgrec.transforms.splits``' first rule holds only for the same --splits): without
    --resplit it is a UserError naming both. (A changed --stratify or --near_duplicates moves no published
    image: those stay where they are, and new images are dealt by the new setting.)"""
    published = published_settings(document)
    version = document.get('version')
    if ('splits' in config.given and 'splits' in published and not config.resplit
            and not _same_setting('splits', config.splits, published['splits'])):
        raise UserError(f"{_shown('splits', config.splits)} would move published images between splits: version "
                        f"{version} was built with {_shown('splits', published['splits'])}; give --resplit to "
                        f'deal every image again, or leave --splits out to keep the published splits')
    taken = {name: value for name, value in published.items()
             if name not in config.given and not _same_setting(name, value, _value(config, name))}
    splits = taken.get('splits', config.splits)
    if 'num_shards' in taken and not set(taken['num_shards'] or ()) <= {name for name, _ in splits}:
        del taken['num_shards']  # names splits the given --splits do not have (with --resplit)
    if not taken:
        return config
    shaping = {name: taken.pop(name) for name in record_options.NAMES if name in taken}
    return dataclasses.replace(config, **taken, carried=tuple(sorted([*taken, *shaping])),
                               record_options=dataclasses.replace(config.record_options, **shaping))


def _value(config: 'BuildConfig', name: str) -> typing.Any:
    return getattr(config.record_options if name in record_options.NAMES else config, name)


def carried_line(config: 'BuildConfig', previous: str | None) -> str | None:
    """The summary's one line naming the settings taken from version ``previous``; None when none was."""
    if not config.carried:
        return None
    return (f"  kept the settings of version {previous} not given: "
            + ', '.join(_shown(name, _value(config, name)) for name in config.carried))


def plan(config: 'BuildConfig', latest: 'Latest | None', options: 'PipelineOptions | None' = None) -> RefreshPlan:
    """The RefreshPlan of ``config`` against ``latest`` (a ``latest.Latest``: what LATEST named when
    the pre-flight checks read it); the previous version is read as the job reads (``options``: the job's)."""
    previous = latest.version if latest else None
    if previous is None:
        return RefreshPlan()
    previous_dir = layout.join(config.output, previous)
    try:
        document = _load(config, previous, options)
    except UnreadablePrevious as error:
        return RefreshPlan(previous=previous, full_reason=str(error))
    if document is None:
        return RefreshPlan(previous=previous, full_reason=f'--full was given (version {previous} is of a format '
                                                          f'this code does not read)')
    labels = tuple(document['labels'])
    same_options = metadata.identity(document) == config.identity()
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
    return _why_not_grouped_alike(config, document)


def _why_not_grouped_alike(config, document):
    """Why the reused records lack what this refresh's near-duplicate check keys them by (the sha256 of their JPEG,
    or the perceptual hashes), or None."""
    if config.near_duplicates == 'off':
        return None
    near = document.get('near_duplicates') or {}
    if config.near_duplicate_check == metadata.NEAR_DUPLICATE_CHECKS[0]:  # exact
        if index.ENCODED_SHA256 not in document['index'].get('columns', ()) or near.get('mode') in (None, 'off'):
            return (f"version {document['version']} recorded no sha256 of its written pictures (built "
                    f"{'with --near_duplicates off' if near.get('mode') == 'off' else 'before they were recorded'}), "
                    f'which --near_duplicate_check exact needs')
        return None
    if near.get('hash') not in perceptual_hash.SAME_HASH:
        return (f"version {document['version']} has no perceptual hashes of this kind "
                f"({near.get('hash') or 'built without the perceptual check'}), which --near_duplicate_check "
                f'perceptual needs')
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
    sources = job_storage(config.manifest or config.input, config, options)
    digest = lambda ref: previous_version.source_sha256(sources, ref.path)  # noqa: E731  # a moved stamp only
    return (previous_version.nothing_new_changed_or_removed(listed, fates, digest)
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
    storage = job_storage(source, config, options)
    refs = _manifest_refs(config.manifest, storage) if config.manifest else _folder_refs(config.input, storage, classes)
    for ref in refs:
        if is_plain_label(ref.label):
            classes[ref.label] = True
            yield ref


def _folder_refs(root, storage, classes):
    for entry in list_top_level(root, storage):
        if not entry.is_folder:  # a file outside any class folder: ignored
            continue
        label = relative_source(root, entry.path)
        if is_plain_label(label):
            classes.setdefault(label, False)  # an empty class folder is a class
        yield from (found for found in class_folder_listing(root, entry.path, storage) if isinstance(found, ImageRef))


def _manifest_refs(manifest, storage):
    """The ImageRefs of a manifest's records, as the job's listing reads them (a bad line names no image)."""
    return (found for found in manifest_entries(manifest, storage) if isinstance(found, ImageRef))
