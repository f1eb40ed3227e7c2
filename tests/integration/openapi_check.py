#!/usr/bin/env python3
"""openapi_check.py - holds every answer a test script received to the API's
OpenAPI description (SPEC 15: "kept true by the test suite").

usage: openapi_check.py SPEC JOURNAL
       openapi_check.py --document SPEC [VERSION-FILE]   (the description itself:
           OpenAPI 3.1, every schema valid, every $ref resolved, its version VERSION's)
  SPEC     firmware/openapi.json (what GET /v1/openapi.json serves)
  JOURNAL  one line per answer: METHOD<TAB>PATH<TAB>STATUS<TAB>CONTENT-TYPE<TAB>BODY-FILE
           [<TAB>LISTENER: main or notify] (the daemon writes it in test builds
           when PAYTERM_TEST_ANSWER_LOG names a directory)

For each answer: the path must match a path of the description (literal
segments before templated ones), the method must be one of its operations,
the status one of the operation's responses (or "default"), the content
type one the response lists, and a JSON body must validate against that
media type's schema (JSON Schema 2020-12, $refs into #/components resolved
here, so any python3-jsonschema from 4.x on will do).  Prints one line per
answer that does not fit and exits 1 if there was any; 0 otherwise.
"""
import json
import re
import sys

import jsonschema


def resolve(node, spec, depth=0):
    """The node with every local $ref replaced by what it points at."""
    if depth > 64:
        raise ValueError("$ref nesting deeper than 64 (a cycle?)")
    if isinstance(node, dict):
        if "$ref" in node:
            ref = node["$ref"]
            if not ref.startswith("#/"):
                raise ValueError("only local $refs are allowed: " + ref)
            target = spec
            for part in ref[2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            rest = {k: v for k, v in node.items() if k != "$ref"}
            merged = resolve(target, spec, depth + 1)
            if rest and isinstance(merged, dict):
                merged = dict(merged)
                merged.update(resolve(rest, spec, depth + 1))
            return merged
        return {k: resolve(v, spec, depth) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v, spec, depth) for v in node]
    return node


def path_matchers(spec):
    """(regex, template) for every path, literal ones first."""
    out = []
    for template in spec["paths"]:
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
        out.append((template.count("{"), re.compile(pattern), template))
    out.sort(key=lambda t: t[0])
    return [(rx, t) for _, rx, t in out]


