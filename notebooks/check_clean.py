#!/usr/bin/python3
"""Fails (exit 1) if any notebook given (default: notebooks/*.ipynb) is stored with outputs or
execution counts: notebooks are committed clean and executed in CI (docs/architecture.md "notebooks/").
Clean one with `jupyter-nbconvert --clear-output --inplace NOTEBOOK.ipynb`."""

import glob
import json
import os
import sys


def problems(path):
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        if cell.get("outputs"):
            found.append(f"cell {i} has {len(cell['outputs'])} outputs")
        if cell.get("execution_count") is not None:
            found.append(f"cell {i} has execution_count {cell['execution_count']}")
    return found


def main(argv):
    paths = argv or sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "*.ipynb")))
    if not paths:
        print("check_clean: no notebooks found", file=sys.stderr)
        return 1
    bad = 0
    for path in paths:
        found = problems(path)
        for p in found:
            print(f"{path}: {p}", file=sys.stderr)
        bad += bool(found)
    if bad:
        print(f"check_clean: {bad} of {len(paths)} notebooks stored with outputs; clear them with "
              "`jupyter-nbconvert --clear-output --inplace notebooks/*.ipynb`", file=sys.stderr)
        return 1
    print(f"check_clean: {len(paths)} notebooks stored without outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
