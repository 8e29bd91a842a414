"""The build report: ``report.html`` in a version folder, one self-contained page that opens offline.

Made from the version's files alone (dataset.json, labels.txt, quarantine.jsonl, duplicates.jsonl, the
record index and the shards), so the build's publish step writes it and ``dataset-report OUT[/VERSION]``
re-renders it. ``facts`` reads what the page shows, ``sections`` draws each part, ``page`` puts them
together and writes them, ``command`` is ``dataset-report``. Charts are SVG; images are inline data URLs;
no script. A build that fails gets a page of its own, of what it knew (``page.render_failed``).
"""
