"""The version commands' shared command line: the OUT[/VERSION] argument, on the commands' one parser."""
from imgrec_console.arguments import Parser


def parser(prog, description):
    """An argument parser taking OUT[/VERSION] first; a mistake raises UserError (one line, exit status 2)."""
    result = Parser(prog=prog, description=description)
    result.add_argument('path', metavar='OUT[/VERSION]', help='output folder (its LATEST version) or a version folder')
    return result
