"""A build stopped part way (SIGKILL, SIGTERM to its process group, a failure), then the same command again: the rerun
takes up the records the stopped build spilled, checked, decodes only the rest, and publishes the same shards and
index as a build that never stopped; a stopped build of other options, or one a live lease holds, is never taken
up (docs/build.md, "A stopped build")."""
import io
import json
import os
import signal
import struct
import subprocess
import sys
import time

import psutil
import pytest
from PIL import Image

from imgrec.contract import features as F, layout, tfrecord
from imgrec.contract.example import encode_example
from imgrec.samples.generate import write_images
from imgrec.storage import crash_points, resumption, spill
from imgrec.storage.spill import FACTS_KEY
from imgrec.transforms import resumed
from imgrec.versions import verify
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = ('--image_size', '32', '--direct_running_mode', 'in_memory', '--version', 'v1', '--no_progress')
GIVE_UP_S = 300  # only so that a broken build fails the test instead of hanging it: never an expected time
RESUMED = '  resumed: '


def _argv(images, output, *more):
    return ['--input', str(images), '--output', str(output), *OPTIONS, *more]


def _start(argv, **env):
    """build-dataset as its console entry point runs it: supervised, in a session (process group) of its own."""
    return subprocess.Popen([sys.executable, '-m', 'imgrec.pipelines.build_dataset', *argv], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, **env})


def _run(argv, **env):
    build = _start(argv, **env)
    out, err = build.communicate(timeout=GIVE_UP_S)
    return build.returncode, out, err


def _spilled_bytes(output):
    """The bytes in the spill files of the staging folders of ``output`` now."""
    total = 0
    for name in os.listdir(output) if os.path.isdir(output) else ():
        if layout.is_staging_name(name):
            for folder, _, files in os.walk(os.path.join(output, name, layout.SPILL_DIR)):
                total += sum(os.path.getsize(os.path.join(folder, file)) for file in files)
    return total


def _kill_when_spilled(build, output, at_least, number=signal.SIGKILL):
    """``number`` to the build's whole process group once its spill files hold ``at_least`` bytes (polled every
    10 ms: the build has most of its images left)."""
    deadline = time.monotonic() + GIVE_UP_S
    while _spilled_bytes(output) < at_least:
        assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()[-3000:]
        time.sleep(0.01)
    os.killpg(build.pid, number)
    return build.communicate(timeout=GIVE_UP_S)


def _published(version_dir):
    """{name: bytes} of the shards and the index of a published version."""
    found = {}
    for folder, _, files in os.walk(version_dir):
        for file in files:
            path = os.path.join(folder, file)
            name = os.path.relpath(path, version_dir)
            if name.endswith('.tfrecord') or name.startswith(layout.INDEX_DIR + '/'):
                with open(path, 'rb') as stream:
                    found[name] = stream.read()
    return found


def _left(output):
    """What a build may leave beside its versions: staging folders and leases."""
    return [name for name in os.listdir(output) if layout.is_staging_name(name) or name == layout.LEASES_DIR]


def _resumed(out):
    [line] = [line for line in out.splitlines() if line.startswith(RESUMED)]
    return line


@pytest.fixture(scope='module')
def images(tmp_path_factory):
    root = tmp_path_factory.mktemp('resume') / 'images'
    write_images(str(root), 30, min_side=300, max_side=600)  # 120 images: long enough to stop midway
    return root


@pytest.fixture(scope='module')
def uninterrupted(images, tmp_path_factory):
    """The shards and index a build that never stopped publishes."""
    output = tmp_path_factory.mktemp('resume-reference') / 'out'
    status, _, err = _run(_argv(images, output))
    assert status == 0, err
    return _published(output / 'v1')


