"""The inspection commands' shared command line: the version argument, and usage errors in one line."""
import argparse
import sys


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f'{self.prog}: error: {message}', file=sys.stderr)
        sys.exit(2)


def parser(prog, description):
    """An argument parser taking OUT[/VERSION] first, whose mistakes end in one line and exit status 2."""
    result = _Parser(prog=prog, description=description)
    result.add_argument('path', metavar='OUT[/VERSION]', help='output folder (its LATEST version) or a version folder')
    return result
