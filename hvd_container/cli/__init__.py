"""The command line: parses, calls one library function, prints.

Kept empty so that the console script (cli/entry.py) can answer `run --dry-run` through
cli/quick_dry_run.py without importing typer (cli/app.py).
"""
