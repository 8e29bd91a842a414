"""Storage I/O: local and gs:// files, retries, framing, spill files and the publication protocol."""
