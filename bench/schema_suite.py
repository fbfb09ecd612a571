"""The JSON Schema Test Suite (draft 2020-12, `optional/` included) against Onyx's grammars.

The suite ships inside the source distribution of Python `jsonschema` (`json/tests/`): it is
fetched at run time with `pip download --no-binary :all: --no-deps jsonschema==<installed>`
into ~/.cache/onyx/jsonschema-suite (never into the repository), and only
`json/tests/draft2020-12` is unpacked.

A test group is a schema and instances, each with the suite's `valid`. The schema gets
`"$schema": ".../draft/2020-12/schema"` when it names no draft (the suite's draft) and is
compiled once; each instance is written as Onyx would write it and asked to
`Grammar.validate`. A test passes when the schema compiles and acceptance equals `valid`. A
*false positive* is an instance the suite calls invalid that the grammar accepts: the grammar
would let a model write it.

How an instance is written (`instance_text`): compact JSON (`separators=(",", ":")`,
`ensure_ascii=False`), object members reordered the way the compiler orders them: the names
`properties` declares (the schema's own, then those of a local `$ref` target, then of each
`allOf` member, recursively), then the `required` names nobody declares, then the rest in the
instance's order. Nested values are reordered by the subschema their name or position leads to
(`properties`, `prefixItems`, `items`, local `$ref`s; not through `anyOf`/`oneOf`/`if`). Where
this differs from the compiler's order the grammar rejects a valid instance: a false negative,
never a false positive. Numbers keep Python's spelling (`1.0`, `1e+100`), which the compiler
writes too where the bounds allow it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from bench.schema_walks import error_class, failed_call

DIALECT = "https://json-schema.org/draft/2020-12/schema"
CACHE = Path.home() / ".cache" / "onyx" / "jsonschema-suite"
SUBDIR = "json/tests/draft2020-12"

# --------------------------------------------------------------------------------------------
# Fetching
# --------------------------------------------------------------------------------------------


def suite_dir(cache: Path = CACHE) -> Path:
    """The unpacked draft2020-12 folder of the suite, fetched on first use (needs pip and the
    network once)."""
    from importlib.metadata import version

    ver = version("jsonschema")
    root = Path(cache) / f"jsonschema-{ver}"
    target = root / SUBDIR
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    sdist = cache / f"jsonschema-{ver}.tar.gz"
    if not sdist.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                        f"jsonschema=={ver}", "-d", str(cache)], check=True)
    prefix = f"jsonschema-{ver}/{SUBDIR}/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(cache, members=members, **safe)
    return target


def suite_files(root: Path) -> list[tuple[str, Path]]:
    """(name relative to draft2020-12, path) of every test file: the required ones, then
    optional/, then optional/format/."""
    files = sorted(root.glob("*.json")) + sorted((root / "optional").glob("*.json")) \
        + sorted((root / "optional" / "format").glob("*.json"))
    return [(str(p.relative_to(root)), p) for p in files]


# --------------------------------------------------------------------------------------------
# Writing an instance as the compiler would
# --------------------------------------------------------------------------------------------


def with_dialect(schema):
    """The schema with the suite's `$schema` when it names none (booleans are left alone)."""
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": DIALECT, **schema}
    return schema


def _local_ref(schema, root):
    """The target of a schema's local `$ref` ("#" or "#/json/pointer"), or None."""
    ref = schema.get("$ref") if isinstance(schema, dict) else None
    if not isinstance(ref, str) or not ref.startswith("#") or (len(ref) > 1 and ref[1] != "/"):
        return None
    node = root
    for part in ref[2:].split("/") if len(ref) > 1 else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _parts(schema, root, depth: int = 0) -> list[dict]:
    """The schema, then its local `$ref` target's parts, then each `allOf` member's parts."""
    if not isinstance(schema, dict) or depth > 8:
        return []
    out = [schema]
    target = _local_ref(schema, root)
    if target is not None:
        out += _parts(target, root, depth + 1)
    for sub in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        out += _parts(sub, root, depth + 1)
    return out


def _member_order(parts: list[dict]) -> list[str]:
    order: list[str] = []
    for p in parts:
        props = p.get("properties")
        for name in props if isinstance(props, dict) else []:
            if name not in order:
                order.append(name)
    for p in parts:
        req = p.get("required")
        for name in req if isinstance(req, list) else []:
            if isinstance(name, str) and name not in order:
                order.append(name)
    return order