def test_sigkill_mid_decoding_then_the_same_command_takes_up_what_was_spilled(images, uninterrupted, tmp_path):
    output = tmp_path / 'out'
    build = _start(_argv(images, output))
    _kill_when_spilled(build, output, 40_000)
    assert build.returncode == -signal.SIGKILL
    [stopped] = [name for name in os.listdir(output) if layout.is_staging_name(name)]

    status, out, err = _run(_argv(images, output))
    assert status == 0, err
    assert 'build-dataset: resuming the build stopped at ' in out and stopped in out, out
    line = _resumed(out)
    taken = int(line[len(RESUMED):].split()[0])
    # in_memory, the spill files fill a bundle at a time: on a loaded machine the kill can land after the last
    # one, and the rerun then decodes nothing (the other tests stop builds with images left to decode)
    assert 0 < taken <= 120 and ' of 120 images from the build stopped at ' in line, line
    document = json.loads((output / 'v1' / layout.DATASET_JSON).read_text())
    assert document['refresh']['resumed']['images'] == taken
    assert document['refresh']['resumed']['from'] == [stopped]
    assert document['refresh']['decoded'] == 120 - taken
    page = (output / 'v1' / layout.REPORT_HTML).read_text()
    assert f'Resumed: {taken} of 120 images taken up from the build stopped at ' in page
    assert _published(output / 'v1') == uninterrupted
    assert _left(output) == []
    assert verify.main([str(output)]) == 0


def test_sigterm_to_the_process_group_mid_decoding_says_terminated_and_the_rerun_resumes(images, uninterrupted,
                                                                                        tmp_path):
    """As systemd stops a service: SIGTERM to the whole process group, the worker processes too."""
    output = tmp_path / 'out'
    argv = _argv(images, output, '--direct_running_mode', 'multi_processing', '--direct_num_workers', '2')
    build = _start(argv)
    _, err = _kill_when_spilled(build, output, 40_000, signal.SIGTERM)
    assert build.returncode == 143, err
    assert err.startswith('build-dataset: terminated: nothing was published (LATEST is as it was); left the staging '
                          'folder '), err
    assert 'failed' not in err

    status, out, err = _run(argv)
    assert status == 0, err
    assert int(_resumed(out)[len(RESUMED):].split()[0]) > 0
    assert _published(output / 'v1') == uninterrupted and _left(output) == []


def test_a_worker_killed_for_memory_fails_the_build_and_the_rerun_takes_up_what_was_spilled(images, uninterrupted,
                                                                                            tmp_path):
    output = tmp_path / 'out'
    argv = _argv(images, output, '--direct_running_mode', 'multi_processing', '--direct_num_workers', '2')
    build = _start(argv)
    deadline = time.monotonic() + GIVE_UP_S
    while _spilled_bytes(output) < 40_000:
        assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()[-3000:]
        time.sleep(0.01)
    workers = [process for process in psutil.Process(build.pid).children(recursive=True)
               if 'warm_worker' in ' '.join(process.cmdline()) or 'sdk_worker_main' in ' '.join(process.cmdline())]
    workers[0].send_signal(signal.SIGKILL)  # what the kernel's out-of-memory killer does
    _, err = build.communicate(timeout=GIVE_UP_S)
    assert build.returncode == 1 and 'a local Beam worker process was killed (SIGKILL' in err, err

    status, out, err = _run(argv)
    assert status == 0, err
    assert int(_resumed(out)[len(RESUMED):].split()[0]) > 0
    assert _published(output / 'v1') == uninterrupted and _left(output) == []


