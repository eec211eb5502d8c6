"""Settings for every test run, fast or end to end."""

from __future__ import annotations

import signal

# A test runner started in the background of a non-interactive shell (`make test &`, some CI
# harnesses) inherits SIGINT ignored, and so would every command the tests start: Python then
# never raises KeyboardInterrupt and the Ctrl-C tests would wait in vain. Catching SIGINT here
# gives the children the default disposition again (exec resets caught signals, not ignored
# ones).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
