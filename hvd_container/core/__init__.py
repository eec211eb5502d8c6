"""The small core both sides share: error types, YAML loading with line numbers, atomic writes,
and image references (pure string work, on the launcher's fast path too).

It imports nothing from the build side (containers), the launch side (launcher) or the CLI.
"""