def test_sigterm_to_the_process_group_just_after_promotion_says_terminated_not_failed(images, tmp_path):
    output = tmp_path / 'out'
    build = _start(_argv(images, output), **{crash_points.PAUSE_AT: 'promote:after_rename'})
    deadline = time.monotonic() + GIVE_UP_S
    while not (output / 'v1' / layout.DATASET_JSON).exists() or not _stopped(build.pid):
        assert build.poll() is None and time.monotonic() < deadline, 'the build did not pause after promotion'
        time.sleep(0.02)
    os.killpg(build.pid, signal.SIGTERM)
    os.killpg(build.pid, signal.SIGCONT)
    _, err = build.communicate(timeout=GIVE_UP_S)
    assert build.returncode == 143, err
    assert err.startswith(f'build-dataset: terminated: version v1 is whole in {output}, but LATEST still names '
                          f'nothing: run the same command again'), err
    status, _, err = _run(_argv(images, output))
    assert status == 0, err
    assert (output / layout.LATEST).read_text().strip() == 'v1'


def _stopped(pid):
    with open(f'/proc/{pid}/stat', encoding='ascii') as stream:
        text = stream.read()
    return text[text.rfind(')') + 2:][:1] == 'T'


@pytest.fixture(scope='module')
def stopped_whole(images, tmp_path_factory):
    """An output holding the staging folder of a build killed just before promotion: everything spilled."""
    output = tmp_path_factory.mktemp('resume-stopped') / 'out'
    status, _, err = _run(_argv(images, output), **{crash_points.CRASH_AT: 'publish:before_promote'})
    assert status == 137, err
    return output


def _copy(output, tmp_path):
    """A copy of ``output``, its stopped build's as if built there (a build into a copied output is not taken up)."""
    copy = tmp_path / 'out'
    subprocess.run(['cp', '-a', str(output), str(copy)], check=True)
    for name in os.listdir(copy):
        if layout.is_staging_name(name):
            marker = copy / name / resumption.MARKER
            marker.write_text(json.dumps(dict(json.loads(marker.read_text()), output=str(copy))))
    return copy


def test_other_options_start_from_zero_saying_why_in_one_line(images, stopped_whole, tmp_path):
    output = _copy(stopped_whole, tmp_path)
    [stopped] = [name for name in os.listdir(output) if layout.is_staging_name(name)]
    status, out, err = _run(_argv(images, output, '--jpeg_quality', '80'))
    assert status == 0, err
    [line] = [line for line in out.splitlines() if 'not resuming' in line]
    assert line.startswith('build-dataset: not resuming the build stopped at ') and stopped in line
    assert line.endswith(': --jpeg_quality was 90, now 80; starting from zero'), line
    assert RESUMED not in out and _left(output) == []


@pytest.mark.parametrize('option', ['--no_resume', '--full'])
def test_no_resume_and_full_start_from_zero(images, uninterrupted, stopped_whole, tmp_path, option):
    output = _copy(stopped_whole, tmp_path)
    status, out, err = _run(_argv(images, output, option))
    assert status == 0, err
    assert f'{option}; starting from zero' in out and RESUMED not in out, out
    assert json.loads((output / 'v1' / layout.DATASET_JSON).read_text())['refresh']['decoded'] == 120
    assert _published(output / 'v1') == uninterrupted and _left(output) == []


def test_a_stopped_build_a_live_lease_holds_is_neither_taken_up_nor_deleted(images, tmp_path):
    output = tmp_path / 'out'
    paused = _start(_argv(images, output), **{crash_points.PAUSE_AT: 'publish:before_promote'})
    try:
        deadline = time.monotonic() + GIVE_UP_S
        while not _stopped(paused.pid):
            assert paused.poll() is None and time.monotonic() < deadline, 'the build did not pause'
            time.sleep(0.02)
        [running] = [name for name in os.listdir(output) if layout.is_staging_name(name)]
        status, out, err = _run(_argv(images, output, '--version', 'v2'))
        assert status == 0, err
        assert RESUMED not in out and 'resuming' not in out, out
        assert (output / running / layout.SPILL_DIR).is_dir()
    finally:
        os.killpg(paused.pid, signal.SIGKILL)
        paused.communicate(timeout=GIVE_UP_S)


