"""function_tests: a function called by a generated driver in seven languages, one clean job per
case, the verdict read here from the JSON it printed; expected values never enter the sandbox."""

from __future__ import annotations

import json
import pickle
import re
from typing import Any

import pytest

import referee
from referee.errors import SpecError
from referee.rewards import FunctionTests
from referee.rewards.code import languages
from referee.rewards.code._signatures import Unsupported, defines, fits, signature
from referee.rewards.code.functions import FunctionTestsReference, same
from referee.rollout import Rollout
from referee.scores import Score
from referee.verifiers.sandbox import Job, RunResult, Sandbox
from referee.verifiers.sandbox.local import isolation_problem

needs_sandbox = pytest.mark.skipif(
    isolation_problem() is not None, reason=f"no sandbox here: {isolation_problem()}"
)

LANGUAGES = ["python", "javascript", "typescript", "cpp", "java", "go", "rust"]
NAME = {lang: "two_sum" if lang in ("python", "rust") else "twoSum" for lang in LANGUAGES}

# Two sum, LeetCode style: the indices of the two numbers that add up to the target.
TWO_SUM = {
    "python": "def two_sum(nums, target):\n    seen = {}\n    for i, x in enumerate(nums):\n"
    "        if target - x in seen:\n            return (seen[target - x], i)\n"
    "        seen[x] = i\n",  # a tuple: a list in JSON
    "javascript": "var twoSum = function(nums, target) {\n  const seen = new Map();\n"
    "  for (let i = 0; i < nums.length; i++) {\n"
    "    if (seen.has(target - nums[i])) return [seen.get(target - nums[i]), i];\n"
    "    seen.set(nums[i], i);\n  }\n};\n",
    "typescript": "function twoSum(nums: number[], target: number): number[] {\n"
    "  const seen = new Map<number, number>();\n  for (let i = 0; i < nums.length; i++) {\n"
    "    if (seen.has(target - nums[i])) return [seen.get(target - nums[i])!, i];\n"
    "    seen.set(nums[i], i);\n  }\n  return [];\n}\n",
    "cpp": "class Solution {\npublic:\n    vector<int> twoSum(vector<int>& nums, int target) {\n"
    "        unordered_map<int, int> seen;\n"
    "        for (int i = 0; i < (int)nums.size(); i++) {\n"
    "            if (seen.count(target - nums[i])) return {seen[target - nums[i]], i};\n"
    "            seen[nums[i]] = i;\n        }\n        return {};\n    }\n};\n",
    "java": "class Solution {\n    public int[] twoSum(int[] nums, int target) {\n"
    "        Map<Integer, Integer> seen = new HashMap<>();\n"
    "        for (int i = 0; i < nums.length; i++) {\n"
    "            Integer j = seen.get(target - nums[i]);\n"
    "            if (j != null) return new int[]{j, i};\n            seen.put(nums[i], i);\n"
    "        }\n        return new int[0];\n    }\n}\n",
    "go": "func twoSum(nums []int, target int) []int {\n\tseen := map[int]int{}\n"
    "\tfor i, x := range nums {\n\t\tif j, ok := seen[target-x]; ok {\n"
    "\t\t\treturn []int{j, i}\n\t\t}\n\t\tseen[x] = i\n\t}\n\treturn nil\n}\n",
    "rust": "impl Solution {\n    pub fn two_sum(nums: Vec<i32>, target: i32) -> Vec<i32> {\n"
    "        let mut seen = HashMap::new();\n"
    "        for (i, x) in nums.iter().enumerate() {\n"
    "            if let Some(&j) = seen.get(&(target - x)) { return vec![j as i32, i as i32]; }\n"
    "            seen.insert(*x, i);\n        }\n        vec![]\n    }\n}\n",
}
# APPS/TACO's form: each output wrapped in a one-element list, as those datasets often write it.
ARGS = [[[2, 7, 11, 15], 9], [[3, 2, 4], 6], [[3, 3], 6]]
WANT = [[0, 1], [1, 2], [0, 1]]


def apps(name: str, args: list[Any] = ARGS, want: list[Any] = WANT) -> dict[str, Any]:
    return {"fn_name": name, "inputs": args, "outputs": [[w] for w in want]}


def grade(language: str, code: str, reference: Any, **options: Any) -> Score:
    reward = FunctionTests(language=language, **options)  # type: ignore[arg-type]
    completion = f"Here it is:\n```{language}\n{code}```\n"
    return reward.score_sync(Rollout(prompt="p", completion=completion, reference=reference))


