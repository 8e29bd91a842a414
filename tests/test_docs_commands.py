"""The README and docs/ tell the truth: their local commands run, their links and module paths exist.

Every ``sh`` block of README.md and docs/*.md is either run or skipped for a stated reason:

- A block right after the line ``<!-- runnable -->`` (invisible once rendered) is run command by command,
  in one temporary folder, README.md first and then docs/ in name order, so a page may use what an
  earlier page made (the README's block makes ``data/demo`` and ``runs/demo``). A command in it that
  matches a reason in ``SKIPPED`` (a ``gs://`` path, say) is skipped; a command identical to one already
  run is not run again, counting ``python -m MODULE`` and MODULE's console script (setup.py) as one.
- Any other ``sh`` block must match a reason in ``SKIPPED``: a local command cannot hide in an unmarked
  block.

The pages show real data sizes. Here they shrink, and only through ``SMALL`` (an option's value replaced
wherever it appears) and ``PLACEHOLDERS`` (a name the docs use for something a run decides):

- ``--per_class 6``: 24 generated images instead of 640;
- ``--image_size 32``, ``--epochs 1``, ``--batch_size 4``;
- ``runs/demo/export/900``, the step a 6-epoch demo run exports at, becomes the newest export of the
  1-epoch run.
"""
import os
import pathlib
import re
import shlex
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
README = REPO / 'README.md'
PAGES = [README] + sorted((REPO / 'docs').glob('*.md'))
RUNNABLE = '<!-- runnable -->'
SHELL_LANGUAGES = {'sh', 'console', 'bash', 'shell'}
README_MAX_LINES = 150
PAGE_MAX_LINES = 300  # a reference page: a longer one holds history, which git keeps

SKIPPED = [
    (r'gs://', 'reads or writes Google Cloud Storage'),
    (r'\bgcloud\b', 'needs a Google Cloud project'),
    (r'\bdocker\b', 'needs Docker and the TF Serving image'),
    (r'\bcurl\b[^\n]*localhost', 'needs a running model server'),
    (r'\b(systemctl|loginctl|journalctl)\b', "changes this machine's systemd units"),
    (r'^\s*[\d*/,-]+( [\d*/,-]+){4} ', 'a crontab line'),
    (r'\bmake (demo|test|install|template)\b',
     'a Makefile target: checked against the Makefile, too slow (or recursive) to run here'),
    (r'\bbenchmarks/', 'a benchmark: minutes of the whole machine, run by hand'),
    (r'\bpytest\b', 'runs the test suite itself'),
    (r' \.\.\.\s*(#|$)', 'elides its arguments (...): a sketch of a command, not one'),
]
SMALL = {'--per_class': '6', '--image_size': '32', '--epochs': '1', '--batch_size': '4'}
PLACEHOLDERS = {'runs/demo/export/900': lambda folder: max((folder / 'runs' / 'demo' / 'export').iterdir(),
                                                           key=lambda export: int(export.name))}
# The tools the runnable blocks must exercise: dropping a block's mark fails here, not silently.
MUST_RUN = ('imgrec.samples.generate', 'build-dataset', 'verify-dataset', 'dataset-report', 'train-model',
            'imgrec.training.train', 'saved_model_cli', 'imgrec.samples.torture')
# Top-level folders whose paths the docs name, and the packages whose dotted module names they name.
SOURCE_FOLDERS = ('imgrec', 'transforms', 'pipelines', 'training', 'benchmarks', 'templates', 'examples',
                  'tests', 'requirements')
PACKAGES = ('imgrec',)


def _blocks(page):
    """(language, text, runnable, line number) of each fenced block of a page."""
    lines = page.read_text().splitlines()
    blocks, index = [], 0
    while index < len(lines):
        fence = re.match(r'^```(\w*)\s*$', lines[index])
        if not fence:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith('```'))
        runnable = index > 0 and lines[index - 1].strip() == RUNNABLE
        blocks.append((fence[1], '\n'.join(lines[index + 1:end]) + '\n', runnable, index + 1))
        index = end + 1
    return blocks