def test_a_stopped_refresh_is_taken_up_beside_the_previous_versions_records(tmp_path):
    """The rerun reuses the previous version's records, takes up the stopped refresh's, decodes none."""
    images, output, reference = tmp_path / 'images', tmp_path / 'out', tmp_path / 'reference'
    write_images(str(images), 6, min_side=40, max_side=80)
    for folder in (output, reference):
        assert _run(_argv(images, folder))[0] == 0
    write_images(str(tmp_path / 'more'), 4, min_side=40, max_side=80, seed=7)
    for path in sorted((tmp_path / 'more').rglob('*.*')):
        os.rename(path, images / path.parent.name / f'new-{path.name}')
    status, _, err = _run(_argv(images, output, '--version', 'v2'), **{crash_points.CRASH_AT: 'publish:before_promote'})
    assert status == 137, err

    status, out, err = _run(_argv(images, output, '--version', 'v2'))
    assert status == 0, err
    assert '  refresh of v1: 24 reused, 0 decoded (16 new, 0 changed), 0 removed' in out.splitlines(), out
    assert _resumed(out).startswith('  resumed: 16 of 40 images from the build stopped at '), out
    assert _run(_argv(images, reference, '--version', 'v2'))[0] == 0
    assert _published(output / 'v2') == _published(reference / 'v2') and _left(output) == []


def _spill_files(output):
    [stopped] = [name for name in os.listdir(output) if layout.is_staging_name(name)]
    folder = output / stopped / layout.SPILL_DIR
    return sorted(folder / name for name in os.listdir(folder))


def _records(path):
    """[(offset, Example source, facts)] of a spill file."""
    found, offset = [], 0
    data = path.read_bytes()
    while offset < len(data):
        (length,) = struct.unpack('<Q', data[offset:offset + 8])
        found.append((offset, data[offset + 12:offset + 12 + length]))
        offset += length + 16
    return [(start, json.loads(facts)[FACTS_KEY]) for (start, _), (_, facts) in zip(found[::2], found[1::2])]


def test_a_damaged_frame_and_a_changed_source_are_decoded_again(images, tmp_path):
    output, source = tmp_path / 'out', tmp_path / 'images'
    subprocess.run(['cp', '-a', str(images), str(source)], check=True)
    status, _, err = _run(_argv(source, output), **{crash_points.CRASH_AT: 'publish:before_promote'})
    assert status == 137, err
    first, *_ = _spill_files(output)
    (offset, damaged), (_, facts) = _records(first)[:2]
    # The first record's Example: one byte of its image flipped (its data checksum fails).
    data = bytearray(first.read_bytes())
    data[offset + 40] ^= 0xFF
    first.write_bytes(bytes(data))
    # The second record's source: other bytes now (its image turned upside down and written again).
    with Image.open(source / facts['source']) as image:
        turned = image.transpose(Image.Transpose.ROTATE_180)
    turned.save(source / facts['source'], format=image.format)

    status, out, err = _run(_argv(source, output))
    assert status == 0, err
    assert _resumed(out).endswith('; 2 spilled records refused (1 damaged, 1 source_changed)'), out
    document = json.loads((output / 'v1' / layout.DATASET_JSON).read_text())
    assert document['refresh']['resumed']['refused'] == {'damaged': 1, 'source_changed': 1}
    reference = tmp_path / 'reference'
    status, _, err = _run(_argv(source, reference))
    assert status == 0, err
    assert _published(output / 'v1') == _published(reference / 'v1') and _left(output) == []
    assert damaged and verify.main([str(output)]) == 0


def _spill(records):
    """A spill file's bytes: each (Example values, facts) as the two frames a build appends."""
    return b''.join(tfrecord.frame(encode_example(values)) + tfrecord.frame(json.dumps({FACTS_KEY: facts}).encode())
                    for values, facts in records)


