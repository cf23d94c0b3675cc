"""The vendor-neutral kernel contract: the kernel row (one field table), the cell store, kernel identity and names.

Every importer (ncu today, other vendors' beside it) writes rows of this contract; the stages above read it without
knowing which tool made a row. It imports nothing of any importer.
"""