# --- the reference, read ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference",
    [
        {"fn_name": "f", "inputs": [[1, 2]], "outputs": [3]},  # APPS / TACO
        json.dumps({"fn_name": "f", "inputs": [[1, 2]], "outputs": [3]}),  # as JSON text
        {"input_output": json.dumps({"fn_name": "f", "inputs": [[1, 2]], "outputs": [3]})},
        {"fn_name": "f", "input_output": {"inputs": [[1, 2]], "outputs": [3]}},  # name beside
        {"fn_name": "f", "inputs": ["1\n2"], "outputs": ["3"]},  # LiveCodeBench: JSON lines
        {"entry_point": "f", "cases": [{"args": [1, 2], "expected": 3}]},
    ],
)
def test_each_reference_shape_reads_as_the_same_call(reference: Any) -> None:
    ref = FunctionTestsReference.parse(reference)
    assert ref.name == "f"
    assert [(c.args, c.expected) for c in ref.cases] == [((1, 2), 3)]


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (None, "function_tests needs"),
        ("not json", "a string but not JSON"),
        ({"inputs": [[1]], "outputs": [1]}, "needs the function's name"),  # io_tests' shape
        ({"fn_name": "a b", "inputs": [[1]], "outputs": [1]}, "must be a function name"),
        ({"fn_name": "f", "inputs": [[1]], "outputs": [1, 2]}, "1 inputs but 2 outputs"),
        ({"fn_name": "f", "inputs": [1], "outputs": [1]}, "input 1 must be the list"),
        ({"fn_name": "f", "inputs": [], "outputs": []}, "has no case"),
        ({"entry_point": "f", "cases": [{"args": [1]}]}, 'case 1 must be {"args"'),
        ({"entry_point": "f", "cases": []}, "has no case"),
        ({"fn_name": "f", "inputs": ["{"], "outputs": ["1"]}, "not one JSON argument a line"),
    ],
)
def test_a_bad_reference_is_not_applicable_and_says_why(reference: Any, message: str) -> None:
    s = FunctionTests().score_sync(Rollout(prompt="p", completion="x", reference=reference))
    assert s.value is None and s.failure is not None, s
    assert s.failure.type == "not_applicable" and message in s.failure.message, s.failure


@pytest.mark.parametrize(
    ("got", "want", "tol", "equal"),
    [
        ([0, 1], [0, 1], None, True),
        (2, 2.0, None, True),  # numbers by value
        (0.1 + 0.2, 0.3, None, False),  # exact without a tolerance
        (0.1 + 0.2, 0.3, 1e-9, True),
        (True, 1, None, False),  # a boolean is not a number
        (1, True, None, False),
        ("1", 1, None, False),
        (None, [], None, False),
        ({"a": [1, 2.0]}, {"a": [1, 2]}, None, True),
        ({"a": 1}, {"a": 1, "b": 2}, None, False),
        ([[1], [2]], [[1], [2, 3]], None, False),
        (10**400, 1e308, 1e-9, False),  # past a float's range: not an OverflowError
    ],
)
def test_results_compare_as_json_values(got: Any, want: Any, tol: float | None, equal: bool):
    assert same(got, want, tol) is equal


@needs_sandbox
def test_a_wrapped_output_also_accepts_its_element_but_only_a_one_element_list() -> None:
    code = "def f(x):\n    return x\n"
    wrapped = {"fn_name": "f", "inputs": [[5], [[5]], [0]], "outputs": [[5], [5], [0, 1]]}
    s = grade("python", code, wrapped)
    # 5 == [5][0]; [5] == [5]; 0 is not [0, 1] (APPS would take its first item: not here)
    assert s.components == {"passed": 2.0, "cases": 3.0}, s.reason
    exact = {"entry_point": "f", "cases": [{"args": [5], "expected": [5]}]}
    assert grade("python", code, exact).value == 0.0  # the cases form means what it says


# --- signatures, read from the source -------------------------------------------------------


def _shape(language: str, code: str, name: str = "f") -> tuple[Any, ...] | None:
    """(owner, static, [(param, kind, text, ref)], [result kinds]) of `name` in `code`."""
    sig = signature(language, code, name)
    if sig is None:
        return None
    params = [(p.name, p.ty.kind, p.ty.text, p.ty.ref) for p in sig.params]
    return sig.owner, sig.static, params, [t.kind for t in sig.results]


