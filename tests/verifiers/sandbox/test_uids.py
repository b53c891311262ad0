"""Sandbox uids are never shared between workers, even across processes."""

from __future__ import annotations

import subprocess
import sys

from referee.verifiers.sandbox.uids import claim_uid, claimed

HOLDER = (
    "import sys, time\n"
    "from referee.verifiers.sandbox.uids import claim_uid\n"
    "claim = claim_uid(64000, 10)\n"
    "print(claim.uid, flush=True)\n"
    "sys.stdin.read()\n"  # hold it until told to exit
)


def test_another_process_holding_a_uid_is_skipped_until_it_exits() -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdin is not None
    theirs = int(holder.stdout.readline())
    mine = claim_uid(64000, 10)
    try:
        assert mine.uid != theirs
        assert mine.uid in claimed()
    finally:
        mine.release()
    holder.stdin.close()  # the holder exits; the kernel drops its lock
    holder.wait(10)
    again = claim_uid(theirs, 1)
    assert again.uid == theirs
    again.release()
    assert theirs not in claimed()


def test_claims_in_one_process_are_distinct() -> None:
    a, b = claim_uid(64100, 10), claim_uid(64100, 10)
    try:
        assert a.uid != b.uid
    finally:
        a.release()
        b.release()
