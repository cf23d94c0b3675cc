"""capture diagnose: why an ncu capture failed or came back empty, from its log (log.py) or its report (report.py)."""