def reorder(value, schema, root):
    """`value` with object members in the compiler's order (see the module docs)."""
    parts = _parts(schema, root)
    if isinstance(value, dict):
        order = _member_order(parts)
        keys = [k for k in order if k in value] + [k for k in value if k not in order]
        out = {}
        for k in keys:
            sub = next((p["properties"][k] for p in parts
                        if isinstance(p.get("properties"), dict) and k in p["properties"]), None)
            out[k] = reorder(value[k], sub, root)
        return out
    if isinstance(value, list):
        prefix = next((p["prefixItems"] for p in parts if isinstance(p.get("prefixItems"), list)), [])
        items = next((p["items"] for p in parts if isinstance(p.get("items"), dict)), None)
        return [reorder(v, prefix[i] if i < len(prefix) else items, root) for i, v in enumerate(value)]
    return value


def instance_text(value, schema) -> str:
    return json.dumps(reorder(value, schema, schema), ensure_ascii=False, separators=(",", ":"))


# --------------------------------------------------------------------------------------------
# Running (the group call runs in a `harness.Worker` holding a `peers.OnyxAdapter`)
# --------------------------------------------------------------------------------------------


def group_call(adapter, payload: dict) -> dict:
    """Compiles payload["schema"] with Onyx and validates payload["texts"]."""
    t0 = time.perf_counter()
    try:
        g = adapter.compile("schema", payload["schema"])
    except Exception as e:  # noqa: BLE001 - a refusal is this group's result
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:400], "error_class": error_class(e)}
    ms = (time.perf_counter() - t0) * 1e3
    return {"ok": True, "compile_ms": ms, "accepted": [bool(g.validate(t).valid) for t in payload["texts"]]}


def jsonschema_accepts(schema, data) -> bool | None:
    """Python jsonschema's own answer (draft 2020-12, format checking on), None when it fails."""
    from jsonschema import Draft202012Validator as V

    try:
        return V(schema, format_checker=V.FORMAT_CHECKER).is_valid(data)
    except Exception:  # noqa: BLE001 - e.g. a remote $ref it cannot fetch
        return None


def run_suite(worker_factory, root: Path, timeout: float, max_files: int | None = None, log=print) -> dict:
    """Every test of every file (the first `max_files`): per-file counts, refusals by error
    class, and every false positive."""
    files = suite_files(root)[:max_files]
    worker = None
    per_file, false_positives, refusals = {}, [], {}
    for name, path in files:
        row = {"groups": 0, "tests": 0, "passed": 0, "false_positives": 0, "false_negatives": 0, "refused": 0}
        for group in json.loads(path.read_text(encoding="utf-8")):
            schema = with_dialect(group["schema"])
            texts = [instance_text(t["data"], schema) for t in group["tests"]]
            if worker is None or not worker.alive():
                worker = worker_factory()
            res, err = worker.run(group_call, {"schema": schema, "texts": texts}, timeout)
            if err:
                res = failed_call(err)
            row["groups"] += 1
            row["tests"] += len(texts)
            if not res["ok"]:
                row["refused"] += len(texts)
                refusals[res["error_class"]] = refusals.get(res["error_class"], 0) + len(texts)
                row.setdefault("refusals", []).append({"group": group["description"], "error": res["error"]})
                continue
            for test, text, acc in zip(group["tests"], texts, res["accepted"]):
                if acc == test["valid"]:
                    row["passed"] += 1
                elif acc:
                    row["false_positives"] += 1
                    false_positives.append({"file": name, "group": group["description"], "test": test["description"],
                                            "schema": schema, "text": text[:2000],
                                            "jsonschema_accepts": jsonschema_accepts(schema, test["data"])})
                else:
                    row["false_negatives"] += 1
        per_file[name] = row
        log(f"suite {name:40} {row['passed']}/{row['tests']} passed, {row['false_positives']} false positives, "
            f"{row['refused']} refused")
    if worker is not None:
        worker.close()
    total = {k: sum(r[k] for r in per_file.values()) for k in ("groups", "tests", "passed", "false_positives",
                                                             "false_negatives", "refused")}
    return {"dir": str(root), "files": per_file, "total": total,
            "refused_by_error": dict(sorted(refusals.items(), key=lambda kv: -kv[1])),
            "false_positives": false_positives}
