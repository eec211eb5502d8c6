"""What a check says: pass, warn, fail, skip (it could not judge: it lacked what it needs) or
n/a (its rule does not apply to this launch or site), and the message (with the fix, or the
reason). Checks (launcher/checks/registry.py) return these, and so do the runtimes' and
controllers' answers to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["pass", "warn", "fail", "skip", "n/a"]


@dataclass(frozen=True)
class Verdict:
    status: Status
    message: str


def passed(message: str) -> Verdict:
    return Verdict("pass", message)


def warn(message: str) -> Verdict:
    return Verdict("warn", message)


def fail(message: str) -> Verdict:
    return Verdict("fail", message)


def skip(reason: str) -> Verdict:
    return Verdict("skip", reason)


def not_applicable(reason: str) -> Verdict:
    return Verdict("n/a", reason)
