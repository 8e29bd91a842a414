"""Checks made before any worker starts: the input, the output, the temp buckets and the labels file.

Each failure is a UserError with one line naming it, so a mistake costs seconds, not a run. ``check``
also reads what the build needs from them: the pinned labels, and what LATEST names now (publication
is a compare-and-swap against it).
"""
import dataclasses
import os
import shutil
import uuid

from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import GoogleCloudOptions
from google.api_core.exceptions import Forbidden, GoogleAPIError, NotFound

from contract import layout, version_ref
from imgrec_console.errors import BuildFailed, UserError
from imgrec_storage import fileio, gcs, publication
from imgrec_versions import incomplete
from transforms.labels import parse_labels_file
from transforms.listing import is_image_name, iter_files, list_top_level, manifest_lines, parse_manifest_line

# Below this much free space on a local output's disk the build is refused before it starts.
MIN_FREE_BYTES = 64 * 2**20


def check(config, options):
    """Runs every check; returns (``config`` with the pinned labels filled in, what LATEST names now).

    Also cleans up after earlier builds (``publication.tidy``): finishes what killed builds and
    interrupted prunings left, and removes the staging folders failed builds left (every one no live
    build holds, with ``--clean``). A finished pruning is said in one line, and so are the staging folders
    removed and left (``imgrec_versions.incomplete``).
    """
    policy = config.retry_policy()
    check_input(config, options)
    check_output_outside_input(config)
    check_output(config, options)
    check_temp_locations(options, policy)
    labels = read_labels(config.labels_file) if config.labels_file else None
    left = incomplete.staging_names(config.output)
    tidied = publication.tidy(config.output, clean=config.clean, policy=policy)
    for line in incomplete.lines(config.output, left, policy):
        print(line, flush=True)
    if tidied.pruned:
        print(f"build-dataset: finished an interrupted pruning: deleted version(s) {', '.join(tidied.pruned)}",
              flush=True)
    if tidied.published:
        print(f"build-dataset: finished an interrupted publication: LATEST names {', '.join(tidied.published)}",
              flush=True)
    publication.refuse_published(config.output, config.version, config.describe(), policy)
    return dataclasses.replace(config, labels=labels), read_latest(config.output, policy)


def read_labels(path):
    """The class names of a --labels file, read as editors and Excel save it."""
    if not FileSystems.exists(path):
        raise UserError(f'--labels file not found: {path}')
    with FileSystems.open(path) as stream:
        data = stream.read()
    try:
        return parse_labels_file(data)
    except ValueError as error:
        raise UserError(f'--labels file {path} {error}') from None


def read_latest(output, policy=None):
    """What LATEST of ``output`` names now (a ``publication.Latest``). A LATEST that names no plain version
    folder is the user's to fix, in the same line every tool gives (``contract.version_ref``)."""
    try:
        return publication.read_latest(output, policy)
    except GoogleAPIError as error:  # a permanent error: permission, a missing bucket
        raise UserError(gcs.describe_error(output, error)) from None
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None


def _first_image_on_gcs(storage_client, root):
    """True once any class folder below the gs:// ``root`` holds an image; stops at the first one."""
    for kind, folder in list_top_level(root, storage_client):
        if kind == gcs.PREFIX and any(is_image_name(listed.path) for listed in iter_files(folder, storage_client)):
            return True
    return False


def check_input(config, options=None):
    """Fails fast on an input that is missing, unreadable or holds no image.

    ``options`` (the job's PipelineOptions) make the gs:// checks authenticate as the job will.
    """
    if config.manifest:
        if gcs.is_gcs(config.manifest):
            _check_gcs(config.manifest, options)
        if not FileSystems.exists(config.manifest):
            raise UserError(f'manifest not found: {config.manifest}')
        with FileSystems.open(config.manifest) as stream:
            for text_line in stream:
                for line in manifest_lines(text_line.decode('utf-8')):
                    try:
                        if parse_manifest_line(line, '.') is not None:
                            return
                    except ValueError:
                        continue
        raise UserError(f'manifest lists no image: {config.manifest}')
    no_images = (f'no images found under {config.input} (expected <class>/<image> files with extensions '
                 f'jpg, jpeg, png, gif, bmp, webp, tif or tiff)')
    if gcs.is_gcs(config.input):
        if not _check_gcs(config.input, options, _first_image_on_gcs):
            raise UserError(no_images)
        return
    if FileSystems.get_scheme(config.input) is None:
        if not os.path.isdir(config.input):
            raise UserError(f'input folder not found: {config.input}')
        for directory, _, names in os.walk(config.input):
            if directory != config.input and any(is_image_name(name) for name in names):
                return
        raise UserError(no_images)