def _shell_blocks():
    return [(page, text, runnable, line) for page in PAGES for language, text, runnable, line in _blocks(page)
            if language in SHELL_LANGUAGES]


def _commands(text):
    """The block's commands: continuation lines joined, blank and comment lines dropped."""
    joined = re.sub(r'\\\n\s*', ' ', text)
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith('#')]


def _skip_reason(text):
    joined = re.sub(r'\\\n\s*', ' ', text)
    return next((reason for pattern, reason in SKIPPED if re.search(pattern, joined, re.MULTILINE)), None)


def _shrunk(command, folder):
    for option, value in SMALL.items():
        command = re.sub(rf'(?<!\S){re.escape(option)}(=|\s+)\S+', rf'{option}\g<1>{value}', command)
    for placeholder, actual in PLACEHOLDERS.items():
        if placeholder in command:
            command = command.replace(placeholder, str(actual(folder).relative_to(folder)))
    return command


def _console_scripts():
    """{'imgrec.training.train': 'train-model', ...}: the console scripts setup.py declares, by module."""
    return {module: name for name, module in
            re.findall(r"'([\w-]+)=([\w.]+):\w+'", (REPO / 'setup.py').read_text())}


def _as_run(command):
    """The command as it is compared with those already run: ``python -m MODULE`` is MODULE's script."""
    scripts = _console_scripts()
    return re.sub(r'^python -m ([\w.]+)', lambda match: scripts.get(match[1], match[0]), command)


def _where(page, line):
    return f'{page.relative_to(REPO)}:{line}'


def test_every_shell_block_is_run_or_skipped_for_a_stated_reason():
    for page in PAGES:
        text = page.read_text()
        # A mark not right above a fence would leave its block unmarked without anyone seeing it.
        assert text.count(RUNNABLE) == len([b for b in _blocks(page) if b[2]]), page
    unmarked = [(page, text, line) for page, text, runnable, line in _shell_blocks() if not runnable]
    for page, text, line in unmarked:
        assert _skip_reason(text), f'{_where(page, line)}: mark the block {RUNNABLE} or make it match a reason'
    run = [command for page, text, runnable, line in _shell_blocks() if runnable
           for command in _commands(text) if not _skip_reason(command)]
    for tool in MUST_RUN:
        assert any(re.search(rf'(^|\s){re.escape(tool)}\s', command + ' ') for command in run), tool


def test_the_runnable_commands_run(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO),
               PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ.get('PATH', '')]))
    ran, skipped = [], []
    for page, text, runnable, line in _shell_blocks():
        if not runnable:
            continue
        for command in _commands(text):
            reason = _skip_reason(command)
            if reason:
                skipped.append((command, reason))
                continue
            command = _shrunk(command, tmp_path)
            if _as_run(command) in ran:
                continue
            # The timeout only keeps a hung command from hanging the suite; it measures nothing.
            result = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                                    timeout=600, check=False)
            assert result.returncode == 0, f'{_where(page, line)}: {command}\n{result.stdout}\n{result.stderr}'
            ran.append(_as_run(command))
    # What the README's block promises is there: a published version with its report, and an export.
    latest = (tmp_path / 'data' / 'demo' / 'records' / 'LATEST').read_text().strip()
    version = tmp_path / 'data' / 'demo' / 'records' / latest
    assert (version / 'dataset.json').is_file() and (version / 'report.html').is_file()
    assert list((tmp_path / 'runs' / 'demo' / 'export').iterdir())
    assert {reason for _, reason in skipped} == {'reads or writes Google Cloud Storage'}


def test_every_python_block_is_python():
    # A fence closed in the wrong place leaves other text inside the code: it no longer parses.
    blocks = [(page, text, line) for page in PAGES for language, text, _, line in _blocks(page) if language == 'python']
    assert blocks
    for page, text, line in blocks:
        compile(text, _where(page, line), 'exec')


