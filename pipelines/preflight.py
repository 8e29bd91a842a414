"""Checks made before any worker starts: the input, the output, the temp buckets and the labels file.

Each failure is a UserError with one line naming it, so a mistake costs seconds, not a run. ``check``
also reads what the build needs from them: the pinned labels, and what LATEST names now (publication
is a compare-and-swap against it).
"""
from __future__ import annotations

import dataclasses
import errno
import typing
import itertools
import os
import shutil
import uuid

from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions
from google.api_core.exceptions import Forbidden, GoogleAPIError, NotFound

from imgrec.contract import layout, version_ref
from imgrec.console.errors import BuildFailed, UserError
from imgrec.storage import storage as storage_lib
from imgrec.storage.gcs_storage import describe_error
from imgrec.versions import incomplete
from imgrec.transforms.labels import parse_labels_file
from imgrec.transforms.listing import (is_image_name, iter_files, list_top_level, manifest_lines, may_be_image,
                                      parse_manifest_line)

if typing.TYPE_CHECKING:
    from imgrec.pipelines.config import BuildConfig
    from imgrec.storage.latest import Latest
    from imgrec.storage.output import Output

# Below this much free space on a local output's disk the build is refused before it starts.
MIN_FREE_BYTES = 64 * 2**20


def job_storage(path: str, config: BuildConfig, options: PipelineOptions | None) -> storage_lib.Storage:
    """The storage of ``path`` as the job will use it: its retry policy, and its options' credentials."""
    return storage_lib.storage_for(path, config.retry_policy(), options and options.get_all_options(drop_default=True))


def check(config: BuildConfig, options: PipelineOptions, output: Output,
          settle: typing.Callable[[BuildConfig, Latest], BuildConfig] | None = None
          ) -> tuple[BuildConfig, Latest]:
    """Runs every check; returns (``config`` with the pinned labels filled in, what LATEST names now).

    Also cleans up after earlier builds (``Output.tidy``): finishes what killed builds and
    interrupted prunings left, and removes the staging folders failed builds left (every one no live
    build holds, with ``--clean``). A finished pruning is said in one line, and so are the staging folders
    removed and left (``imgrec.versions.incomplete``). ``settle(config, latest)``, when given, completes the
    configuration from the version LATEST names (``imgrec.pipelines.refresh.carry_over``) before a published
    --version is told from a rerun of its build.
    """
    check_input(config, options)
    check_output_outside_input(config)
    check_output(output)
    check_temp_locations(config, options)
    labels = (read_labels(config.labels_file, job_storage(config.labels_file, config, options)) if config.labels_file
              else None)
    left = incomplete.staging_names(output)
    tidied = output.tidy(clean=config.clean)
    for line in incomplete.lines(output, left):
        print(line, flush=True)
    if tidied.pruned:
        print(f"build-dataset: finished an interrupted pruning: deleted version(s) {', '.join(tidied.pruned)}",
              flush=True)
    if tidied.published:
        print(f"build-dataset: finished an interrupted publication: LATEST names {', '.join(tidied.published)}",
              flush=True)
    check_free_space(output)
    latest = read_latest(output)
    # (BuildConfig.labels is declared a tuple, but None until pinned: pipelines/options.py)
    config = dataclasses.replace(config, labels=labels)  # type: ignore[arg-type]
    if settle is not None:
        config = settle(config, latest)
    if output.refuse_published(config.version, config.recorded()):
        print(f'build-dataset: finished an interrupted publication: LATEST names {config.version}', flush=True)
        latest = read_latest(output)
    return config, latest


def read_labels(path: str, storage: storage_lib.Storage | None = None) -> tuple[str, ...]:
    """The class names of a --labels file, read as editors and Excel save it (through ``storage``, the job's,
    when given)."""
    storage = storage_lib.given_or_default(path, storage)
    if not storage.exists(path):
        raise UserError(f'--labels file not found: {path}')
    data = storage.read(path)
    try:
        return parse_labels_file(data)
    except ValueError as error:
        raise UserError(f'--labels file {path} {error}') from None


def read_latest(output: Output) -> Latest:
    """What LATEST of ``output`` names now. A LATEST that names no plain version folder is the user's to fix,
    in the same line every tool gives (``imgrec.contract.version_ref``)."""
    try:
        return output.latest()
    except GoogleAPIError as error:  # a permanent error: permission, a missing bucket
        raise UserError(describe_error(output.root, error)) from None
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None


def _accessible(storage, url):
    """Lists one page below ``url``, turning a storage error (a missing bucket, no permission) into a
    UserError; returns whether anything is there."""
    try:
        return any(itertools.islice(storage.list_level(url), 1))
    except GoogleAPIError as error:  # an API call's error, or retries that ran out (RetryError)
        raise UserError(describe_error(url, error)) from None


def _holds_an_image(storage, root):
    """True once any class folder below ``root`` holds a file that may be an image (by its name: the bytes of
    one whose name says nothing are the listing's to read); stops at the first one."""
    try:
        return any(entry.is_folder and any(may_be_image(listed.path) for listed in iter_files(entry.path, storage))
                   for entry in list_top_level(root, storage))
    except GoogleAPIError as error:
        raise UserError(describe_error(root, error)) from None


