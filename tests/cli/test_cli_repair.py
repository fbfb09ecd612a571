"""`onyx validate` and `onyx repair`, run as `python -m onyx.cli ...` in subprocesses (no
console-script install needed): outputs, exit codes (0 ok, 1 negative answer, 2 usage or
grammar error), stdin input, JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from onyx.models import assets

ROOT = Path(__file__).resolve().parents[2]
DATE_ISH = "[0-9]{4}-[a-z]+"

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module", autouse=True)
def _model_cached():
    if not assets.is_cached("smollm2"):
        pytest.fail("the SmolLM2 tokenizer is not cached: run `python -m onyx.models.assets fetch smollm2` (make test does)")


def onyx_cli(*args: str, stdin: bytes | str | None = None) -> subprocess.CompletedProcess:
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "onyx.cli", *args], input=data if data is not None else b"",
                          capture_output=True, cwd=ROOT, timeout=60)
    proc.out = proc.stdout.decode()
    proc.err = proc.stderr.decode()
    assert "Traceback" not in proc.err, proc.err
    return proc


@pytest.fixture(scope="module")
def schema_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("schemas") / "person.json"
    path.write_text(json.dumps(PERSON))
    return str(path)


# --------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------


def test_validate_valid():
    p = onyx_cli("validate", "--regex", DATE_ISH, "1234-abc")
    assert (p.returncode, p.out) == (0, "valid\n")


def test_validate_invalid_shows_offset_and_context():
    p = onyx_cli("validate", "--regex", DATE_ISH, "12a4-x")
    assert p.returncode == 1
    first, caret = p.out.splitlines()
    assert first == "invalid at byte 2: 12a4-x"
    assert caret.index("^") == first.index("a4-x")
    assert "unexpected 'a'" in caret


def test_validate_incomplete_prefix():
    p = onyx_cli("validate", "--regex", DATE_ISH, "1234-")
    assert p.returncode == 1
    assert p.out.startswith("invalid at byte 5: 1234-\n")
    assert "ends before a full match" in p.out


def test_validate_stdin():
    # TEXT omitted and "-" both read stdin; the trailing newline `echo` adds is dropped...
    for args in ((), ("-",)):
        p = onyx_cli("validate", "--regex", DATE_ISH, *args, stdin="1234-abc\n")
        assert (p.returncode, p.out) == (0, "valid\n")
    p = onyx_cli("validate", "--regex", DATE_ISH, stdin="12a4-x")
    assert p.returncode == 1 and p.out.startswith("invalid at byte 2:")
    # ...unless --raw.
    p = onyx_cli("validate", "--regex", DATE_ISH, "--raw", stdin="1234-abc\n")
    assert p.returncode == 1 and p.out.startswith("invalid at byte 8: 1234-abc\\n")


def test_validate_stdin_bytes_and_unicode():
    p = onyx_cli("validate", "--regex", "(é|ü)+x", stdin=b"\xc3\xa9\xf1x")
    assert p.returncode == 1
    assert p.out.startswith("invalid at byte 2: \\xc3\\xa9\\xf1x")
    assert "unexpected byte \\xf1" in p.out
    p = onyx_cli("validate", "--regex", "(é|ü)+x", "éüx")
    assert (p.returncode, p.out) == (0, "valid\n")


def test_validate_long_text_context_is_cut():
    text = "1234-" + "a" * 100 + "9" + "b" * 100
    p = onyx_cli("validate", "--regex", DATE_ISH, text)
    first, caret = p.out.splitlines()
    assert first.startswith("invalid at byte 105: ...") and first.endswith("...")
    assert first[caret.index("^")] == "9"
    assert len(first) < 100


def test_validate_schema(schema_file):
    p = onyx_cli("validate", "--schema", schema_file, '{"name":"Ada","age":36}')
    assert (p.returncode, p.out) == (0, "valid\n")
    pretty = json.dumps({"name": "Ada", "age": 36}, indent=2)
    p = onyx_cli("validate", "--schema", schema_file, pretty)
    assert p.returncode == 1 and p.out.startswith("invalid at byte 1: {\\n")
    p = onyx_cli("validate", "--schema", schema_file, "--max-whitespace", "4", pretty)
    assert (p.returncode, p.out) == (0, "valid\n")


# --------------------------------------------------------------------------------------------
# Usage and grammar errors: exit 2, one line, no traceback
# --------------------------------------------------------------------------------------------


def test_bad_regex():
    p = onyx_cli("validate", "--regex", "a(b", "ab")
    assert p.returncode == 2 and p.out == ""
    assert len(p.err.strip().splitlines()) == 1
    assert "invalid regex" in p.err and "byte 1" in p.err
    p = onyx_cli("repair", "--regex", "[0-9", "1")
    assert p.returncode == 2 and "byte 0" in p.err


def test_unsupported_regex():
    p = onyx_cli("validate", "--regex", "(?<=a)b", "b")
    assert p.returncode == 2 and "look-around" in p.err
    assert len(p.err.strip().splitlines()) == 1


def test_bad_schema_files(tmp_path):
    p = onyx_cli("validate", "--schema", str(tmp_path / "missing.json"), "{}")
    assert p.returncode == 2 and "cannot read schema" in p.err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = onyx_cli("validate", "--schema", str(bad), "{}")
    assert p.returncode == 2 and "not valid JSON" in p.err
    unsupported = tmp_path / "unsupported.json"
    unsupported.write_text(json.dumps({"type": "object", "$ref": "https://example.com/elsewhere.json"}))
    p = onyx_cli("repair", "--schema", str(unsupported), "{}")
    assert p.returncode == 2 and "$ref" in p.err
    assert len(p.err.strip().splitlines()) == 1


def test_usage_errors(schema_file):
    assert onyx_cli().returncode == 2
    assert onyx_cli("validate", "x").returncode == 2  # no grammar
    assert onyx_cli("validate", "--regex", "a", "--schema", schema_file, "a").returncode == 2
    p = onyx_cli("validate", "--regex", "a", "--max-whitespace", "2", "a")
    assert p.returncode == 2 and "--schema only" in p.err
    assert onyx_cli("repair", "--regex", "a", "--insert-cost", "0", "b").returncode == 2
    assert onyx_cli("repair", "--regex", "a", "--deadline-ms", "-1", "b").returncode == 2
    assert onyx_cli("repair", "--regex", "a", "--max-cost", "x", "b").returncode == 2


# --------------------------------------------------------------------------------------------
# repair
# --------------------------------------------------------------------------------------------


def test_repair_prints_text():
    p = onyx_cli("repair", "--regex", DATE_ISH, "--insert-cost", "1", "12a4-xZZ")
    assert (p.returncode, p.out, p.err) == (0, "1204-x\n", "")
    p = onyx_cli("repair", "--regex", DATE_ISH, "1234-ok")  # already valid
    assert (p.returncode, p.out) == (0, "1234-ok\n")


def test_repair_stdin_schema(schema_file):
    p = onyx_cli("repair", "--schema", schema_file, stdin='{"name":"Ada","age":36,}\n')
    assert (p.returncode, p.out) == (0, '{"name":"Ada","age":36}\n')
    pretty = json.dumps({"name": "Ada", "age": 36}, indent=2) + ","
    p = onyx_cli("repair", "--schema", schema_file, "--max-whitespace", "4", "-", stdin=pretty)
    assert p.returncode == 0 and json.loads(p.out) == {"name": "Ada", "age": 36}
    assert p.out.startswith("{\n  ")  # the indentation the grammar allows is kept


def test_repair_costs_change_the_answer(schema_file):
    text = 'Sure! Here it is: {"name":"Ada","age":36}'
    p = onyx_cli("repair", "--schema", schema_file, text)  # the default deletes the prose
    assert (p.returncode, p.out) == (0, '{"name":"Ada","age":36}\n')
    p = onyx_cli("repair", "--schema", schema_file, "--insert-cost", "1", text)  # plain edit distance
    assert p.returncode == 0 and json.loads(p.out)["name"] != "Ada"  # prose absorbed into name
    p = onyx_cli("repair", "--schema", schema_file, "--insert-cost", "20", "--substitute-cost", "20", text)
    assert (p.returncode, p.out) == (0, '{"name":"Ada","age":36}\n')


def test_repair_json_output():
    p = onyx_cli("repair", "--regex", DATE_ISH, "--json", "--delete-cost", "1", "12a4-xZZ")
    assert p.returncode == 0
    out = json.loads(p.out)
    assert set(out) == {"text", "cost", "lower_bound", "status", "edits"}
    assert (out["text"], out["cost"], out["lower_bound"], out["status"]) == ("1204-x", 3, 3, "optimal")
    assert out["edits"] == [
        {"kind": "substitute", "offset": 2, "old": "a", "new": "0"},
        {"kind": "delete", "offset": 6, "old": "Z", "new": None},
        {"kind": "delete", "offset": 7, "old": "Z", "new": None},
    ]


def test_repair_json_non_printable_bytes_are_hex():
    p = onyx_cli("repair", "--regex", "(é|ü)+x", "--json", "--insert-cost", "1", stdin=b"\xc3\xa9\xf1x")
    out = json.loads(p.out)
    assert p.returncode == 0 and out["text"] == "éx" and out["cost"] == 1
    assert out["edits"] == [{"kind": "delete", "offset": 2, "old": "\\xf1", "new": None}]
    p = onyx_cli("repair", "--regex", "(é|ü)+x", "--json", "--insert-cost", "1", stdin=b"\xc3x")
    out = json.loads(p.out)
    assert out["text"] == "éx" and out["edits"] == [{"kind": "insert", "offset": 1, "old": None, "new": "\\xa9"}]


def test_repair_max_cost_too_small():
    p = onyx_cli("repair", "--regex", DATE_ISH, "--max-cost", "2", "--insert-cost", "1", "12a4-xZZ")
    assert p.returncode == 1 and p.out == ""
    assert "no repair within max cost 2" in p.err
    p = onyx_cli("repair", "--regex", DATE_ISH, "--max-cost", "2", "--insert-cost", "1", "--json", "12a4-xZZ")
    assert p.returncode == 1
    out = json.loads(p.out)
    assert (out["status"], out["text"], out["cost"], out["edits"]) == ("no_repair_within_max_cost", None, None, [])
    p = onyx_cli("repair", "--regex", DATE_ISH, "--max-cost", "3", "--insert-cost", "1", "12a4-xZZ")
    assert (p.returncode, p.out) == (0, "1204-x\n")


def test_repair_deadline_gives_anytime_answer(schema_file):
    garbage = "".join(chr(33 + (i * 7919) % 94) for i in range(3000))
    p = onyx_cli("repair", "--schema", schema_file, "--deadline-ms", "0", "--json", stdin=garbage)
    assert p.returncode == 0
    out = json.loads(p.out)
    assert out["status"] == "anytime" and out["lower_bound"] <= out["cost"]
    assert json.loads(out["text"]).keys() == {"name", "age"}
    assert "search budget reached" in p.err
    p = onyx_cli("validate", "--schema", schema_file, out["text"])
    assert p.returncode == 0


def test_schema_repair_reads_the_text_with_json_repair_first(schema_file):
    text = "Here: {'name': 'Ada', 'age': 36,} thanks"
    p = onyx_cli("repair", "--schema", schema_file, text)
    assert p.returncode == 0 and json.loads(p.out) == {"name": "Ada", "age": 36}
    p = onyx_cli("repair", "--schema", schema_file, "--no-pre-parse", "--json", text)
    assert p.returncode == 0 and json.loads(json.loads(p.out)["text"]).keys() == {"name", "age"}
    p = onyx_cli("repair", "--schema", schema_file, "--json", '{"name":"Bo","age":7}')
    assert p.returncode == 0 and json.loads(p.out)["cost"] == 0