def check(spec, line):
    fields = line.rstrip("\n").split("\t")
    method, path, status, ctype, body_file = fields[:5]
    listener = fields[5] if len(fields) > 5 else "main"
    path = path.split("?", 1)[0]
    # notify_listen serves the notification routes only; anything else
    # there is 404 not_found.
    if listener == "notify" and not (path.startswith("/notify/") or path.startswith("/webhooks/")):
        if status != "404":
            return "%s %s -> %s on notify_listen: only 404 is right there" % (method, path, status)
        return error_body(spec, method, path, status, ctype, body_file, "not_found")
    for rx, template in MATCHERS:
        if rx.match(path):
            break
    else:
        # A path the API does not have: 404 not_found, an error like any other.
        if status != "404":
            return "%s %s -> %s: no such path in the description" % (method, path, status)
        return error_body(spec, method, path, status, ctype, body_file, "not_found")
    item = spec["paths"][template]
    op = item.get(method.lower())
    if op is None:
        # A method the path does not serve: 405 method_not_allowed.
        if status != "405":
            return "%s %s -> %s: %s has no %s operation" % (method, path, status, template, method)
        return error_body(spec, method, path, status, ctype, body_file, "method_not_allowed")
    responses = op.get("responses", {})
    resp = responses.get(status) or responses.get(status[0] + "XX") or responses.get("default")
    if resp is None:
        return "%s %s -> %s: status %s is not among %s %s's responses (%s)" % (
            method, path, status, status, method, template, ", ".join(sorted(responses)))
    resp = resolve(resp, spec)
    content = resp.get("content", {})
    media = ctype.split(";", 1)[0].strip().lower()
    with open(body_file, "rb") as f:
        raw = f.read()
    if not content:
        if raw:
            return "%s %s -> %s: the description says no body, got %d bytes (%s)" % (
                method, path, status, len(raw), media)
        return None
    if media not in content:
        return "%s %s -> %s: content type %r is not among %s" % (
            method, path, status, media, ", ".join(sorted(content)))
    schema = content[media].get("schema")
    if schema is None or not (media == "application/json" or media.endswith("+json")):
        return None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        return "%s %s -> %s: body is not JSON: %s" % (method, path, status, e)
    errors = sorted(VALIDATOR(schema).iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        where = "/".join(str(p) for p in e.path) or "(top)"
        return "%s %s -> %s: body does not match the description at %s: %s" % (
            method, path, status, where, e.message[:300])
    return None


def error_body(spec, method, path, status, ctype, body_file, code):
    """An answer outside every operation (404 for a path the API does not
    have, 405 for a method a path does not serve): it must still be the
    description's Error (or Problem) with that code."""
    media = ctype.split(";", 1)[0].strip().lower()
    name = {"application/json": "Error", "application/problem+json": "Problem"}.get(media)
    if name is None:
        return "%s %s -> %s: content type %r is neither application/json nor application/problem+json" % (
            method, path, status, media)
    schema = resolve({"$ref": "#/components/schemas/" + name}, spec)
    with open(body_file, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw)
    except ValueError as e:
        return "%s %s -> %s: body is not JSON: %s" % (method, path, status, e)
    errors = list(VALIDATOR(schema).iter_errors(doc))
    if errors:
        return "%s %s -> %s: not the description's %s: %s" % (method, path, status, name,
                                                           errors[0].message[:300])
    got = doc.get("code") if name == "Problem" else doc.get("error", {}).get("code")
    if got != code:
        return "%s %s -> %s: code %r, expected %r" % (method, path, status, got, code)
    return None


def check_document(spec):
    """The description itself: OpenAPI 3.1, every schema valid JSON Schema
    2020-12, every $ref resolvable, every templated path segment declared as
    a path parameter, every operation with responses.  A list of problems."""
    problems = []
    if not str(spec.get("openapi", "")).startswith("3.1."):
        problems.append("openapi is %r, not 3.1.x" % spec.get("openapi"))
    for key in ("info", "paths"):
        if key not in spec:
            problems.append("no %s" % key)
    try:
        full = resolve(spec, spec)
    except (KeyError, ValueError) as e:
        return problems + ["a $ref does not resolve: %s" % e]
    for name, schema in full.get("components", {}).get("schemas", {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            problems.append("components/schemas/%s: %s" % (name, e.message))
    for template, item in full.get("paths", {}).items():
        declared = {p["name"] for p in item.get("parameters", []) if p.get("in") == "path"}
        for method, op in item.items():
            if method not in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
                continue
            names = declared | {p["name"] for p in op.get("parameters", []) if p.get("in") == "path"}
            for seg in re.findall(r"\{([^}]+)\}", template):
                if seg not in names:
                    problems.append("%s %s: path parameter {%s} is not declared" % (method, template, seg))
            if not op.get("responses"):
                problems.append("%s %s: no responses" % (method, template))
            for status, resp in op.get("responses", {}).items():
                for media, m in resp.get("content", {}).items():
                    if "schema" in m:
                        try:
                            jsonschema.Draft202012Validator.check_schema(m["schema"])
                        except jsonschema.exceptions.SchemaError as e:
                            problems.append("%s %s %s %s: %s" % (method, template, status, media, e.message))
    return problems


def main():
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--document":
        with open(sys.argv[2]) as f:
            spec = json.load(f)
        problems = check_document(spec)
        if len(sys.argv) == 4:  # the version in one place (SPEC 14)
            with open(sys.argv[3]) as f:
                version = f.read().strip()
            if spec.get("info", {}).get("version") != version:
                problems.append("info.version is %r, VERSION says %r" % (
                    spec.get("info", {}).get("version"), version))
        for p in problems:
            print("openapi: " + p)
        print("openapi: %s: %d problem(s) in the description" % (sys.argv[2], len(problems)))
        return 1 if problems else 0
    if len(sys.argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    global MATCHERS, VALIDATOR
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    MATCHERS = path_matchers(spec)
    VALIDATOR = jsonschema.Draft202012Validator
    bad = 0
    seen = 0
    with open(sys.argv[2]) as f:
        for line in f:
            if not line.strip():
                continue
            seen += 1
            problem = check(spec, line)
            if problem:
                bad += 1
                if bad <= 20:
                    print("openapi: " + problem)
    if bad > 20:
        print("openapi: ... and %d more" % (bad - 20))
    print("openapi: %d answers checked against %s, %d do not fit" % (seen, sys.argv[1], bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
