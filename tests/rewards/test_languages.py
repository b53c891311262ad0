"""io_tests in the compiled languages: built once in the sandbox, each case a clean job on that
build, verdicts that name what went wrong, and a missing toolchain named as a package."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from referee.errors import SpecError
from referee.rewards import IoTests
from referee.rewards.code import languages
from referee.rollout import Rollout
from referee.scores import Score
from referee.spec import load as load_spec
from referee.verifiers.sandbox import Job, RunResult, Sandbox
from referee.verifiers.sandbox.local import isolation_problem

pytestmark = pytest.mark.skipif(
    isolation_problem() is not None, reason=f"no sandbox here: {isolation_problem()}"
)

# The sum of two integers per line, in each language.
SUM = {
    "c": "#include <stdio.h>\nint main(void) {\n  long long a, b;\n"
    '  while (scanf("%lld %lld", &a, &b) == 2) printf("%lld\\n", a + b);\n  return 0;\n}\n',
    "cpp": "#include <bits/stdc++.h>\nusing namespace std;\nint main() {\n  long long a, b;\n"
    '  while (cin >> a >> b) cout << a + b << "\\n";\n}\n',
    "go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tvar a, b int64\n'
    "\tfor {\n\t\tif _, err := fmt.Scan(&a, &b); err != nil {\n\t\t\treturn\n\t\t}\n"
    "\t\tfmt.Println(a + b)\n\t}\n}\n",
    "rust": "use std::io::Read;\nfn main() {\n    let mut s = String::new();\n"
    "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
    "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
    '    for p in v.chunks(2) { println!("{}", p[0] + p[1]); }\n}\n',
    "java": "import java.util.*;\n\npublic class Main {\n"
    "  public static void main(String[] args) {\n    Scanner in = new Scanner(System.in);\n"
    "    while (in.hasNextLong()) System.out.println(in.nextLong() + in.nextLong());\n  }\n}\n",
    "typescript": 'const text: string = require("fs").readFileSync(0, "utf8");\n'
    "const v: number[] = text.split(/\\s+/).filter((t) => t).map(Number);\n"
    "for (let i = 0; i < v.length; i += 2) console.log(v[i] + v[i + 1]);\n",
}
CASES = {
    "cases": [
        {"stdin": "1 2\n", "stdout": "3\n"},
        {"stdin": "5 6\n7 8\n", "stdout": "11\n15\n"},
        {"stdin": "-1 1", "stdout": "0"},
    ]
}
COMPILED = sorted(SUM)


def grade(language: str, code: str, reference: Any = CASES, **options: Any) -> Score:
    reward = IoTests(language=language, **options)  # type: ignore[arg-type]
    completion = f"Here it is:\n```{language}\n{code}```\n"
    return reward.score_sync(Rollout(prompt="add", completion=completion, reference=reference))


@pytest.mark.parametrize("language", COMPILED)
def test_a_right_program_passes_every_case(language: str) -> None:
    s = grade(language, SUM[language])
    assert s.value == 1.0, s.reason
    assert s.components == {"passed": 3.0, "cases": 3.0}


@pytest.mark.parametrize("language", COMPILED)
def test_a_program_that_does_not_compile_fails_every_case_and_says_why(language: str) -> None:
    s = grade(language, SUM[language][:-4])  # its last braces cut off
    assert s.value == 0.0 and s.failure is None, s.reason
    assert "compile error" in s.reason and "0/3 cases passed" in s.reason


@pytest.mark.parametrize("language", COMPILED)
def test_a_wrong_answer_is_named(language: str) -> None:
    wrong = SUM[language].replace("a + b", "a - b").replace("p[0] + p[1]", "p[0] - p[1]")
    wrong = wrong.replace("in.nextLong() + in.nextLong()", "in.nextLong() - in.nextLong()")
    wrong = wrong.replace("v[i] + v[i + 1]", "v[i] - v[i + 1]")
    s = grade(language, wrong)
    assert s.value == 0.0, s.reason  # 1-2, 5-6, -1-1: no case right
    assert "case 1: wrong answer: '-1'" in s.reason


RUNTIME_ERROR = {
    "c": "#include <stdlib.h>\nint main(void) { abort(); }\n",
    "cpp": '#include <stdexcept>\nint main() { throw std::runtime_error("boom"); }\n',
    "go": 'package main\n\nfunc main() { panic("boom") }\n',
    "rust": 'fn main() { panic!("boom"); }\n',
    "java": "public class Main { public static void main(String[] a) {\n"
    '  throw new RuntimeException("boom");\n} }\n',
    "typescript": 'throw new Error("boom");\n',
}


@pytest.mark.parametrize("language", COMPILED)
def test_a_crash_is_a_runtime_error(language: str) -> None:
    s = grade(language, RUNTIME_ERROR[language], stop_on_failure=True)
    assert s.value == 0.0, s.reason
    assert "case 1: runtime error" in s.reason
    if language != "c":  # the runtime's own words, not a stack line or node's version
        assert "boom" in s.reason, s.reason


LOOP = {
    "c": "int main(void) { volatile int x = 0; for (;;) x++; }\n",
    "cpp": "int main() { volatile int x = 0; for (;;) x++; }\n",
    "go": "package main\n\nfunc main() {\n\tx := 0\n\tfor {\n\t\tx++\n\t}\n}\n",
    "rust": "fn main() {\n    loop {}\n}\n",
    "java": "public class Main { public static void main(String[] a) {\n"
    "  long x = 0;\n  while (true) x++;\n} }\n",
    "typescript": "let x = 0;\nwhile (true) x++;\n",
}


@pytest.mark.parametrize("language", COMPILED)
def test_a_loop_is_a_time_limit(language: str) -> None:
    s = grade(language, LOOP[language], timeout=1, stop_on_failure=True)
    assert s.value == 0.0, s.reason
    assert "case 1: time limit" in s.reason


class Counting:
    """The real sandbox, counting the jobs it is given."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.jobs: list[Job] = []

    def run(self, job: Job) -> RunResult:
        self.jobs.append(job)
        return self.inner.run(job)

    def session(self, job: Job, call_timeout: float | None = None) -> Any:
        return self.inner.session(job, call_timeout)

    def close(self) -> None:
        self.inner.close()


