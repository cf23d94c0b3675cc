"""The vendor-neutral kernel contract: the kernel row (one field table), the cell store, kernel identity and names.

Every importer (import_ncu, import_rocprof) writes rows of this contract; the stages above read it without knowing
which tool made a row. It imports nothing of any importer.
"""

# --hardware-mismatch of every importer: refuse a capture of another GPU than the campaign's, or import it with %SoL
# left null and a warning (here, not in cells.py, so the CLI's option table loads nothing more for it)
MISMATCH_CHOICES = ("refuse", "warn")
