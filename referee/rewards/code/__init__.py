"""Code rewards: generated code run in the sandbox against a dataset's tests, graded outside it.

`python_tests`, `io_tests` and `pytest_tests` (`unit_tests`), `function_tests` (`functions`,
with its drivers in `_drivers` and the signatures they call in `_signatures`), the references
they grade against (`reference`), and their private helpers: the harness that runs a test's
asserts against the sandboxed code (`_harness`), the plan that pipelines its calls
(`_plan`), and the base of the rewards that run one job per case, whose rollouts' deadlines
follow their cases (`_cases`). The sandbox option they share with `patch_tests` is
`referee.rewards._sandboxed.SandboxedReward`.
"""

from referee.rewards.code.functions import (
    FunctionCase,
    FunctionLanguage,
    FunctionTests,
    FunctionTestsReference,
)
from referee.rewards.code.reference import (
    CodeReference,
    IoCase,
    IoTestsReference,
    PytestReference,
    PythonTestsReference,
    code_reference,
)
from referee.rewards.code.unit_tests import IoTests, PytestTests, PythonTests, extract_code

__all__ = [
    "CodeReference",
    "FunctionCase",
    "FunctionLanguage",
    "FunctionTests",
    "FunctionTestsReference",
    "IoCase",
    "IoTests",
    "IoTestsReference",
    "PytestReference",
    "PytestTests",
    "PythonTests",
    "PythonTestsReference",
    "code_reference",
    "extract_code",
]