def counting(monkeypatch: pytest.MonkeyPatch) -> Counting:
    reward = IoTests(language="c")
    box = Counting(reward.open_sandbox())
    monkeypatch.setattr(IoTests, "open_sandbox", lambda self: box)
    languages.BUILDS.clear()
    return box


def test_a_program_is_built_once_per_rollout_and_every_case_runs_that_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = counting(monkeypatch)
    s = grade("cpp", SUM["cpp"])
    assert s.value == 1.0, s.reason
    builds = [j for j in box.jobs if j.command and "-o prog" in j.command[-1]]
    runs = [j for j in box.jobs if j.command and j.command[-1].startswith("chmod")]
    assert len(builds) == 1 and len(runs) == 3
    artifacts = {bytes(j.files["prog"]) for j in runs}  # type: ignore[arg-type]
    assert len(artifacts) == 1 and next(iter(artifacts)).startswith(b"\x7fELF")


def test_the_same_source_is_not_built_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    box = counting(monkeypatch)
    grade("c", SUM["c"])
    grade("c", SUM["c"])
    grade("c", SUM["c"].replace("a + b", "b + a"))  # another source: built
    builds = [j for j in box.jobs if j.command and "-o prog" in j.command[-1]]
    assert len(builds) == 2


def test_a_compile_error_is_cached_too_but_a_compile_timeout_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = counting(monkeypatch)
    grade("c", "int main( {")
    grade("c", "int main( {")
    assert len([j for j in box.jobs if j.command and "-o prog" in j.command[-1]]) == 1
    slow = (  # exponential work at compile time, far under gcc's constexpr limits
        "constexpr long f(int n) { return n < 2 ? n : f(n - 1) + f(n - 2); }\n"
        "static_assert(f(80) > 0);\nint main() {}\n"
    )
    for _ in range(2):
        s = grade("cpp", slow, compile_timeout=1)
        assert s.value == 0.0 and "compile time limit" in s.reason, s.reason
    assert len([j for j in box.jobs if j.command and "-o prog" in j.command[-1]]) == 3


