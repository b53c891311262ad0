from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

import pytest

import referee
from referee.rewards import MathAnswer
from tests.support.rollouts import make


@pytest.mark.parametrize(
    ("completion", "reference", "value"),
    [
        (r"The answer is $\boxed{\frac{1}{2}}$", "0.5", 1.0),  # equivalent forms
        (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
        (r"so $x = \boxed{3}$", "3", 1.0),
        (r"\boxed{4}", "3", 0.0),
        (r"first \boxed{4}, no wait \boxed{3}", "3", 0.0),  # several boxed = hedging: a set, wrong
        ("The answer is 42.", 42, 1.0),  # numeric reference, plain-text answer
        (r"\boxed{2\sqrt{2}}", r"\sqrt{8}", 1.0),  # symbolic equality
        (r"\boxed{\{1, 2\}}", r"\{2, 1\}", 1.0),  # sets
    ],
)
def test_math_answers(completion: str, reference: Any, value: float) -> None:
    assert referee.score(MathAnswer(), [make(completion, reference)])[0].value == value


def test_no_answer_is_zero_with_reason() -> None:
    s = referee.score(MathAnswer(answer="boxed"), [make("I do not know", "3")])[0]
    assert s.value == 0.0 and s.reason == "no answer found"


def test_pattern_narrows_the_completion() -> None:
    reward = MathAnswer(pattern=r"<answer>(.*?)</answer>")
    s = referee.score(reward, [make(r"<think>maybe 5</think><answer>$7$</answer>", "7")])[0]
    assert s.value == 1.0


@pytest.mark.parametrize("reference", [{"a": 1}, None, True])
def test_bad_reference_is_a_failure(reference: Any) -> None:
    s = referee.score(MathAnswer(), [make(r"\boxed{1}", reference)])[0]
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"


def test_unparsable_reference_is_a_failure() -> None:
    s = referee.score(MathAnswer(), [make(r"\boxed{1}", "")])[0]
    assert s.value is None and s.failure is not None


# Large exponent towers make sympy work for a very long time.
SLOW = r"\boxed{" + "9^{" * 12 + "9" + "}" * 12 + r"}"


def policy_timeout(score: referee.Score) -> bool:
    """The policy's verdict for an answer that made the check spin: 0, never a Failure (a
    trainer would mask it, and the policy would learn to write towers; issue 44)."""
    return score.value == 0.0 and score.failure is None and score.fault == "timeout"


def test_timeout_in_the_main_thread_is_the_policys_zero() -> None:
    reward = MathAnswer(timeout=0.5)
    s = referee.score(reward, [make(SLOW, "2")])[0]
    assert policy_timeout(s)


def test_works_and_times_out_in_worker_threads() -> None:
    # math-verify's own timeout raises in threads; referee's must not.
    reward = MathAnswer(timeout=0.5)
    rollouts = [make(r"\boxed{\frac{1}{2}}", "0.5"), make(SLOW, "2")]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda r: referee.score(reward, [r])[0], rollouts))
    assert results[0].value == 1.0
    assert policy_timeout(results[1])


def test_works_inside_a_running_event_loop_thread() -> None:
    out: list[referee.Score] = []

    def target() -> None:
        async def main() -> None:
            out.extend(await MathAnswer().score_batch([make(r"\boxed{3}", "3")]))

        asyncio.run(main())

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    assert out[0].value == 1.0


def test_an_outer_alarm_survives() -> None:
    import signal

    fired: list[int] = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        referee.score(MathAnswer(), [make(r"\boxed{1}", "1")])
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 30  # the caller's own timer is restored, not cancelled
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_catastrophic_pattern_answers_at_once() -> None:
    reward = MathAnswer(pattern=r"(a+)+b")
    [s] = referee.score(reward, [make("a" * 34 + "!", "3")])
    assert s.failure is None and s.value == 0.0


def test_backtracking_pattern_times_out_within_the_reward_timeout() -> None:
    reward = MathAnswer(pattern=r"^(a|a)+\1b", timeout=0.5)
    [s] = referee.score(reward, [make("a" * 40 + "!", "3")])
    assert policy_timeout(s)
    assert "0.5s limit" in (s.reason or "")


def _backtrack(text: str) -> bool:
    """Catastrophic backtracking in the stdlib engine: C, holding the interpreter lock, where
    no in-process deadline reaches."""
    import re

    return re.match(r"^(a+)+$", text) is not None


def test_verify_math_from_a_thread_keeps_its_deadline_in_a_worker() -> None:
    # Off the main thread, verify_math runs in a worker of referee.workers (the one pool for
    # checks that may spin in C): the right verdict, and a timeout for what runs long.
    from referee.errors import VerifierTimeout
    from referee.verifiers.math import verify_math

    def both() -> tuple[Any, Any]:
        ok = verify_math("0.5", r"\boxed{\frac{1}{2}}")
        try:
            verify_math("2", SLOW, timeout=0.5)
        except VerifierTimeout as exc:
            return ok, exc
        return ok, None

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ok, timed_out = pool.submit(both).result(timeout=60)
    assert ok.correct and ok.answer is not None
    assert isinstance(timed_out, VerifierTimeout)


def test_call_with_deadline_kills_a_spin_in_c_off_the_main_thread() -> None:
    from referee.errors import VerifierTimeout
    from referee.verifiers.math import call_with_deadline, verify_math

    def spin() -> BaseException | None:
        try:
            call_with_deadline(_backtrack, 0.5, "a" * 40 + "!")
        except VerifierTimeout as exc:
            return exc
        return None

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        assert pool.submit(call_with_deadline, _backtrack, 5.0, "aaa").result(timeout=60)
        assert isinstance(pool.submit(spin).result(timeout=60), VerifierTimeout)
        unparsable = pool.submit(verify_math, "", r"\boxed{1}")
        with pytest.raises(ValueError, match="could not be parsed"):
            unparsable.result(timeout=60)


def test_inline_math_still_scores_in_the_callers_thread() -> None:
    reward = referee.load({"type": "math_answer", "run_in": "inline", "timeout": 0.5})
    scores = referee.score(reward, [make(r"\boxed{3}", "3"), make(SLOW, "2")])
    assert scores[0].value == 1.0
    assert policy_timeout(scores[1])
