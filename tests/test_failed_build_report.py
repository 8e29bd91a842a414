"""A failed build has a report: real builds (in-memory DirectRunner) that miss their split shares or
quarantine too much write report.html into their staging folder, name it in the failure line, and the
page (opened in Chromium) says why and shows what the build knew. The next builds name the staging
folders left, and what --clean removes: never one a live lease holds."""
import html
import json
import os
import random
import re

import pytest

from imgrec.contract import layout
from imgrec.console.errors import BuildFailed
from imgrec.storage import retries, staging, storage
from imgrec.storage.output import Output
from imgrec.versions import failed_build, incomplete, version as version_lib
from imgrec.versions.report import page as report_page
from imgrec.pipelines import build_dataset, python_api
from imgrec.samples.near_duplicates import draw_photo
from tests.chromium import open_page, requires_chromium
from tests.gcs_emulator import gcs_emulator  # noqa: F401 (fixture)

OPTIONS = ('--image_size', '32', '--splits', 'train=50,validation=50', '--direct_running_mode', 'in_memory',
           '--progress', 'off')
TWINS = 12  # re-saves of one photo: one near-duplicate group, which no 50/50 dealing can split
TEXT = 'JSON.stringify({text: document.body.innerText, links: Array.from(document.querySelectorAll("nav a")).map(' \
       'a => [a.getAttribute("href"), !!document.getElementById(a.getAttribute("href").slice(1))]), ' \
       'headings: document.querySelectorAll("h2").length})'


def _main(capsys, images, output, *extra):
    """(exit status, stdout lines, stderr lines) of build-dataset's main in this process."""
    status = build_dataset.main(['--input', str(images), '--output', str(output), *OPTIONS, *map(str, extra)])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err.splitlines()


# The twins below are JPEGs saved again at other qualities: edited copies, which the perceptual check finds.
PERCEPTUAL = ('--near_duplicate_check', 'perceptual')


@pytest.fixture(scope='module')
def grouped(tmp_path_factory):
    """Two classes of one photo each, and TWINS re-saves of a third photo in the first class."""
    root = tmp_path_factory.mktemp('grouped')
    for seed, label in enumerate(('a', 'b')):
        os.makedirs(root / label)
        draw_photo(120, 90, random.Random(seed)).save(root / label / 'photo.jpg', quality=90)
    twin = draw_photo(120, 90, random.Random(4242))
    for q in range(TWINS):
        twin.save(root / 'a' / f'twin_{q:02d}.jpg', quality=80 + q)
    return root


@pytest.fixture(scope='module')
def damaged(tmp_path_factory):
    """Two classes of four photos, and two files that are no image at all: 20% of the input."""
    root = tmp_path_factory.mktemp('damaged')
    for c, label in enumerate(('a', 'b')):
        os.makedirs(root / label)
        for i in range(4):
            draw_photo(120, 90, random.Random(10 * c + i)).save(root / label / f'{i}.jpg', quality=90)
    for i in range(2):
        (root / 'a' / f'bad_{i}.jpg').write_bytes(b'<html>not an image</html>')
    return root


def _report_named(line, output):
    """The staging folder whose report ``line`` (a failure line) names; checks it is there."""
    match = re.fullmatch(r'build-dataset: failed: .* \(report: (\S+)\)', line)
    assert match, line
    path = match[1]
    staging = os.path.dirname(path)
    assert os.path.dirname(staging) == str(output) and layout.is_staging_name(os.path.basename(staging))
    assert os.path.basename(path) == layout.REPORT_HTML and os.path.isfile(path)
    return staging


def _text(page):
    return re.sub(r'\s+', ' ', page)


