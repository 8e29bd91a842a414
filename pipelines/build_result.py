"""What a build returns: ``build()``'s published dataset.json, which shows itself as the build's summary,
and ``NothingChanged`` for a refresh that found nothing to publish.

A ``dict`` (the dataset.json document, as before), whose ``repr`` (what a notebook or a REPL shows) and
``str`` are the summary ``build-dataset`` prints (``summary``, given by ``summary.report``: one
formatter for both), and whose ``_repr_html_`` (what Jupyter shows instead) is a table of the same counts
and each split's share next to the share asked.
"""
import dataclasses
import html

from imgrec.storage.retention import Retention


def _share(value):
    return '' if value is None else f'{value:.1%}'


class BuildResult(dict):
    """The published dataset.json; ``summary`` is the command line's summary of the build."""

    def __init__(self, document, summary):
        super().__init__(document)
        self.summary = summary

    def __repr__(self):
        return self.summary

    __str__ = __repr__

    def _repr_html_(self):
        counts, escape = self['counts'], html.escape
        rows = ''.join(
            f"<tr><td>{escape(name)}</td><td>{split['num_examples']}</td><td>{_share(split.get('share'))}</td>"
            f"<td>{_share(split.get('requested_share'))}</td><td>{split['num_shards']}</td></tr>"
            for name, split in self['splits'].items())
        return (f"<div><p><b>{escape(self['name'])}</b> version <code>{escape(self['version'])}</code>: "
                f"wrote {counts['written']} of {counts['inputs']} images ({counts['quarantined']} quarantined, "
                f"{counts['duplicates']} duplicates, {counts['ignored']} non-image files ignored)</p>"
                '<table><thead><tr><th>split</th><th>examples</th><th>share</th><th>asked</th><th>shards</th></tr>'
                f'</thead><tbody>{rows}</tbody></table>'
                f'<details><summary>summary</summary><pre>{escape(self.summary)}</pre></details></div>')


@dataclasses.dataclass(frozen=True)
class NothingChanged:
    """The result of a refresh found to change nothing before any pipeline started: what pruning did."""
    retention: Retention | None
