"""Why an input was quarantined: the stable reason codes of quarantine.jsonl, reports and metrics."""

# Why an input was quarantined: the ``reason`` of a Rejected, a stable code for reports and metrics.
EMPTY = 'empty'
NOT_AN_IMAGE = 'not_an_image'
UNSUPPORTED_FORMAT = 'unsupported_format'
TOO_MANY_PIXELS = 'too_many_pixels'
TOO_SMALL = 'too_small'
TRUNCATED = 'truncated'
CORRUPT = 'corrupt'
READ_ERROR = 'read_error'
NOT_A_FILE = 'not_a_file'
LABEL_CONFLICT = 'label_conflict'
NEAR_DUPLICATE_CONFLICT = 'near_duplicate_label_conflict'
UNKNOWN_LABEL = 'unknown_label'
BAD_LABEL = 'bad_label'
BAD_MANIFEST_LINE = 'bad_manifest_line'
REASONS = {
    EMPTY: 'the file has no bytes',
    NOT_AN_IMAGE: 'the bytes are no image format Pillow knows (an HTML error page, text, a resource fork)',
    UNSUPPORTED_FORMAT: 'an image format or pixel mode the build does not accept (PPM, PSD, float or Lab pixels)',
    TOO_MANY_PIXELS: 'width x height in the header exceeds --max_pixels (checked before decoding)',
    TOO_SMALL: 'the short side is under --min_size',
    TRUNCATED: 'the file ends before its pixel data does',
    CORRUPT: 'the header or the pixel data is invalid',
    READ_ERROR: 'the file is missing or forbidden, or its path cannot be opened (a symlink loop, a name too long); '
                'transient read errors are retried, then fail the build',
    NOT_A_FILE: 'not a regular file after following symlinks (a FIFO, socket, device or folder): never opened',
    LABEL_CONFLICT: 'the same bytes are filed under more than one label; every copy is quarantined',
    NEAR_DUPLICATE_CONFLICT: 'a near-duplicate of an image filed under another label, with '
                             '--near_duplicate_conflicts quarantine (the default keeps both); both are quarantined',
    UNKNOWN_LABEL: 'the class is not in the --labels file (a choice, so not counted as an error)',
    BAD_LABEL: 'the class name holds a line break or NUL, which labels.txt cannot hold',
    BAD_MANIFEST_LINE: 'a --manifest line that is not "path,label"',
}
# Reasons that follow from the user's own choice rather than a bad input: not counted by --max_error_rate.
NOT_ERRORS = frozenset((UNKNOWN_LABEL,))

