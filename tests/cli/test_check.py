"""`referee check`: the tree, what rollouts need, what serve would refuse."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import run


def test_check_shows_the_tree_and_what_rollouts_need(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "components:\n"
        "  answer: {type: math_answer, weight: 0.8}\n"
        "  judge: {type: json_valid, weight: 0.2, on_failure: omit}\n"
    )  # fmt: skip
    code, output = run("check", str(spec))
    assert code == 0, output
    assert "answer weight 0.8: math_answer (process, deadline 6s)" in output
    assert "judge weight 0.2, optional: json_valid (inline" in output
    assert "each rollout needs: reference (answer): its reference, or --map" in output


def test_check_names_the_token_count_a_length_in_tokens_needs(tmp_path: Path) -> None:
    """A `length` counting tokens needs a token count, which a log must carry (issue 46: check
    listed only the reference, and every row then had no value)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "components:\n"
        "  answer: {type: exact_match, weight: 0.8}\n"
        "  short: {type: length, unit: tokens, max_length: 100, weight: 0.2}\n"
    )  # fmt: skip
    code, output = run("check", str(spec))
    assert code == 0, output
    assert "tokens (short): metadata.completion_ids or metadata.completion_tokens" in output


def test_check_says_what_serve_would_refuse_and_fails_on_a_bad_spec(tmp_path: Path) -> None:
    code_spec = tmp_path / "code.yaml"
    code_spec.write_text("type: python_tests\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("type: math_answr\n")
    code, output = run("check", str(code_spec), str(bad))
    assert code == 1
    assert "referee serve` needs --trust-clients" in output
    assert f"{bad}: type: unknown reward type" in output
