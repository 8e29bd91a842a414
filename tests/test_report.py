"""The build report of the torture corpus (quarantined inputs, duplicates, several classes), opened in
Debian's headless Chromium: a non-blank page, every image loaded, the charts there, no console error,
nothing fetched. And ``dataset-report`` re-renders it."""
import collections
import io
import json
import os
import re

from PIL import Image

from imgrec.contract import layout
from imgrec.contract.example import decode_example
from imgrec.versions import shard_reader, version as version_lib
from imgrec.versions.report import command as report_command, facts as report_facts, page as report_page
from tests.chromium import open_page, requires_chromium
from tests.torture_fixtures import torture_build, torture_corpus  # noqa: F401  (the fixtures)

# What the page shows, measured by the browser itself.
PROBE = """JSON.stringify({
  images: document.images.length,
  broken: Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
  charts: Array.from(document.querySelectorAll('img.chart')).filter(i => i.naturalWidth > 0).length,
  samples: Object.fromEntries(Array.from(document.querySelectorAll('h3')).filter(h => h.nextElementSibling &&
    h.nextElementSibling.classList.contains('grid')).map(h => [h.textContent,
    h.nextElementSibling.querySelectorAll('img.sample').length])),
  quarantined: Array.from(document.querySelectorAll('img.quarantined')).map(i => i.alt),
  text: document.body.innerText,
})"""


def _version(output):
    return version_lib.load(os.path.join(output, 'v1'))


@requires_chromium
def test_the_report_opens_in_chromium_with_every_image_and_chart(torture_build, tmp_path):
    output, _ = torture_build
    version = _version(output)
    document = version.document
    page = open_page(os.path.join(version.path, layout.REPORT_HTML), PROBE, str(tmp_path / 'chromium-profile'))
    assert page.errors == [] and page.requests == []
    shown = json.loads(page.evaluated)
    assert shown['broken'] == []
    # A class histogram and shard sizes a split, and the inputs' sizes and aspect ratios.
    assert shown['charts'] == 2 * len(document['splits']) + 2
    written = collections.Counter()
    for info in document['splits'].values():
        written.update(info['class_counts'])
    assert shown['samples'] == {label: min(report_facts.SAMPLES_PER_CLASS, written[label]) for label in document['labels']}
    assert sum(shown['samples'].values()) > 0

    quarantined = list(version_lib.iter_jsonl(version.path, layout.QUARANTINE_JSONL))
    for reason, count in document['quarantine']['by_reason'].items():
        assert re.search(rf'{reason}\s.*\s{count}\s', shown['text']), reason
    # Inputs refused after decoding (same bytes under two labels, too small) still show; others cannot.
    by_source = {item['source']: item['reason'] for item in quarantined}
    assert {by_source[source] for source in shown['quarantined']} >= {'label_conflict'}
    assert not {by_source[source] for source in shown['quarantined']} & {'empty', 'not_an_image', 'too_many_pixels'}
    for duplicate in version_lib.iter_jsonl(version.path, layout.DUPLICATES_JSONL):
        assert duplicate['source'] in shown['text']
    for decision in document['decoding']['decisions']:
        assert decision in shown['text']
    assert 'Build time' in shown['text'] and 'records/s' in shown['text']

    screenshot = Image.open(io.BytesIO(page.screenshot)).convert('RGB')
    assert screenshot.width >= 1000 and len(screenshot.getcolors(1 << 24)) > 100, 'a blank page'


def test_the_build_time_survives_a_re_render_and_can_be_given(torture_build, capsys):
    output, _ = torture_build
    path = os.path.join(output, 'v1', layout.REPORT_HTML)
    built = report_page.recorded_build_seconds(os.path.join(output, 'v1'))
    assert built is not None and built > 0
    before = open(path, encoding='utf-8').read()
    assert report_command.main([output]) == 0
    assert capsys.readouterr().out == f'dataset-report: wrote {path}\n'
    assert open(path, encoding='utf-8').read() == before  # same files, same build time: same page
    assert report_command.main([os.path.join(output, 'v1'), '--build_seconds', '12.5']) == 0
    assert 'Build time 12.5 s' in open(path, encoding='utf-8').read()
    assert report_command.main([output, '--build_seconds', str(built)]) == 0


def test_no_dataset_is_a_one_line_error(tmp_path, capsys):
    assert report_command.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f'dataset-report: error: no dataset found at {tmp_path}: expected '
                                       f'{layout.DATASET_JSON} or {layout.LATEST} there\n')


def test_the_reports_example_reader_agrees_with_tensorflows_parser(built_dataset):
    """The report reads records without TensorFlow (Beam workers have none): it must read what TF reads."""
    from imgrec.training.example_parsing import parse_example

    version = version_lib.load(built_dataset)
    checked = 0
    for _, _, path in version_lib.shard_paths(version):
        for serialized in shard_reader.read_shard(path):
            ours = decode_example(serialized)
            theirs = {key: value.numpy() for key, value in parse_example(serialized).items()}
            assert ours == theirs
            checked += 1
    assert checked == version.document['counts']['written']
