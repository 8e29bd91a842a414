"""The commands' shared convention: one line and an exit status for every failure, fd 2 held and handed
back, a log file for an unexpected failure, one parser, and an exit without the interpreter's teardown."""
import os
import subprocess
import sys

import pytest

from imgrec.console.arguments import Parser
from imgrec.console.command import Command, was_interrupted
from imgrec.console.errors import BuildFailed, DataError, UserError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_WRITES_TO_FD2 = [sys.executable, '-c', 'import sys; sys.stderr.write("a line from a child process\\n")']


def _command(raised=None, verbose=False, replay=False):
    """Runs a command body whose child process writes to fd 2, then raises ``raised``; returns its status."""
    with Command('tool') as command:
        command.begin(verbose=verbose)
        subprocess.run(CHILD_WRITES_TO_FD2, check=True)
        if raised:
            raise raised
        command.release(replay=replay)
        return 0
    return command.status


@pytest.mark.parametrize('raised, line, status', [
    (UserError('--size must be at least 1'), 'tool: error: --size must be at least 1', 2),
    (DataError('split train is damaged'), 'tool: error: split train is damaged', 1),
    (BuildFailed('3 of 40 inputs quarantined'), 'tool: failed: 3 of 40 inputs quarantined', 1),
])
def test_an_error_of_the_command_is_one_line_with_its_status_and_what_fd2_held_stays_held(capfd, raised, line,
                                                                                          status):
    assert _command(raised) == status
    assert capfd.readouterr().err == line + '\n'


def test_an_unexpected_failure_names_a_log_holding_what_fd2_held_and_the_traceback(capfd):
    assert _command(RuntimeError('disk on fire\nsecond line')) == 1
    [line] = capfd.readouterr().err.splitlines()
    assert line.startswith('tool: failed: RuntimeError: disk on fire (details in ')
    assert line.endswith('; --verbose shows them)')
    log = line.split('details in ')[1].split(';')[0]
    try:
        text = open(log).read()
    finally:
        os.remove(log)
    assert text.index('a line from a child process') < text.index('Traceback (most recent call last)')
    assert 'RuntimeError: disk on fire' in text


def test_verbose_holds_nothing_and_an_unexpected_failure_raises_on(capfd):
    with pytest.raises(RuntimeError, match='disk on fire'):
        _command(RuntimeError('disk on fire'), verbose=True)
    assert capfd.readouterr().err == 'a line from a child process\n'


def test_a_run_that_went_well_replays_what_fd2_held_only_when_asked(capfd):
    assert _command() == 0
    assert capfd.readouterr().err == ''
    assert _command(replay=True) == 0
    assert capfd.readouterr().err == 'a line from a child process\n'


def test_a_mistake_before_the_body_begins_is_one_line(capsys):
    with Command('tool') as command:
        Parser(prog='tool').parse_args(['--bogus'])
    assert command.status == 2
    assert capsys.readouterr().err == 'tool: error: unknown option --bogus\n'


def test_the_help_shows_every_default_that_its_text_does_not_already_say():
    parser = Parser(prog='tool')
    parser.add_argument('--quiet', action='store_true', help='print less')
    parser.add_argument('--workers', type=int, default=8, help='shards at once')
    parser.add_argument('--model_dir', help='where to write (default: runs/<time>)')
    parser.add_argument('--rate', type=float, default=0.5, help='a rate (default is half)')
    text = ' '.join(parser.format_help().split())
    assert 'print less (default: off)' in text and 'shards at once (default: 8)' in text
    assert text.count('default') == 4  # the two added, and the two the help texts already said


@pytest.mark.parametrize('body, status, stderr', [
    ('return 3', 3, ''),
    ('raise SystemExit(0)', 0, ''),
    ('raise ValueError("a --verbose failure")', 1, 'ValueError: a --verbose failure'),
])
def test_an_entry_point_exits_with_the_status_after_flushing_and_without_the_interpreters_teardown(body, status,
                                                                                                   stderr):
    code = '\n'.join([
        'import atexit, sys',
        'from imgrec.console.command import run_command',
        'atexit.register(lambda: print("the interpreter was torn down", file=sys.stderr))',
        'def main(argv):',
        '    sys.stdout.write("no newline yet")',
        f'    {body}',
        'run_command(main)',
    ])
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (result.returncode, result.stdout) == (status, 'no newline yet')
    assert 'torn down' not in result.stderr
    assert stderr in result.stderr and ('Traceback' in result.stderr) == bool(stderr)


def test_a_ctrl_c_a_runner_rewrapped_is_still_told_apart_from_a_failure():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError('a step failed') from interrupt
    except RuntimeError as error:
        chained = error
    assert was_interrupted(chained)
    assert was_interrupted(RuntimeError("KeyboardInterrupt [while running 'Encode/Decode']"))
    assert not was_interrupted(RuntimeError('disk on fire')) and not was_interrupted(ValueError('KeyboardInterrupted'))