def _check_gcs(url, options, probe=gcs.check_readable):
    """Returns ``probe(client, url)``, turning a GCS error (missing bucket, no permission) into a UserError."""
    try:
        return probe(gcs.client(options), url)
    except GoogleAPIError as error:  # an API call's error, or retries that ran out (RetryError)
        raise UserError(gcs.describe_error(url, error)) from None


def _probe_name(folder):
    return layout.join(folder, f'.probe-{uuid.uuid4().hex}')


def _probe_gcs(folder, policy):
    """Writes and deletes a probe object, retried like every write: a permission problem is the user's
    to fix (UserError); a service that keeps failing fails the build (BuildFailed)."""
    probe = _probe_name(folder)
    try:
        fileio.write_bytes(probe, b'probe', policy)
        fileio.delete(probe, policy)
    except BuildFailed as failure:
        if isinstance(failure.__cause__, (Forbidden, NotFound)):
            raise UserError(gcs.describe_error(folder, failure.__cause__)) from None
        raise


def _probe_local(output):
    probe = _probe_name(output)
    try:
        os.makedirs(output, exist_ok=True)
        with open(probe, 'wb') as stream:
            stream.write(b'probe')
        os.remove(probe)
    except (FileExistsError, NotADirectoryError):
        raise UserError(f'--output {output} is not a folder (a file is in the way)') from None
    except OSError as error:
        raise UserError(f'cannot write to --output {output}: {error.strerror or error}') from None
    free = shutil.disk_usage(output).free
    if free < MIN_FREE_BYTES:
        raise UserError(f'the disk of --output {output} is nearly full ({free // 2**20} MB free)')


def check_temp_locations(options, policy=None):
    """Refuses a gs:// --temp_location or --staging_location that cannot be read and written (a probe
    object is written and deleted there).

    Dataflow would otherwise retry staging the job's files there for minutes before failing.
    """
    cloud = options.view_as(GoogleCloudOptions)
    for location in (cloud.temp_location, cloud.staging_location):
        if location and gcs.is_gcs(location):
            _check_gcs(location, options)
            _probe_gcs(location, policy)


def is_inside(folder, root):
    """Whether ``folder`` is ``root`` or below it, on a folder boundary: local paths compared with symlinks
    and relative parts resolved, gs:// URLs by prefix; paths of two kinds never are."""
    if gcs.is_gcs(folder) and gcs.is_gcs(root):
        return gcs.as_folder(folder).startswith(gcs.as_folder(root))
    if FileSystems.get_scheme(folder) is None and FileSystems.get_scheme(root) is None:
        folder, root = os.path.realpath(folder), os.path.realpath(root)
        return os.path.commonpath([folder, root]) == root
    return False


def check_output_outside_input(config):
    """Refuses an --output inside --input (or equal to it): a build would list the version folders as
    classes and their files as ignored input."""
    if config.input and is_inside(config.output, config.input):
        where = ('is the --input folder' if is_inside(config.input, config.output)
                 else f'is inside --input {config.input}')
        raise UserError(f'--output {config.output} {where}: builds would list their own output as input; '
                        'give an --output outside the input folder')


def check_output(config, options=None):
    """Refuses an output that cannot be written (a probe object is written and deleted) and a nearly full
    local disk. (A version that was already published is refused once ``publication.tidy`` has finished
    what earlier builds left: ``publication.refuse_published``.)"""
    if gcs.is_gcs(config.output):
        _check_gcs(config.output, options)
        _probe_gcs(config.output, config.retry_policy())
    elif FileSystems.get_scheme(config.output) is None:
        _probe_local(config.output)