@pytest.mark.parametrize(
    ("language", "code", "shape"),
    [
        # LeetCode's C++: a method of Solution, vectors by reference
        (
            "cpp",
            "class Solution {\npublic:\n    int f(vector<int>& a, const string &s) {}\n};",
            ("Solution", False, [("a", "list", "vector", ""), ("s", "str", "string", "")], ["int"]),
        ),
        # aliases, std::, a pair and a map, a static member, const, a trailing return type
        (
            "cpp",
            "typedef long long ll;\nusing vi = std::vector<ll>;\nstruct S { static auto f("
            "vi v, std::pair<int, char> p, map<string, bool> m) const -> bool {} };",
            (
                "S",
                True,
                [("v", "list", "vector", ""), ("p", "pair", "pair", ""), ("m", "map", "map", "")],
                ["bool"],
            ),
        ),
        # a call of f before its definition, and a commented-out f, are not it
        (
            "cpp",
            "// int f(ListNode* x) {\nint g() { return f(1); }\nint f(int x) { return x; }",
            (None, False, [("x", "int", "int", "")], ["int"]),
        ),
        (
            "cpp",
            "#define int long long\nint f(int x) { return x; }\nsigned main() {}",
            (None, False, [("x", "int", "long long", "")], ["int"]),
        ),
        (
            "java",
            "public class Main {\n  @Override public static long f(final int[][] g,"
            " List<List<Integer>> l, Map<String, Long> m, String... s) throws Exception {}\n}",
            (
                "Main",
                True,
                [
                    ("g", "list", "int[][]", ""),
                    ("l", "list", "List<List<Integer>>", ""),
                    ("m", "map", "Map<String,Long>", ""),
                    ("s", "list", "String[]", ""),
                ],
                ["int"],
            ),
        ),
        (
            "java",
            "class Outer {\n  static class Solution {\n    char f(char[] c) { return 'x'; }\n"
            "  }\n}",
            ("Outer.Solution", False, [("c", "list", "char[]", "")], ["char"]),
        ),
        (
            "go",
            "func f(a, b int, c []string, m map[string][]int) (res int, ok bool) {\n}",
            (
                None,
                True,
                [
                    ("a", "int", "int", ""),
                    ("b", "int", "int", ""),
                    ("c", "list", "[]string", ""),
                    ("m", "map", "map[string][]int", ""),
                ],
                ["int", "bool"],
            ),
        ),
        (
            "go",
            "func f(int, string) {\n}",
            (None, True, [("", "int", "int", ""), ("", "str", "string", "")], []),
        ),
        (
            "rust",
            "impl Solution {\n    pub fn f<'a>(s: &'a str, mut v: &mut Vec<i64>, "
            "w: &[Vec<char>], o: Option<u8>) -> Option<Vec<String>> {}\n}",
            (
                "Solution",
                True,
                [
                    ("s", "str", "&str", "str"),
                    ("v", "list", "Vec<i64>", "mut"),
                    ("w", "list", "Vec<Vec<char>>", "ref"),
                    ("o", "option", "Option<u8>", ""),
                ],
                ["option"],
            ),
        ),
        (
            "rust",
            "fn f(m: std::collections::HashMap<String, i32>) -> (i32, String) {}",
            (None, True, [("m", "map", "std::collections::HashMap<String, i32>", "")], ["any"]),
        ),
        # declared in its class, defined outside it
        (
            "cpp",
            "class Solution {\n public:\n  long f(vector<string> w) const;\n};\n"
            "long Solution::f(vector<string> w) const { return 0; }\nint g() { return f(); }",
            ("Solution", False, [("w", "list", "vector", "")], ["int"]),
        ),
        ("cpp", "int f(int x);\nint g() { return f(1); }", None),  # declared, never defined
        ("go", "func (s *S) f(x int) int {\n\treturn x\n}", None),  # a method: not called
        ("cpp", "int g(int x) { return x; }", None),
    ],
)
def test_a_signature_is_read_with_its_types(language: str, code: str, shape: Any) -> None:
    assert _shape(language, code) == shape


@pytest.mark.parametrize(
    ("language", "code", "what"),
    [
        ("cpp", "ListNode* f(ListNode* head) {}", "ListNode* head"),
        ("cpp", "int f(int a[]) {}", "int a[]"),
        ("cpp", "template <class T> T f(T x) {}", "template"),
        ("cpp", "int f(vector<TreeNode> v) {}", "TreeNode"),
        ("cpp", "std::list<int>* f(int x) {}", "list<int>*"),
        ("java", "class S {\n  <T> T f(T x) {}\n}", "generic"),
        ("java", "class S {\n  int f(Map<int[], Integer> m) {}\n}", "map keys"),
        ("go", "func f[T any](x T) T {\n}", "generic"),
        ("go", "func f(xs ...int) int {\n}", "variadic"),
        ("go", "func f(x int) error {\n}", "error"),
        ("rust", "impl S {\n    fn f(&self, x: i32) -> i32 {}\n}", "self"),
        ("rust", "fn f<T: Ord>(x: T) -> T {}", "generic"),
        ("rust", "fn f(x: Box<i32>) {}", "Box<i32>"),
    ],
)
def test_a_type_the_drivers_cannot_pass_is_named(language: str, code: str, what: str) -> None:
    with pytest.raises(Unsupported, match=re.escape(what)):
        signature(language, code, "f")


@pytest.mark.parametrize(
    ("language", "code", "args", "why"),
    [
        ("cpp", "int f(int x) {}", [2**31], "2147483648 is out of range for int"),
        ("cpp", "int f(unsigned x) {}", [-1], "out of range"),
        ("cpp", "int f(char c) {}", ["\u00e9"], "is not one character char can hold"),
        ("cpp", "int f(bool b) {}", [1], "1 is not a boolean"),
        ("cpp", "int f(double d) {}", [True], "True is not a number"),
        ("cpp", "int f(string s) {}", ["\ud800"], "not valid Unicode"),
        ("cpp", "int f(pair<int, int> p) {}", [[1, 2, 3]], "is not a list of two"),
        ("cpp", "int f(map<int, int> m) {}", [{"01": 1}], "'01' is not an integer"),
        ("cpp", "int f(map<int, int> m) {}", [{"-12": 1}], None),
        ("java", "class S { int f(char c) {} }", ["\U0001f600"], "not one character"),
        ("java", "class S { int f(String s) {} }", ["\ud800"], None),  # Java strings hold it
        ("go", "func f(b byte) {\n}", ["\u00e9"], "not one character byte can hold"),
        ("go", "func f(r rune) {\n}", ["\u00e9"], None),
        ("rust", "fn f(o: Option<Vec<u8>>) {}", [None], None),
        ("rust", "fn f(o: Option<Vec<u8>>) {}", [[256]], "256 is out of range for u8"),
    ],
)
def test_an_argument_fits_its_parameter_or_says_why_not(
    language: str, code: str, args: list[Any], why: str | None
) -> None:
    sig = signature(language, code, "f")
    assert sig is not None
    said = fits(args[0], sig.params[0].ty)
    assert said == why if why is None else (said is not None and why in said), said


