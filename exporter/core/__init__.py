"""The floor everything stands on: span attribute names, errors, the process's settings, JSON
forms, masking and redaction, the current scope and steps, patching at import, telemetry
endpoints, units of work.
"""