def _check_class_folders(storage, root):
    """Refuses an input whose top holds files but no folder: images go in one folder a class, whose name is
    their label (a listing that finds nothing at all is the caller's to name)."""
    images = others = 0
    try:
        for entry in list_top_level(root, storage):  # stops at the first folder
            if entry.is_folder:
                return
            images, others = images + is_image_name(entry.path), others + (not is_image_name(entry.path))
    except GoogleAPIError as error:
        raise UserError(describe_error(root, error)) from None
    if images or others:
        raise UserError(f'input folder {root} has no class folders ({images} image(s) and {others} other file(s) at '
                        f'its top): put the images in one folder a class, named by the class (<class>/<image>)')


def check_input(config: BuildConfig, options: PipelineOptions | None = None) -> None:
    """Fails fast on an input that is missing, unreadable or holds no image.

    ``options`` (the job's PipelineOptions) make the gs:// checks authenticate as the job will.
    """
    if config.manifest:
        storage = job_storage(config.manifest, config, options)
        _accessible(storage, config.manifest)
        if not storage.exists(config.manifest):
            raise UserError(f'manifest not found: {config.manifest}')
        with storage.open_read(config.manifest) as stream:
            for text_line in stream:
                for line in manifest_lines(text_line.decode('utf-8', 'replace')):  # a bad line is quarantined
                    try:
                        if parse_manifest_line(line, '.') is not None:
                            return
                    except ValueError:  # not path,label (a NUL, one field): quarantined with its number
                        continue
        raise UserError(f'manifest lists no image: {config.manifest}')
    storage = job_storage(config.input, config, options)
    local = storage.local_path(config.input)
    if local is not None and os.path.isfile(local):
        raise UserError(f'--input {config.input} is a file, not a folder: give the folder that holds one folder of '
                        f'images a class (<class>/<image>), or a CSV list of images as --manifest')
    if not _accessible(storage, config.input) and local is not None:
        if os.path.isdir(local):
            raise UserError(f'input folder {config.input} is empty: put one folder of images a class in it '
                            f'(<class>/<image>)')
        raise UserError(f'input folder not found: {config.input}')
    _check_class_folders(storage, config.input)
    if not _holds_an_image(storage, config.input):
        raise UserError(f'no images found under {config.input} (expected <class>/<image> files: JPEG, PNG, GIF, '
                        f'BMP, WebP, TIFF, AVIF, HEIC, JPEG XL or JPEG 2000)')


def _probe(storage, folder, what):
    """Writes and deletes a probe object, retried like every write: a permission problem, or a file in the
    way, is the user's to fix (UserError); a service that keeps failing fails the build (BuildFailed)."""
    probe = layout.join(folder, f'.probe-{uuid.uuid4().hex}')
    try:
        _accessible(storage, folder)
        storage.write(probe, b'probe')
        storage.delete(probe)
    except OSError as error:
        if error.errno == errno.ENOSPC and what == '--output':
            return  # writable, but full: the cleanup may free space, and check_free_space decides
        raise
    except BuildFailed as failure:
        cause = failure.__cause__
        if isinstance(cause, (Forbidden, NotFound)):
            raise UserError(describe_error(folder, cause)) from None
        if isinstance(cause, (FileExistsError, NotADirectoryError)):
            raise UserError(f'{what} {folder} is not a folder (a file is in the way)') from None
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC and what == '--output':
            return  # writable, but full: the cleanup may free space, and check_free_space decides
        if isinstance(cause, OSError):
            raise UserError(f'cannot write to {what} {folder}: {cause.strerror or cause}') from None
        raise


def check_temp_locations(config: BuildConfig, options: PipelineOptions) -> None:
    """Refuses a --temp_location or --staging_location that cannot be read and written (a probe object is
    written and deleted there).

    Dataflow would otherwise retry staging the job's files there for minutes before failing.
    """
    cloud = options.view_as(GoogleCloudOptions)
    for name, location in (('--temp_location', cloud.temp_location), ('--staging_location', cloud.staging_location)):
        if location:
            _probe(job_storage(location, config, options), location, name)


def check_output_outside_input(config: BuildConfig) -> None:
    """Refuses an --output inside --input (or equal to it): a build would list the version folders as
    classes and their files as ignored input."""
    if config.input and storage_lib.is_inside(config.output, config.input):
        where = ('is the --input folder' if storage_lib.is_inside(config.input, config.output)
                 else f'is inside --input {config.input}')
        raise UserError(f'--output {config.output} {where}: builds would list their own output as input; '
                        'give an --output outside the input folder')


def check_output(output: Output) -> None:
    """Refuses an output that cannot be written (a probe object is written and deleted) and a nearly full
    local disk. (A version that was already published is refused once ``Output.tidy`` has finished
    what earlier builds left: ``Output.refuse_published``.)"""
    _probe(output.storage, output.root, '--output')


def check_free_space(output: Output) -> None:
    """Refuses a nearly full local disk: after ``Output.tidy``, which frees what failed and killed builds
    left (so a rerun after a build that ran out of space counts the space it freed)."""
    on_disk = output.storage.local_path(output.root)
    if on_disk is not None:
        free = shutil.disk_usage(on_disk).free
        if free < MIN_FREE_BYTES:
            raise UserError(f'the disk of --output {output.root} is nearly full ({free // 2**20} MB free; a build '
                            f'needs {MIN_FREE_BYTES // 2**20} MB free besides what it writes)')
