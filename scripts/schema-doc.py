#!/usr/bin/env python3
"""Writes the key tables of docs/scenario-schema.md from the schema itself.

Every scenario key is declared once, in scenarios/schema.cpp; `trainsim explain --format json`
prints those declarations. This script renders them as the "## Keys" tables of the schema page
(one table per section, in declaration order), so that the page cannot drift from the code:

    python3 scripts/schema-doc.py build/default/cli/trainsim docs/scenario-schema.md          # rewrite
    python3 scripts/schema-doc.py build/default/cli/trainsim docs/scenario-schema.md --check  # test

Everything in the page up to the first "### `section`" heading after "## Keys" is kept as
written; everything from there to the end is generated. With --check the page is not written:
the exit status is 1 (and a unified diff is printed) when it differs from what would be written.
"""
import difflib
import json
import subprocess
import sys


def number(v):
    if v is None:
        return None
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


def type_cell(k):
    t = k["type"]
    lo, hi = number(k.get("minimum")), number(k.get("maximum"))
    if t in ("int", "float", "size"):
        lo_open, hi_open = k.get("exclusive_minimum"), k.get("exclusive_maximum")
        if lo is not None and hi is not None:
            if lo_open or hi_open:
                t += f" {'(' if lo_open else '['}{lo}..{hi}{')' if hi_open else ']'}"
            else:
                t += f" {lo}..{hi}"
        elif lo is not None:
            t += f" {'>' if lo_open else '≥'} {lo}"
        elif hi is not None:
            t += f" ≤ {hi}"
        if t.startswith("int") and k["choices"]:
            t += " or " + "\\|".join(k["choices"])
    return t


def choices_cell(k):
    if k["type"] != "enum":
        return ""
    text = ", ".join(f"`{c}`" for c in k["choices"])
    if len(text) > 200:
        return f"{len(k['choices'])} names (`trainsim explain {k['key']}`)"
    return text


def cell(text):
    return text.replace("|", "\\|").replace("\n", " ")


def render(keys):
    sections = []
    by_section = {}
    for k in keys:
        section = k["key"].split(".")[0]
        if section not in by_section:
            sections.append(section)
            by_section[section] = []
        by_section[section].append(k)
    out = []
    for section in sections:
        out.append(f"### `{section}`\n")
        out.append("| key | type | unit | default | choices | description |")
        out.append("|---|---|---|---|---|---|")
        for k in by_section[section]:
            default = f"`{k['default']}`" if k["default"] != "" else ""
            out.append(
                f"| `{k['key']}` | {cell(type_cell(k))} | {cell(k['unit'])} | {cell(default)} | "
                f"{cell(choices_cell(k))} | {cell(k['description'])} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv):
    if len(argv) < 3 or len(argv) > 4 or (len(argv) == 4 and argv[3] != "--check"):
        print(__doc__, file=sys.stderr)
        return 2
    binary, page = argv[1], argv[2]
    check = len(argv) == 4
    keys = json.loads(
        subprocess.run([binary, "explain", "--format", "json"], check=True, capture_output=True,
                       text=True).stdout)
    with open(page, encoding="utf-8") as f:
        text = f.read()
    marker = "\n## Keys\n"
    at = text.find(marker)
    if at < 0:
        print(f"{page}: no '## Keys' heading", file=sys.stderr)
        return 2
    first = text.find("\n### `", at)
    head = text[: first + 1] if first >= 0 else text.rstrip("\n") + "\n\n"
    new = head + render(keys)
    if check:
        if new == text:
            return 0
        sys.stdout.writelines(
            difflib.unified_diff(text.splitlines(True), new.splitlines(True), page,
                                 page + " (from trainsim explain)"))
        print(f"\n{page} is out of date: run python3 scripts/schema-doc.py {binary} {page}",
              file=sys.stderr)
        return 1
    with open(page, "w", encoding="utf-8") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