def test_missed_shares_write_a_report_into_the_staging_folder_and_name_it(grouped, tmp_path, capsys):
    output = tmp_path / 'out'
    status, out, err = _main(capsys, grouped, output, *PERCEPTUAL)
    assert status == 1 and out == [] and len(err) == 1, err
    missed = re.match(r'build-dataset: failed: split (\w+) would hold (\d+) of (\d+) images', err[0])
    assert missed, err
    staging = _report_named(err[0], output)
    assert not (output / layout.LATEST).exists()
    dealt = failed_build.read_known(staging)['dealt']  # what the share check counted, for the report
    assert dealt[missed[1]] == int(missed[2]) and sum(dealt.values()) == int(missed[3]) == 2 + TWINS
    page = _text(open(os.path.join(staging, layout.REPORT_HTML), encoding='utf-8').read())
    reason = err[0][len('build-dataset: failed: '):err[0].rindex(' (report: ')]
    assert 'build failed' in page and html.escape(reason) in page
    assert f'{layout.LATEST}</code> names no version yet' in page
    for split, images in dealt.items():  # got against asked, as the check reckoned them
        share = images / sum(dealt.values())
        assert (f'<td>{split}</td><td class="n">50</td><td class="n">50.0%</td><td class="n">{share:.1%}</td>'
                f'<td class="n">{100 * share - 50:+.1f}</td><td class="n">{images}</td>') in page, split


def test_too_many_quarantined_show_the_counts_and_the_quarantine(damaged, tmp_path, capsys):
    output = tmp_path / 'out'
    status, _, err = _main(capsys, damaged, output, '--near_duplicates', 'off')
    assert status == 1 and len(err) == 1 and 'over --max_error_rate 5.0%' in err[0], err
    staging = _report_named(err[0], output)
    known = failed_build.read_known(staging)
    assert known['counts']['inputs'] == 10 and known['counts']['quarantined'] == 2
    assert sum(split['written'] for split in known['splits'].values()) == known['counts']['written'] == 8
    quarantined = list(version_lib.iter_jsonl(staging, layout.QUARANTINE_JSONL))
    page = _text(open(os.path.join(staging, layout.REPORT_HTML), encoding='utf-8').read())
    counts = known['counts']
    assert (f'<td class="n">{counts["inputs"]}</td><td class="n">{counts["written"]}</td>'
            f'<td class="n">{counts["quarantined"]}</td>') in page
    for item in quarantined:
        assert item['source'] in page
    assert f'{len(quarantined)} inputs not written' in page


@requires_chromium
def test_the_failed_report_opens_in_chromium_and_says_why(grouped, tmp_path, capsys):
    _, _, err = _main(capsys, grouped, tmp_path / 'out', *PERCEPTUAL)
    staging = _report_named(err[0], tmp_path / 'out')
    page = open_page(os.path.join(staging, layout.REPORT_HTML), TEXT, str(tmp_path / 'profile'))
    assert page.errors == [] and page.requests == []
    shown = json.loads(page.evaluated)
    text = re.sub(r'\s+', ' ', shown['text'])
    assert 'build failed' in text and 'The build failed and published nothing' in text
    assert err[0][len('build-dataset: failed: '):err[0].rindex(' (report: ')] in text
    assert len(shown['links']) == shown['headings'] and all(found for _, found in shown['links']), shown['links']
    assert {href for href, _ in shown['links']} >= {'#counts', '#shares', '#quarantine', '#options', '#left'}


def test_builds_name_the_staging_folders_left_and_what_clean_removes(grouped, tmp_path, capsys):
    output = tmp_path / 'out'
    _, _, err = _main(capsys, grouped, output, *PERCEPTUAL)
    failed = os.path.basename(_report_named(err[0], output))
    # A build that holds its lease now: a running build's staging folder, never offered for removal.
    running = layout.staging_name('v9', 'running0001')
    os.makedirs(output / running)
    with staging.build_lease(str(output), str(output / running)):
        # --no_resume: this build (another --split_tolerance, a run option) would take up the failed one's records
        status, out, _ = _main(capsys, grouped, output, *PERCEPTUAL, '--split_tolerance', '50', '--version', 'v1', '--no_resume')
        assert status == 0
        assert (f'build-dataset: 1 staging folder(s) of failed or killed builds in {output}: {failed} '
                f'(report: {output / failed / layout.REPORT_HTML}); --clean removes it') in out, out
        assert (f'build-dataset: 1 staging folder(s) of running builds (a live lease holds it; --clean never '
                f'removes one): {running}') in out, out
        status, out, _ = _main(capsys, grouped, output, *PERCEPTUAL, '--split_tolerance', '50', '--version', 'v2', '--clean')
        assert status == 0
        assert f'build-dataset: removed 1 staging folder(s) of failed or killed builds: {failed}' in out, out
        assert not (output / failed).exists() and (output / running).is_dir()
        assert not any(f'of failed or killed builds in {output}' in line for line in out), out
    # Its lease gone, the folder is one a build left: removed, as v1 was published after it was last written.
    status, out, _ = _main(capsys, grouped, output, *PERCEPTUAL, '--split_tolerance', '50', '--version', 'v3')
    assert status == 0 and f'build-dataset: removed 1 staging folder(s) of failed or killed builds: {running}' in out