def _links(page):
    """Relative link targets of a page (Markdown links outside code), with their anchors."""
    text = re.sub(r'^```.*?^```', '', page.read_text(), flags=re.MULTILINE | re.DOTALL)
    text = re.sub(r'`[^`\n]*`', '', text)
    return [target for target in re.findall(r'\]\(([^)\s]+)\)', text) if not re.match(r'[a-z]+:', target)]


def _anchors(page):
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r'^```.*?^```', '', page.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')
            for heading in re.findall(r'^#+ (.+)$', text, re.MULTILINE)}


def test_every_relative_link_resolves():
    checked = 0
    for page in PAGES:
        for target in _links(page):
            path, _, anchor = target.partition('#')
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.is_file(), f'{page.relative_to(REPO)}: {target}'
            if anchor:
                assert anchor in _anchors(resolved), f'{page.relative_to(REPO)}: {target}'
            checked += 1
    assert checked


def _makefile_targets():
    makefile = (REPO / 'Makefile').read_text()
    return set(re.findall(r'^([\w-]+):', makefile, re.MULTILINE))


def test_the_readme_is_a_front_door_that_leads_with_two_makefile_targets():
    assert len(README.read_text().splitlines()) <= README_MAX_LINES
    language, text, _, _ = _blocks(README)[0]
    assert language == 'sh'
    assert [shlex.split(command, comments=True) for command in _commands(text)] == [['make', 'demo'],
                                                                                     ['make', 'test']]
    assert {'demo', 'test'} <= _makefile_targets()


def test_every_page_is_a_reference_within_its_size():
    long = {page.name: lines for page in PAGES[1:] if (lines := len(page.read_text().splitlines())) > PAGE_MAX_LINES}
    assert not long, long


def test_every_make_command_shown_is_a_makefile_target():
    shown = {target for _, text, _, _ in _shell_blocks() for target in re.findall(r'\bmake (\w[\w-]*)', text)}
    assert shown and shown <= _makefile_targets(), shown - _makefile_targets()


def _mentioned(pattern):
    """Every backquoted text of the pages that matches ``pattern``, with where it is."""
    found = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            found += [(quoted, _where(page, number)) for quoted in re.findall(r'`([^`\s]+)`', line)
                      if re.fullmatch(pattern, quoted)]
    return found


def _module_file(module):
    relative = pathlib.Path(*module.split('.'))
    return next((path for path in (REPO / relative.with_suffix('.py'), REPO / relative / '__init__.py')
                 if path.is_file()), None)


def _defined(dotted):
    """Whether ``package.module[.name]`` is a module of the repository, or a name its module defines."""
    parts = dotted.split('.')
    for end in range(len(parts), 0, -1):  # down to imgrec alone: imgrec.build is a name its __init__ defines
        module = _module_file('.'.join(parts[:end]))
        if module:
            return end == len(parts) or (end == len(parts) - 1 and re.search(
                rf'^(def|class) {parts[-1]}\b|^{parts[-1]}\b[^=\n]*=', module.read_text(), re.MULTILINE))
    return False


def test_every_source_path_and_module_the_docs_name_exists():
    folders = '|'.join(SOURCE_FOLDERS)
    paths = _mentioned(rf'(\./)?({folders})/[\w./*-]*')
    assert paths
    for path, where in paths:
        assert list(REPO.glob(path.removeprefix('./').rstrip('/'))), f'{where}: {path}'
    # A module named by its file alone, in its package's row or list, is somewhere in the sources.
    for name, where in _mentioned(r'\w+\.py'):
        assert [path for folder in SOURCE_FOLDERS for path in (REPO / folder).rglob(name)], f'{where}: {name}'
    packages = '|'.join(PACKAGES)
    for dotted, where in _mentioned(rf'({packages})(\.\w+)+'):
        assert _defined(dotted), f'{where}: {dotted}'
    # Inside code blocks too: what python -m runs.
    for page in PAGES:
        for module in re.findall(rf'python -m ((?:{packages})[\w.]*)', page.read_text()):
            relative = pathlib.Path(*module.split('.'))
            assert ((REPO / relative.with_suffix('.py')).is_file() or (REPO / relative / '__main__.py').is_file()), \
                f'{page.relative_to(REPO)}: {module}'
