"""Options that build every registered built-in reward type, and two rollouts for them.

A table of plain data, walked by the pickle round trip, the hostile battery and the worker
tests: a new built-in type is covered by adding its options here (a test in
``tests/test_pickle.py`` checks that every one is).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.ifeval_cases import ALL_INSTRUCTIONS
from tests.support.models import PROCESS_REWARD_MODEL_OPTIONS, REWARD_MODEL_OPTIONS
from tests.support.rollouts import make

_UNREACHABLE_JUDGE = {  # a closed port, no retries: a quick, deterministic Failure("judge")
    "model": "openai/gpt-4.1-mini",
    "api_base": "http://127.0.0.1:9/v1",
    "retries": 0,
    "cache": False,
}
# Options needed to build each type; every registered built-in must appear here.
OPTIONS: dict[str, dict[str, Any]] = {
    "json_valid": {"extract": "first"},
    "json_schema": {"schema": {"type": "object", "required": ["a"]}},
    "field_match": {"fields": {"a": {"number": {"rel_tol": 0.1}}, "b": "set_f1"}},
    "exact_match": {"pattern": r"Answer: (\w+)"},
    "contains": {"value": "1"},
    "regex": {"regex": r"\d", "flags": ["IGNORECASE"]},
    "format": {"preset": "think_answer"},
    "length": {"max_length": 10, "cache_length": 4, "unit": "chars"},
    "repetition": {"ngram_size": 2},
    "math_answer": {"pattern": r"<answer>(.*?)</answer>"},
    "python_tests": {"timeout": 5, "scoring": "all"},
    "io_tests": {"language": "python", "float_tol": 1e-6},
    "function_tests": {"language": "python", "float_tol": 1e-6},
    "pytest_tests": {"timeout": 20, "scoring": "all"},
    "patch_tests": {"timeout": 30, "scoring": "fraction", "protected_edits": "reject"},
    # the test references name no task: a quick, deterministic Failure("not_applicable")
    "harbor_task": {"timeout": 30, "warm": 0, "concurrency": 2, "build_network": "none"},
    # a closed port and no retries: scoring is a quick, deterministic Failure("judge")
    "rubric_judge": {
        "rubric": "helpfulness",
        "model": "openai/gpt-4.1-mini",
        "api_base": "http://127.0.0.1:9/v1",
        "retries": 0,
        "cache": False,
    },
    "checklist_judge": {"items": ["is polite"], **_UNREACHABLE_JUDGE},
    "reference_judge": dict(_UNREACHABLE_JUDGE),
    "pairwise_judge": dict(_UNREACHABLE_JUDGE),
    "group_rank": dict(_UNREACHABLE_JUDGE),
    "pairwise_tournament": {"aggregate": "win_rate", **_UNREACHABLE_JUDGE},
    "tool_use": {
        "tools": [{"name": "f", "parameters": {"type": "dict"}}],
        "fold": "discounted",
        "gamma": 0.9,
    },
    "retrieval": {"metric": "ndcg", "k": 5, "tools": ["search"]},
    "tool_call_match": {"order": "strict", "scoring": "fraction"},
    "final_answer": {"reward": {"type": "math_answer", "pattern": r"<answer>(.*?)</answer>"}},
    # every IFEval instruction, on the completion (the test references are not IFEval's)
    "instruction_following": {
        "mode": "loose",
        "scoring": "fraction",
        "instructions": ALL_INSTRUCTIONS,
    },
    # tiny random models, built when the session starts (tests/support/models.py)
    "reward_model": {**REWARD_MODEL_OPTIONS, "normalize": "sigmoid", "max_length": 256},
    "process_reward_model": {**PROCESS_REWARD_MODEL_OPTIONS, "fold": "mean"},
    # reference_key "a": the test references' number, so the metric itself runs (as text "1")
    "text_similarity": {"metric": "chrf", "reference_key": "a", "lowercase": True},
    # the test references name no database: a quick, deterministic Failure("not_applicable")
    "sql_match": {"order": "respect", "rel_tol": 1e-9, "timeout": 2, "max_rows": 1000},
    "reasoning_gym": {"dataset": "chain_sum", "configs": {"chain_sum": {"seed": 1}}},
    # an OpenAI multi grader: the completion's JSON "a" against the reference's, and a fuzzy
    # match of the whole text (the string reference of the second rollout: not_applicable)
    "openai_grader": {
        "grader": {
            "type": "multi",
            "graders": {
                "exact": {
                    "type": "string_check",
                    "input": "{{sample.output_json.a}}",
                    "reference": "{{item.a}}",
                    "operation": "eq",
                },
                "close": {
                    "type": "text_similarity",
                    "input": "{{sample.output_text}}",
                    "reference": "{{item.a}}",
                    "evaluation_metric": "fuzzy_match",
                },
            },
            "calculate_output": "0.5 * exact + 0.5 * close",
        }
    },
    # a function in a plain file, named by its path (relative paths are the spec's folder's)
    "python": {
        "function": f"{Path(__file__).with_name('python_reward.py')}:mentions_reference",
        "options": {"scale": 1.0},
    },
}
ROLLOUTS = [
    make('{"a": 1, "b": [1]}', {"a": 1, "b": [1]}),
    make("<think>x</think><answer>1</answer> Answer: 1", "1"),
]