def test_a_line_names_five_folders_then_how_many_more(tmp_path):
    names = [layout.staging_name(f'v{i}', f'build{i:04d}') for i in range(7)]
    for name in names:
        os.makedirs(tmp_path / name)
    (line,) = incomplete.lines(Output.at(str(tmp_path)), names)
    shown = sorted(names)[:incomplete.NAMED]
    assert line == (f'build-dataset: 7 staging folder(s) of failed or killed builds in {tmp_path}: '
                    f'{", ".join(shown)} and 2 more; --clean removes them')


def test_a_report_that_cannot_be_written_leaves_the_failure_line_as_it_was(tmp_path):
    (tmp_path / 'file').write_text('in the way of the staging folder')
    with pytest.raises(BuildFailed) as raised:
        with failed_build.reporting(str(tmp_path / 'file' / 'v1.incomplete-x'), {
                'name': 'n', 'version': 'v1', 'created': '2026-01-01T00:00:00Z', 'options': {}, 'previous': None},
                storage.storage_for(str(tmp_path), retries.default_policy(1.0))):
            raise BuildFailed('split train would hold 9 of 14 images')
    assert str(raised.value) == 'split train would hold 9 of 14 images'


def test_build_from_python_raises_the_same_line_with_its_report(grouped, tmp_path):
    with pytest.raises(BuildFailed) as raised:
        python_api.build(str(grouped), str(tmp_path / 'out'), image_size=32, splits={'train': 50, 'validation': 50},
                         near_duplicate_check='perceptual', progress=False,
                         beam_options=['--direct_running_mode=in_memory'])
    _report_named(f'build-dataset: failed: {raised.value}', tmp_path / 'out')


def test_on_gcs_the_report_is_written_and_named_by_the_next_build(gcs_emulator, damaged, capsys):  # noqa: F811
    bucket = gcs_emulator.create_bucket('failed-build-report')
    gcs_emulator.upload_folder(str(damaged), f'{bucket}/images')
    output = f'{bucket}/out'
    status, _, err = _main(capsys, f'{bucket}/images', output, '--near_duplicates', 'off')
    assert status == 1 and len(err) == 1 and 'over --max_error_rate' in err[0], err
    path = re.fullmatch(r'build-dataset: failed: .* \(report: (\S+)\)', err[0])[1]
    staging = path.rsplit('/', 1)[0]
    assert staging.rsplit('/', 1)[0] == output and layout.is_staging_name(staging.rsplit('/', 1)[1])
    page = gcs_emulator.read_bytes(path).decode('utf-8')
    assert 'build failed' in page and 'over --max_error_rate' in page and 'bad_0.jpg' in page
    status, out, _ = _main(capsys, f'{bucket}/images', output, '--near_duplicates', 'off', '--max_error_rate', '1')
    assert status == 0
    assert (f'build-dataset: 1 staging folder(s) of failed or killed builds in {output}: '
            f'{staging.rsplit("/", 1)[1]} (report: {path}); --clean removes it') in out, out


def test_a_split_asked_for_that_got_no_image_has_its_row(tmp_path):
    page = report_page.render_failed(str(tmp_path), {
        'name': 'n', 'version': 'v1', 'created': '2026-01-01T00:00:00Z', 'previous': 'v0',
        'options': {'splits': {'train': 80, 'validation': 20}}, 'reason': 'split validation would hold 0 of 5 images',
        'known': {'dealt': {'train': 5}}})
    assert ('<td>validation</td><td class="n">20</td><td class="n">20.0%</td><td class="n">0.0%</td>'
            '<td class="n">-20.0</td><td class="n">0</td>') in page
    assert f'{layout.LATEST}</code> still names version <code>v0</code>' in page
