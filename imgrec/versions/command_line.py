"""The version commands' shared command line: the DATASET argument (OUT[/VERSION]), on the commands' one parser."""
from imgrec.console.arguments import Parser


def parser(prog, description):
    """An argument parser taking DATASET (OUT[/VERSION]) first; a mistake raises UserError (one line, exit status 2)."""
    result = Parser(prog=prog, description=description)
    result.add_dataset(dest='path', help='output folder (its LATEST version) or a version folder, local or gs://')
    return result