def _record(name):
    values = {F.IMAGE_ENCODED: b'jpeg', F.IMAGE_FORMAT: F.IMAGE_FORMAT_JPEG, F.IMAGE_CHANNELS: F.CHANNELS,
              F.IMAGE_HEIGHT: 32, F.IMAGE_WIDTH: 32, F.LABEL: 0, F.LABEL_TEXT: b'circle',
              F.SOURCE: name.encode(), F.SHA256: b'ab' * 32}
    return values, {**dict.fromkeys(spill.FACTS), 'source': name, 'sha256': 'ab' * 32, 'label_text': 'circle'}


def test_a_scan_takes_each_whole_record_and_names_why_each_other_is_refused():
    whole = _spill([_record('circle/1.jpg'), _record('circle/2.jpg'), _record('circle/3.jpg')])
    assert [item[0] for item in resumed.scan(io.BytesIO(whole), 'f', (32, 32))] == [
        'circle/1.jpg', 'circle/2.jpg', 'circle/3.jpg']
    # Cut short inside the third record's facts frame: the first two are whole.
    found = list(resumed.scan(io.BytesIO(whole[:-10]), 'f', (32, 32)))
    assert [item if isinstance(item, str) else item[0] for item in found] == [
        'circle/1.jpg', 'circle/2.jpg', resumed.CUT_SHORT]
    # The second Example's data damaged: only it is lost.
    second = len(_spill([_record('circle/1.jpg')]))
    damaged = bytearray(whole)
    damaged[second + 20] ^= 1
    found = list(resumed.scan(io.BytesIO(bytes(damaged)), 'f', (32, 32)))
    assert [item if isinstance(item, str) else item[0] for item in found] == [
        'circle/1.jpg', resumed.DAMAGED, 'circle/3.jpg']
    # Facts that name another Example, and another image size: refused.
    values, facts = _record('circle/4.jpg')
    found = list(resumed.scan(io.BytesIO(_spill([(values, dict(facts, source='circle/5.jpg'))])), 'f', (32, 32)))
    assert found == [resumed.MISMATCHED]
    assert list(resumed.scan(io.BytesIO(_spill([_record('circle/6.jpg')])), 'f', (48, 48))) == [resumed.MISMATCHED]
    # Facts a version that recorded fewer wrote (no sha256 of the JPEG, the exact check's key): refused.
    values, facts = _record('circle/7.jpg')
    del facts['encoded_sha256']
    assert list(resumed.scan(io.BytesIO(_spill([(values, facts)])), 'f', (32, 32))) == [resumed.MISMATCHED]
    # A damaged length: where the next frame starts is unknown, the rest of the file is lost.
    damaged = bytearray(whole)
    damaged[second + 2] ^= 1
    found = list(resumed.scan(io.BytesIO(bytes(damaged)), 'f', (32, 32)))
    assert [item if isinstance(item, str) else item[0] for item in found] == ['circle/1.jpg', resumed.DAMAGED]


def test_gcs_sigkill_after_the_metadata_then_the_rerun_takes_up_every_image(gcs_emulator, images, uninterrupted,
                                                                           tmp_path):
    bucket = gcs_emulator.create_bucket('resume-killed')
    output = f'{bucket}/datasets/shapes'
    build = _start(_argv(images, output), **{crash_points.PAUSE_AT: 'metadata:after_files'})
    deadline = time.monotonic() + GIVE_UP_S
    while not _stopped(build.pid):
        assert build.poll() is None and time.monotonic() < deadline, 'the build did not pause'
        time.sleep(0.02)
    os.killpg(build.pid, signal.SIGKILL)
    build.communicate(timeout=GIVE_UP_S)
    status, out, err = _run(_argv(images, output))
    assert status == 0, err
    assert _resumed(out).startswith('  resumed: 120 of 120 images'), out
    downloaded = gcs_emulator.download_folder(output, tmp_path / 'out')
    assert _published(os.path.join(downloaded, 'v1')) == uninterrupted
    assert not [name for name in gcs_emulator.list(output) if '.incomplete-' in name or '/_leases/' in name]
