"""The command line: parses, calls one library function, prints (cli/app.py)."""