# 256 KiB of each: every scan of a program's source is linear, so none takes long.
HOSTILE_SOURCE = [
    *("f(", "f (x) ;", "class a ", "typedef a ", "using a = b ", "#define a b c\n", "impl a "),
    *("{", "(", "<", "'", '"', "/*", "fn f(", "func f(", "\n", "def f"),
]


@pytest.mark.parametrize("language", LANGUAGES)
def test_reading_a_hostile_source_takes_linear_time(language: str) -> None:
    import time

    for unit in HOSTILE_SOURCE:
        code = unit * ((256 << 10) // len(unit))  # quadratic: minutes; linear: a blink
        start = time.perf_counter()
        try:
            if language in ("python", "javascript", "typescript"):
                defines(language, code, "f")
            else:
                signature(language, code, "f")
        except Unsupported:
            pass
        assert time.perf_counter() - start < 2.0, (language, unit)


# --- each language: right, wrong, noisy, crashing, looping, not compiling ------------------


@needs_sandbox
@pytest.mark.parametrize("language", LANGUAGES)
def test_a_right_program_passes_every_case(language: str) -> None:
    s = grade(language, TWO_SUM[language], apps(NAME[language]))
    assert s.value == 1.0, s.reason
    assert s.components == {"passed": 3.0, "cases": 3.0}


# Returns [0, 0] (wrong), after printing noise: garbage, and a fake marker line with the right
# answer after it, which it might hope the grader reads.
NOISE = 'garbage\\nreferee-result-0123456789abcdef0123456789abcdef\\n[0, 1]\\n{"x": '
WRONG = {
    "python": f"def two_sum(nums, target):\n    print('{NOISE}')\n    return [0, 0]\n",
    "javascript": f"var twoSum = function(nums, target) {{\n  console.log('{NOISE}');\n"
    "  return [0, 0];\n};\n",
    "typescript": "function twoSum(nums: number[], target: number): number[] {\n"
    f"  process.stdout.write('{NOISE}\\n');\n  return [0, 0];\n}}\n",
    "cpp": "#include <cstdio>\n#include <vector>\nusing namespace std;\n"
    "vector<int> twoSum(const vector<int>& nums, int target) {\n"
    f'    printf("{NOISE.replace(chr(34), chr(92) + chr(34))}");\n    return {{0, 0}};\n}}\n',
    "java": "public class Solution {\n  public static int[] twoSum(int[] nums, int target) {\n"
    f'    System.out.print("{NOISE.replace(chr(34), chr(92) + chr(34))}");\n'
    "    return new int[]{0, 0};\n  }\n}\n",
    "go": 'package main\n\nimport "fmt"\n\nfunc twoSum(nums []int, target int) []int {\n'
    f'\tfmt.Print("{NOISE.replace(chr(34), chr(92) + chr(34))}")\n\treturn []int{{0, 0}}\n}}\n',
    "rust": "pub fn two_sum(nums: &[i32], target: i32) -> Vec<i32> {\n"
    f'    print!("{{}}", "{NOISE.replace(chr(34), chr(92) + chr(34))}");\n    vec![0, 0]\n}}\n',
}


@needs_sandbox
@pytest.mark.parametrize("language", LANGUAGES)
def test_a_wrong_answer_fails_whatever_the_program_prints(language: str) -> None:
    s = grade(language, WRONG[language], apps(NAME[language]))
    assert s.value == 0.0 and s.failure is None, s.reason
    assert "case 1: wrong answer: '[0, 0]'" in s.reason, s.reason


# Right, and noisy as WRONG is; it crashes when the target is 0 and never returns when it is -5.
FRAGILE = {
    "python": "class Solution:\n    def two_sum(self, nums, target):\n"
    f"        print('{NOISE}')\n        if target == 0:\n            raise ValueError('boom')\n"
    "        while target == -5:\n            pass\n        for i in range(len(nums)):\n"
    "            for j in range(i + 1, len(nums)):\n"
    "                if nums[i] + nums[j] == target:\n                    return [i, j]\n",
    "javascript": f"function twoSum(nums, target) {{\n  console.log('{NOISE}');\n"
    "  if (target === 0) throw new Error('boom');\n  while (target === -5) {}\n"
    "  const i = nums.findIndex((x, k) => nums.indexOf(target - x) > k);\n"
    "  return [i, nums.indexOf(target - nums[i], i + 1)];\n}\n",
    "typescript": "class Solution {\n  twoSum(nums: number[], target: number): number[] {\n"
    f"    console.log('{NOISE}');\n    if (target === 0) throw new Error('boom');\n"
    "    while (target === -5) {}\n    for (let i = 0; i < nums.length; i++)\n"
    "      for (let j = i + 1; j < nums.length; j++)\n"
    "        if (nums[i] + nums[j] === target) return [i, j];\n    return [];\n  }\n}\n",
    "cpp": "class Solution {\npublic:\n  vector<int> twoSum(vector<int>& nums, int target) {\n"
    f'    cout << "{NOISE.replace(chr(34), chr(92) + chr(34))}";\n'
    "    if (target == 0) abort();\n    volatile int spin = 0;\n"
    "    while (target == -5) spin = spin + 1;\n"
    "    for (int i = 0; i < (int)nums.size(); i++)\n"
    "      for (int j = i + 1; j < (int)nums.size(); j++)\n"
    "        if (nums[i] + nums[j] == target) return {i, j};\n    return {};\n  }\n};\n",
    "java": "import java.util.*;\n\nclass Solution {\n"
    "  public List<Integer> twoSum(int[] nums, int target) {\n"
    f'    System.out.println("{NOISE.replace(chr(34), chr(92) + chr(34))}");\n'
    '    if (target == 0) throw new IllegalStateException("boom");\n    long spin = 0;\n'
    "    while (target == -5) spin++;\n    for (int i = 0; i < nums.length; i++)\n"
    "      for (int j = i + 1; j < nums.length; j++)\n"
    "        if (nums[i] + nums[j] == target) return Arrays.asList(i, j);\n"
    "    return List.of();\n  }\n}\n",
    "go": 'import "fmt"\n\nfunc twoSum(nums []int, target int) []int {\n'
    f'\tfmt.Println("{NOISE.replace(chr(34), chr(92) + chr(34))}")\n'
    '\tif target == 0 {\n\t\tpanic("boom")\n\t}\n\tfor target == -5 {\n\t}\n'
    "\tfor i := range nums {\n\t\tfor j := i + 1; j < len(nums); j++ {\n"
    "\t\t\tif nums[i]+nums[j] == target {\n\t\t\t\treturn []int{i, j}\n\t\t\t}\n\t\t}\n\t}\n"
    "\treturn nil\n}\n",
    "rust": "impl Solution {\n  pub fn two_sum(nums: Vec<i32>, target: i32) -> Vec<i32> {\n"
    f'    println!("{{}}", "{NOISE.replace(chr(34), chr(92) + chr(34))}");\n'
    '    if target == 0 { panic!("boom"); }\n    while target == -5 {}\n'
    "    for i in 0..nums.len() {\n      for j in i + 1..nums.len() {\n"
    "        if nums[i] + nums[j] == target { return vec![i as i32, j as i32]; }\n"
    "      }\n    }\n    vec![]\n  }\n}\n",
}


@needs_sandbox
@pytest.mark.parametrize("language", LANGUAGES)
def test_a_crash_or_a_loop_fails_its_own_case_alone(language: str) -> None:
    args = [[[2, 7, 11, 15], 9], [[1, -1], 0], [[1, 2], -5], [[1, 5, 3], 8]]
    # 3 s a case: at 1 s, a node start on a loaded 2-core CI machine ran a passing case past
    # its limit (the loop is cut all the same)
    s = grade(language, FRAGILE[language], apps(NAME[language], args, [[0, 1], [0, 1], [], [1, 2]]),
              timeout=3)  # fmt: skip
    assert s.components == {"passed": 2.0, "cases": 4.0}, s.reason  # the noise costs nothing
    assert "case 2: runtime error" in s.reason and "case 3: time limit" in s.reason, s.reason


@needs_sandbox
def test_cases_past_the_rollouts_deadline_fail_and_the_rollout_is_scored() -> None:
    # Two quick cases, then twelve that sleep past their 0.5 s: they do not fit a 4 s
    # deadline, and those that cannot start in time are failed cases (the program's verdict),
    # never Failure("timeout"), which a trainer masks.
    reward = referee.load({"type": "function_tests", "timeout": 0.5, "deadline": 4})
    code = "```python\nimport time\ndef echo(x):\n    x < 0 and time.sleep(30)\n    return x\n```"
    args = [[1], [2]] + [[-i] for i in range(1, 13)]
    reference = {"fn_name": "echo", "inputs": args, "outputs": [a[0] for a in args]}
    [s] = referee.score(reward, [Rollout(prompt="p", completion=code, reference=reference)])
    assert s.failure is None and s.value == pytest.approx(2 / 14), s
    assert s.reason is not None and "not run: the rollout's deadline came first" in s.reason
    assert "case 3: time limit" in s.reason, s.reason
    # and without a deadline of the user's, a rollout's follows its cases
    default = referee.load({"type": "function_tests", "timeout": 0.5})
    assert default.deadline_for(140) == 10 * 0.5 * 140 + 60  # type: ignore[attr-defined]


@needs_sandbox
@pytest.mark.parametrize("language", LANGUAGES)
def test_a_program_that_does_not_compile_fails_every_case(language: str) -> None:
    s = grade(language, TWO_SUM[language] + ")(\n", apps(NAME[language]))
    assert s.value == 0.0 and s.failure is None, s.reason
    if language in languages.COMPILED:
        assert s.reason.startswith("0/3 cases passed; compile error"), s.reason
    else:  # run as it is: a syntax error in every case
        assert "case 1: runtime error" in s.reason, s.reason


# --- strings: escaped into each language's literals, and back out as JSON -------------------

SHOUT = {
    "python": "def shout(s):\n    return s + '!'\n",
    "javascript": "const shout = (s) => s + '!';\n",
    "typescript": "export function shout(s: string): string {\n  return s + '!';\n}\n",
    "cpp": 'string shout(const string& s) { return s + "!"; }\n',
    "java": 'class Solution {\n  public String shout(String s) { return s + "!"; }\n}\n',
    "go": 'func shout(s string) string {\n\treturn s + "!"\n}\n',
    "rust": 'fn shout(s: &str) -> String {\n    format!("{}!", s)\n}\n',
}
TRICKY = [
    'a"b\\c\nd\te \u00e9 \u4e2d \U0001f600 ?? \\u0041 \\n */ `${x}`',
    "",
    "'",
    "\x00\x7f",
    "@MARKER@ @CASES@ @NAME@",  # the drivers' own placeholders: data, never filled in
]


@needs_sandbox
@pytest.mark.parametrize("language", LANGUAGES)
def test_strings_reach_the_function_and_come_back_exactly(language: str) -> None:
    reference = {
        "entry_point": "shout",
        "cases": [{"args": [s], "expected": s + "!"} for s in TRICKY],
    }
    s = grade(language, SHOUT[language], reference)
    assert s.value == 1.0, s.reason


# --- typed arguments and results ------------------------------------------------------------

# grid (ints), counts (string -> int), scale (float), flag (bool), c (char), words (strings):
# returns [[sum of grid, sum of counts, len(words)], {word: scale * len(word)}, flag flipped, c].
TYPED = {
    "cpp": "class Solution {\npublic:\n"
    "  tuple<vector<long long>, map<string, double>, bool, char> describe(\n"
    "      const vector<vector<int>>& grid, unordered_map<string, int> counts, double scale,\n"
    "      bool flag, char c, vector<string>& words) {\n"
    "    long long g = 0, n = 0;\n    for (auto& row : grid) for (int x : row) g += x;\n"
    "    for (auto& [k, v] : counts) n += v;\n    map<string, double> m;\n"
    "    for (auto& w : words) m[w] = scale * w.size();\n"
    "    return {{g, n, (long long)words.size()}, m, !flag, c};\n  }\n};\n",
    "java": "class Solution {\n"
    "  public List<Object> describe(int[][] grid, Map<String, Integer> counts, double scale,\n"
    "                               boolean flag, char c, List<String> words) {\n"
    "    long g = 0, n = 0;\n    for (int[] row : grid) for (int x : row) g += x;\n"
    "    for (int v : counts.values()) n += v;\n    Map<String, Double> m = new TreeMap<>();\n"
    "    for (String w : words) m.put(w, scale * w.length());\n"
    "    return Arrays.asList(new long[]{g, n, words.size()}, m, !flag, c);\n  }\n}\n",
    "go": "func describe(grid [][]int, counts map[string]int, scale float64, flag bool, c byte,\n"
    "\twords []string) ([]int64, map[string]float64, bool, string) {\n"
    "\tvar g, n int64\n\tfor _, row := range grid {\n\t\tfor _, x := range row {\n"
    "\t\t\tg += int64(x)\n\t\t}\n\t}\n\tfor _, v := range counts {\n\t\tn += int64(v)\n\t}\n"
    "\tm := map[string]float64{}\n\tfor _, w := range words {\n"
    "\t\tm[w] = scale * float64(len(w))\n\t}\n"
    "\treturn []int64{g, n, int64(len(words))}, m, !flag, string(c)\n}\n",
    "rust": "use std::collections::HashMap;\n\nstruct Solution;\n\nimpl Solution {\n"
    "    pub fn describe(grid: &Vec<Vec<i32>>, counts: HashMap<String, i32>, scale: f64,\n"
    "                    flag: bool, c: char, words: &[String])\n"
    "        -> (Vec<i64>, HashMap<String, f64>, Option<(bool, char)>) {\n"
    "        let g: i64 = grid.iter().flatten().map(|&x| x as i64).sum();\n"
    "        let n: i64 = counts.values().map(|&x| x as i64).sum();\n"
    "        let m = words.iter().map(|w| (w.clone(), scale * w.len() as f64)).collect();\n"
    "        (vec![g, n, words.len() as i64], m, Some((!flag, c)))\n    }\n}\n",
}


@needs_sandbox
@pytest.mark.parametrize("language", sorted(TYPED))
def test_typed_arguments_are_built_from_json_and_results_printed_as_json(language: str) -> None:
    args = [[[1, 2], [], [3]], {"a": 4, "b": -5}, 0.5, True, "x", ["ab", "cde"]]
    want: list[Any] = [[6, -1, 2], {"ab": 1.0, "cde": 1.5}, False, "x"]
    if language == "rust":
        want = [want[0], want[1], [False, "x"]]
    reference = {"entry_point": "describe", "cases": [
        {"args": args, "expected": want},
        {"args": [[], {}, -2, False, "?", []], "expected": [[0, 0, 0], {}, *want[2:]]},
    ]}  # fmt: skip
    if language == "rust":
        reference["cases"][1]["expected"] = [[0, 0, 0], {}, [True, "?"]]
    else:
        reference["cases"][1]["expected"] = [[0, 0, 0], {}, True, "?"]
    s = grade(language, TYPED[language], reference)
    assert s.value == 1.0, s.reason


SHAPES = [
    # Java in a package: the driver is in it too, and is the class run
    ("java", "package contest.a;\n\n" + TWO_SUM["java"].replace("class", "public class"), 1.0),
    # TypeScript: a static method of Solution
    ("typescript", "class Solution {\n  static twoSum(nums: number[], t: number): number[] {\n"
     "    for (let i = 0; i < nums.length; i++)\n      for (let j = i + 1; j < nums.length; j++)\n"
     "        if (nums[i] + nums[j] === t) return [i, j];\n    return [];\n  }\n}\n", 1.0),
    # Python: a __future__ import stays first; LeetCode's List and defaultdict need no import
    ("python", '"""Two sum."""\nfrom __future__ import annotations\n\nclass Solution:\n'
     "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
     "        seen = defaultdict(int)\n        for i, x in enumerate(nums):\n"
     "            if target - x in seen:\n                return [seen[target - x], i]\n"
     "            seen[x] = i\n", 1.0),
    # Go: a main of the program's own fails to compile, as on LeetCode (the driver's is main)
    ("go", "package main\n\n" + TWO_SUM["go"] + "\nfunc main() {}\n", 0.0),
]  # fmt: skip


@needs_sandbox
@pytest.mark.parametrize(("language", "code", "value"), SHAPES, ids=[s[0] for s in SHAPES])
def test_leetcode_shapes(language: str, code: str, value: float) -> None:
    s = grade(language, code, apps("twoSum"))
    assert s.value == value, s.reason
    if value == 0.0:
        assert "compile error" in s.reason and "main redeclared" in s.reason, s.reason


@needs_sandbox
def test_cpp_macros_of_competitive_programming_do_not_break_the_driver() -> None:
    code = (
        "#include <bits/stdc++.h>\nusing namespace std;\n#define int long long\n"
        "#define F first\n#define S second\n#define T int\n#define o cout\n#define x first\n"
        "#define v vector\n#define c char\n#define m map\n#define b begin\n#define endl '\\n'\n"
        "typedef vector<int> vi;\n\nclass Solution {\n public:\n"
        "  pair<int, string> f(const vi& a, T k, map<string, int>& d);\n};\n\n"
        "pair<int, string> Solution::f(const vi& a, T k, map<string, int>& d) {\n"
        "  int s = 0;\n  for (int e : a) s += e * k;\n  pair<int, string> p{s, d.b()->F};\n"
        "  return p;\n}\n"
    )
    reference = {"entry_point": "f", "cases": [
        {"args": [[2**40, 1], 3, {"k": 1}], "expected": [3 * (2**40 + 1), "k"]},
    ]}  # fmt: skip
    s = grade("cpp", code, reference)
    assert s.value == 1.0, s.reason


@needs_sandbox
def test_a_case_whose_arguments_do_not_fit_the_parameters_fails_alone() -> None:
    reference = apps("twoSum", [*ARGS, [[1, 2], "3"], [[1, 2]], [[1, 2**40], 3]], [*WANT, [0, 1],
                     [0, 1], [0, 1]])  # fmt: skip
    s = grade("go", TWO_SUM["go"], reference)  # int is Go's 64 bits: 2**40 fits
    assert s.components == {"passed": 3.0, "cases": 6.0}, s.reason
    assert "case 4: argument 2 (target) does not fit: '3' is not an integer" in s.reason
    assert "case 5: twoSum takes 2 arguments, the case gives 1" in s.reason
    s = grade("java", TWO_SUM["java"], reference)  # Java's int: 32 bits
    assert "case 6: argument 1 (nums) does not fit: 1099511627776 is out of range" in s.reason


UNSUPPORTED = {
    "cpp": ("ListNode* reverse(ListNode* head) { return head; }\n", "reverse", "ListNode*"),
    "java": ("class Solution {\n  public int depth(TreeNode root) { return 0; }\n}\n", "depth",
             "TreeNode"),
    "go": ("func middle(head *ListNode) *ListNode {\n\treturn head\n}\n", "middle", "*ListNode"),
    "rust": ("impl Solution {\n    pub fn depth(root: Option<Rc<RefCell<TreeNode>>>) -> i32 "
             "{ 0 }\n}\n", "depth", "Rc<RefCell<TreeNode>>"),
}  # fmt: skip


@pytest.mark.parametrize("language", sorted(UNSUPPORTED))
def test_a_parameter_type_the_driver_cannot_build_is_a_failure_never_a_score(language: str):
    code, name, typename = UNSUPPORTED[language]
    s = grade(language, code, {"entry_point": name, "cases": [{"args": [[1]], "expected": 1}]})
    assert s.value is None and s.failure is not None, s
    assert s.failure.type == "not_applicable", s.failure
    assert typename in s.failure.message and name in s.failure.message, s.failure.message


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_program_without_the_function_scores_zero_and_says_so(language: str) -> None:
    code = TWO_SUM[language].replace(NAME[language], "threeSum")
    s = grade(language, code, apps(NAME[language]))
    assert s.value == 0.0 and s.failure is None, s
    assert s.reason == f"0/3 cases passed; no function {NAME[language]}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_missing_reference_is_never_paid(language: str) -> None:
    s = grade(language, TWO_SUM[language], None)
    assert s.value is None and s.failure is not None and s.failure.type == "not_applicable"


# --- the driver's frame: what a program can and cannot do to it ----------------------------


@needs_sandbox
def test_a_program_that_prints_the_real_marker_gains_only_what_it_could_return() -> None:
    # It finds the real marker in the driver's code and prints it with the right answer before
    # returning a wrong one: the driver's own line comes last, and is the one read.
    python = (
        "import sys\n\ndef two_sum(nums, target):\n"
        "    consts = globals()['__referee_main'].__code__.co_consts\n"
        "    marker = next(c for c in consts if isinstance(c, str) and 'referee-result-' in c)\n"
        "    sys.stdout.write(marker.strip() + '\\n[0, 1]\\n')\n    return [9, 9]\n"
    )
    s = grade("python", python, apps("two_sum"))
    assert s.value == 0.0 and "case 1: wrong answer: '[9, 9]'" in s.reason, s.reason
    # After the driver's line (a destructor reads the marker from its own executable), what
    # it prints is its result: the answer it computed and could as well have returned.
    cpp = (
        "vector<int> kept;\nstruct Forger {\n  ~Forger() {\n"
        '    ifstream self("/proc/self/exe", ios::binary);\n'
        "    string bytes((istreambuf_iterator<char>(self)), istreambuf_iterator<char>());\n"
        "    size_t at = 0;  // the marker, not this search's own string\n"
        '    while (!isxdigit(bytes[(at = bytes.find("referee-result-", at + 1)) + 15])) {}\n'
        '    printf("\\n%s\\n[%d,%d]\\n", bytes.substr(at, 47).c_str(), kept[0], kept[1]);\n'
        "  }\n} forger;\n\n"
        + TWO_SUM["cpp"].replace(
            "return {seen[target - nums[i]], i};",
            "{ kept = {seen[target - nums[i]], i}; return {0, 0}; }",  # wrong, but kept
        )
    )
    s = grade("cpp", cpp, apps("twoSum"))
    assert s.value == 1.0, s.reason


@needs_sandbox
def test_a_program_that_exits_before_returning_has_an_unreadable_result() -> None:
    code = "import sys\n\ndef two_sum(nums, target):\n    print('[0, 1]')\n    sys.exit(0)\n"
    s = grade("python", code, apps("two_sum"))
    assert s.value == 0.0
    assert "case 1: unreadable result: nothing printed after the call" in s.reason, s.reason


class Counting:
    """The real sandbox, counting the jobs it is given."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.jobs: list[Job] = []

    def run(self, job: Job) -> RunResult:
        self.jobs.append(job)
        return self.inner.run(job)

    def close(self) -> None:
        self.inner.close()


@needs_sandbox
def test_one_build_per_rollout_and_one_clean_job_per_case(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    box = Counting(FunctionTests().open_sandbox())
    monkeypatch.setattr(FunctionTests, "open_sandbox", lambda self: box)
    languages.BUILDS.clear()
    for _ in range(2):  # scored twice: built once, from the cache the second time
        s = grade("cpp", TWO_SUM["cpp"], apps("twoSum"))
        assert s.value == 1.0, s.reason
    builds = [j for j in box.jobs if j.command and "-o prog" in j.command[-1]]
    runs = [j for j in box.jobs if j.command and j.command[-1].startswith("chmod")]
    assert len(builds) == 1 and len(runs) == 6
    assert sorted(j.stdin for j in runs) == [b"0\n", b"0\n", b"1\n", b"1\n", b"2\n", b"2\n"]
    source = str(builds[0].files["main.cpp"])
    assert "[0, 1]" not in source and "{2, 7, 11, 15}" in source  # arguments, not answers


@needs_sandbox
def test_a_completion_is_the_code_before_the_driver_and_cannot_reach_into_it() -> None:
    # An unclosed comment, string or block at the end of the code is the program's compile
    # error; it cannot swallow the driver and pass.
    for tail in ("/*", '"', "{"):
        s = grade("cpp", TWO_SUM["cpp"] + tail + "\n", apps("twoSum"))
        assert s.value == 0.0 and "compile error" in s.reason, (tail, s.reason)


def test_options_are_checked_at_load() -> None:
    with pytest.raises(SpecError, match="language"):
        referee.load({"type": "function_tests", "language": "c"})
    with pytest.raises(SpecError, match="float_tol must be at least 0"):
        referee.load({"type": "function_tests", "float_tol": -1})
    reward = referee.load({"type": "function_tests", "language": "go", "timeout": 2})
    assert reward.default_deadline() == 2 * 10 + 60 + 30  # type: ignore[attr-defined]


@needs_sandbox
def test_a_pickled_reward_scores_the_same() -> None:
    reward = referee.load({"type": "function_tests", "language": "python", "float_tol": 1e-6})
    clone = pickle.loads(pickle.dumps(reward))
    assert clone == reward
    rollout = Rollout(prompt="p", completion=TWO_SUM["python"], reference=apps("two_sum"))
    [before], [after] = referee.score(reward, [rollout]), referee.score(clone, [rollout])
    assert (after.value, after.reason) == (before.value, before.reason) == (1.0, "3/3 cases passed")


@needs_sandbox
def test_a_missing_toolchain_is_a_sandbox_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    rust = languages.COMPILED["rust"]
    absent = dataclasses.replace(rust, tools=(("referee-no-such-rustc", "rustc"),))
    monkeypatch.setitem(languages.COMPILED, "rust", absent)
    monkeypatch.setattr(languages, "_PROBED", {})
    s = grade("rust", TWO_SUM["rust"], apps("two_sum"))
    assert s.failure is not None and s.failure.type == "sandbox", s
    assert "install rustc" in s.failure.message