def test_compile_flags_replace_the_defaults() -> None:
    code = '#include <stdio.h>\nint main(void) { printf("%d\\n", VALUE); }\n'
    case = {"cases": [{"stdin": "", "stdout": "7"}]}
    assert grade("c", code, case).value == 0.0  # VALUE undefined: a compile error
    s = grade("c", code, case, compile_flags=["-O0", "-DVALUE=7"])
    assert s.value == 1.0, s.reason


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"language": "python", "compile_flags": ["-O2"]}, "compile_flags is for a compiled"),
        ({"language": "typescript", "compile_flags": ["--strict"]}, "typescript is transpiled"),
        ({"language": "cobol"}, "language"),
        ({"language": "c", "compile_timeout": 0}, "compile_timeout must be positive"),
    ],
)
def test_wrong_options_are_refused_at_load(options: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec({"type": "io_tests", **options})


def test_java_runs_the_public_class_in_its_package() -> None:
    code = SUM["java"].replace("public class Main", "public class Solver")
    assert grade("java", code).value == 1.0
    packaged = "package contest.a;\n\n" + code
    s = grade("java", packaged)
    assert s.value == 1.0, s.reason
    assert languages.java_class(packaged) == ("Solver.java", "contest.a.Solver")
    hidden = code.replace("public class Solver", "class Helper {}\nclass Solver")
    assert languages.java_class(hidden) == ("Solver.java", "Solver")
    assert grade("java", hidden).value == 1.0


def test_java_heap_is_the_memory_limit() -> None:
    hog = (
        "public class Main { public static void main(String[] a) {\n"
        "  byte[][] keep = new byte[24][];\n"
        "  for (int i = 0; i < 24; i++) keep[i] = new byte[16 << 20];\n"
        '  System.out.println("384 MiB held");\n} }\n'
    )
    case = {"cases": [{"stdin": "", "stdout": "384 MiB held"}]}
    s = grade("java", hog, case, memory_mb=256)
    assert s.value == 0.0 and "memory limit" in s.reason, s.reason
    assert grade("java", hog, case, memory_mb=768).value == 1.0


def test_typescript_is_transpiled_not_type_checked() -> None:
    typed_wrong = "const n: number = 'seven' as any as number;\nconsole.log(n);\n"
    s = grade("typescript", typed_wrong, {"cases": [{"stdin": "", "stdout": "seven"}]})
    assert s.value == 1.0, s.reason
    s = grade("typescript", "const = ;\n", {"cases": [{"stdin": "", "stdout": ""}]})
    assert s.value == 0.0 and "compile error: main.ts(1," in s.reason, s.reason


def test_a_missing_toolchain_is_a_failure_that_names_the_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    go = languages.COMPILED["go"]
    absent = dataclasses.replace(go, tools=(("referee-no-such-go", "golang-go"),))
    monkeypatch.setitem(languages.COMPILED, "go", absent)
    monkeypatch.setattr(languages, "_PROBED", {})
    s = grade("go", SUM["go"])
    assert s.failure is not None and s.failure.type == "sandbox", s
    assert "install golang-go" in s.failure.message
    assert "referee-no-such-go" in s.failure.message


@pytest.mark.parametrize("kind", ["io_tests", "function_tests"])
def test_a_missing_interpreter_is_a_failure_not_a_zero(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    absent = (("referee-no-such-node", "nodejs"),)
    monkeypatch.setitem(languages._RUN_TOOLS, "javascript", absent)
    monkeypatch.setattr(languages, "_PROBED", {})
    reward = load_spec({"type": kind, "language": "javascript"})
    reference = CASES if kind == "io_tests" else {"fn_name": "f", "inputs": [[1]], "outputs": [1]}
    code = "```javascript\nfunction f(x) { return x; }\nconsole.log(3);\n```"
    s = reward.score_sync(Rollout(prompt="p", completion=code, reference=reference))
    assert s.failure is not None and s.failure.type == "sandbox", s
    assert "cannot run javascript programs" in s.failure.message
    assert "install nodejs" in s.failure.message


def test_the_fence_of_the_language_is_taken_over_other_blocks() -> None:
    completion = f"```python\nprint(3)\n```\nand in C:\n```c\n{SUM['c']}```\n"
    reward = IoTests(language="c")
    s = reward.score_sync(Rollout(prompt="p", completion=completion, reference=CASES))
    assert s.value == 1.0, s.reason


@pytest.fixture(params=["local", "docker"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each sandbox backend, the docker one on the test engine."""
    if request.param == "docker":
        monkeypatch.setenv("DOCKER_HOST", request.getfixturevalue("docker_engine"))
    return str(request.param)


@pytest.mark.parametrize("language", ["cpp", "java", "typescript"])
def test_every_backend_builds_and_runs(language: str, backend: str) -> None:
    s = grade(language, SUM[language], backend=backend)
    assert s.value == 1.0, s.reason
