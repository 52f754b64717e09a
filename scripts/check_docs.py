#!/usr/bin/env python3
"""Checks speclab's Markdown: every relative link names a file or folder of the repository, and
the two front pages stay pages (README.md at most 200 lines, gpu/README.md at most 400), so that
reference material moves to docs/ instead of piling up where a newcomer starts.

Run from anywhere: `scripts/check_docs.py` (exit 0 when clean, 1 naming each broken link or
long page); `--self-test` runs the check on a tree with a broken link and a long page.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LIMITS = {"README.md": 200, "gpu/README.md": 400}
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
FENCE = re.compile(r"^\s*```")


def markdown_files(root: pathlib.Path):
    try:
        listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.md"],
                                cwd=root, capture_output=True, text=True, check=True).stdout
        return [root / name for name in listed.split()]
    except (OSError, subprocess.CalledProcessError):
        return sorted(p for p in root.rglob("*.md") if "build" not in p.parts)


def check(root: pathlib.Path):
    errors = []
    for path in markdown_files(root):
        if not path.exists():
            continue  # deleted in the working tree
        rel = path.relative_to(root).as_posix()
        lines = path.read_text(errors="replace").splitlines()
        if rel in LIMITS and len(lines) > LIMITS[rel]:
            errors.append(f"{rel}: {len(lines)} lines; at most {LIMITS[rel]} (move reference "
                          f"material to docs/)")
        in_code = False
        for number, line in enumerate(lines, 1):
            if FENCE.match(line):
                in_code = not in_code
                continue
            if in_code:
                continue
            for m in LINK.finditer(line):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue  # a URL (https:, mailto:)
                if not (path.parent / target).exists():
                    errors.append(f"{rel}:{number}: the link {target} names no file of the "
                                  f"repository")
    return errors


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("[ok](../README.md) [bad](b.md) [web](https://x.y)\n"
                                            "```\n[in code](nowhere.md)\n```\n")
        (root / "README.md").write_text("line\n" * 201)
        errors = check(root)
    expected = ["docs/a.md:1: the link b.md", "README.md: 201 lines"]
    missing = [e for e in expected if not any(x.startswith(e) for x in errors)]
    extra = [x for x in errors if not any(x.startswith(e) for e in expected)]
    for e in missing:
        print(f"self-test: expected an error starting {e!r}")
    for x in extra:
        print(f"self-test: unexpected error {x!r}")
    print(f"check_docs self-test: {len(expected) - len(missing)} of {len(expected)} errors "
          f"caught, {len(extra)} unexpected")
    return 1 if missing or extra else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    errors = check(ROOT)
    for e in errors:
        print(e)
    if errors:
        print(f"check_docs: {len(errors)} problem(s)", file=sys.stderr)
        return 1
    print("check_docs: every relative link resolves; the front pages are pages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
