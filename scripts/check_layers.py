#!/usr/bin/env python3
"""Checks speclab's include arrows against the layering in docs/architecture.md.

Every `#include "X"` of a project file is an arrow from the including file's layer to X's layer;
an arrow the table below does not allow fails the check, naming the file, the line and the rule.
Run from anywhere: `scripts/check_layers.py` (exit 0 when clean, 1 on a forbidden arrow);
`--table` prints the arrows as docs/architecture.md's table, `--check-doc` fails when that table
differs, `--self-test` runs the check on deliberately forbidden includes.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Layer of a path: the longest matching prefix.
LAYERS = {
    "core/base": "base",
    "core/sampling": "sampling",
    "core/verify": "verify",
    "core/exact": "exact",
    "core/stats": "stats",
    "core/models": "models",
    "core/decode": "decode",
    "core/equivalence": "equivalence",
    "core/io": "io",
    "core/plan": "plan",
    "core/probe": "probe",
    "gpu/base": "gpu-base",
    "gpu/sampling": "gpu-sampling",
    "gpu/verify": "gpu-verify",
    "gpu/models": "gpu-models",
    "gpu/decode": "gpu-decode",
    "gpu/emulation": "gpu-emulation",
    "bench": "bench",
    "experiments": "experiments",
    "cli": "cli",
    "tests": "tests",
    "python/ext": "python",
}

# The layers of the CUDA library a user of it (bench, cli) may include: all but the emulation.
GPU_LIBRARY = ("gpu-base", "gpu-sampling", "gpu-verify", "gpu-models", "gpu-decode")

# A -> the layers A may include (besides itself).
CORE_BELOW_DECODE = {"base", "sampling", "verify"}
ALLOWED = {
    "base": set(),
    "sampling": {"base"},
    "verify": {"base", "sampling"},
    "exact": {"base", "sampling", "verify"},
    "io": {"base"},
    "plan": {"base"},
    "models": {"base", "sampling", "io"},
    "decode": {"base", "sampling", "verify", "models"},
    "stats": {"base"},
    # A decoder's output law against the exact one: the statistics over whole engines.
    "equivalence": {"base", "sampling", "verify", "exact", "stats", "models", "decode"},
    "probe": {"base", "sampling", "models", "io", "plan"},
    # The CUDA library in floors, decode -> verify -> sampling -> base (models beside verify, for
    # the loop), each seeing core's base and its own core layer; never a floor above.
    "gpu-base": {"base", "gpu-emulation"},
    "gpu-sampling": {"base", "sampling", "gpu-base"},
    "gpu-verify": {"base", "sampling", "verify", "gpu-base", "gpu-sampling"},
    "gpu-models": {"base", "sampling", "models", "gpu-base", "gpu-sampling"},
    "gpu-decode": {"base", "sampling", "verify", "models", "decode", "gpu-base", "gpu-sampling",
                   "gpu-verify", "gpu-models"},
    # The SIMT emulation stands alone: the kernels include it, never the other way.
    "gpu-emulation": set(),
    "experiments": {"base", "sampling", "verify", "exact", "stats", "models", "decode",
                    "equivalence", "io", "plan", "probe"},
    "bench": {"base", "sampling", "verify", "exact", "stats", "models", "decode", "io", "plan",
              "experiments", "probe", *GPU_LIBRARY},
    "cli": {"base", "sampling", "verify", "exact", "stats", "models", "decode", "equivalence",
            "io", "plan", "probe", *GPU_LIBRARY, "bench", "experiments"},
    # The Python extension binds the verifiers, the exact laws and the statistics.
    "python": {"base", "sampling", "verify", "exact", "stats"},
    "tests": set(LAYERS.values()),
}

# Headers private to their folder: only files of the same layer may include them.
PRIVATE = re.compile(r"_detail\.hpp$")

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCES = ("*.hpp", "*.cpp", "*.cuh", "*.cu", "*.h")


def layer_of(path: str):
    best = None
    for prefix, layer in LAYERS.items():
        if path == prefix or path.startswith(prefix + "/"):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return best[1] if best else None


def check(root: pathlib.Path):
    errors = []
    files = [p for pattern in SOURCES for p in root.rglob(pattern)]
    for path in sorted(files):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("build", ".git")) or "/build" in rel.split("/", 1)[0]:
            continue
        source = layer_of(rel)
        if source is None:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target_path = m.group(1)
            target = layer_of(target_path)
            if target is None:
                continue  # a system or third-party header, or one beside the file
            where = f"{rel}:{number}"
            if target != source and target not in ALLOWED[source]:
                errors.append(f"{where}: {source} may not include {target} ({target_path}); "
                              f"{source} may include: {', '.join(sorted(ALLOWED[source])) or 'nothing of the project'}")
            elif PRIVATE.search(target_path) and target != source and source != "tests":
                errors.append(f"{where}: {target_path} is private to {target}; include its public "
                              f"header instead")
    return errors


DOC = ROOT / "docs" / "architecture.md"
DOC_SECTION = "## Layers and allowed includes"


def folder(layer: str) -> str:
    return next(prefix for prefix, name in LAYERS.items() if name == layer)


def table() -> str:
    """The allowed arrows as docs/architecture.md's Markdown table: one row per folder."""
    order = list(LAYERS.values())
    rows = ["| folder | may include |", "|---|---|"]
    for prefix, layer in LAYERS.items():
        allowed = sorted(ALLOWED[layer], key=order.index)
        if layer == "tests":
            targets = "every folder"
        else:
            targets = ", ".join(f"`{folder(a)}/`" for a in allowed) or "nothing of the project"
        rows.append(f"| `{prefix}/` | {targets} |")
    return "\n".join(rows) + "\n"


def doc_table(text: str) -> str:
    """The first table after DOC_SECTION in the text of docs/architecture.md."""
    start = text.index(DOC_SECTION)
    lines = text[start:].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return "\n".join(rows) + "\n"


def check_doc(doc: pathlib.Path = DOC):
    """docs/architecture.md's table must be table(): the documented arrows are the checked ones."""
    documented = doc_table(doc.read_text())
    if documented == table():
        print(f"check_layers: {doc.relative_to(ROOT)} lists the arrows this script checks")
        return 0
    print(f"check_layers: the table under \"{DOC_SECTION}\" in {doc.relative_to(ROOT)} differs "
          f"from the arrows this script checks; replace it with `scripts/check_layers.py --table`:")
    print(table())
    return 1


def self_test():
    """The check must fail on each kind of forbidden arrow and pass on allowed ones."""
    import tempfile
    cases = {
        "core/verify/a.cpp": ('#include "core/models/model.hpp"', True),
        "core/base/b.hpp": ('#include "core/sampling/sampling.hpp"', True),
        "core/decode/c.cpp": ('#include "gpu/verify/verify_chain.hpp"', True),
        "gpu/verify/d.cu": ('#include "core/verify/verify_chain_detail.hpp"', True),
        "gpu/sampling/i.cuh": ('#include "gpu/verify/verify_chain.cuh"', True),
        "gpu/base/j.cuh": ('#include "gpu/sampling/row_sampler.cuh"', True),
        "gpu/verify/k.cuh": ('#include "gpu/decode/speculative_decode.hpp"', True),
        "gpu/verify/l.cuh": ('#include "gpu/sampling/row_sampler.cuh"', False),
        "core/exact/e.cpp": ('#include "experiments/config.hpp"', True),
        "core/verify/f.cpp": ('#include "core/sampling/sampling.hpp"', False),
        "cli/g.cpp": ('#include "experiments/config.hpp"', False),
        "core/verify/h.cpp": ('#include "core/verify/verify_chain_detail.hpp"', False),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for rel, (line, forbidden) in cases.items():
            for old in pathlib.Path(tmp).rglob("*.*"):
                old.unlink()
            path = pathlib.Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(line + "\n")
            caught = bool(check(pathlib.Path(tmp)))
            if caught != forbidden:
                print(f"self-test: {rel} with {line}: {'caught' if caught else 'passed'}, "
                      f"expected {'a failure' if forbidden else 'a pass'}")
                failures += 1
    print(f"check_layers self-test: {len(cases) - failures} of {len(cases)} cases as expected")
    return 1 if failures else 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:] == ["--table"]:
        print(table(), end="")
        return 0
    if argv[1:] == ["--check-doc"]:
        return check_doc()
    root = pathlib.Path(argv[1]).resolve() if len(argv) > 1 else ROOT
    errors = check(root)
    for e in errors:
        print(e)
    if errors:
        print(f"check_layers: {len(errors)} forbidden include(s); the allowed arrows are in "
              f"scripts/check_layers.py and docs/architecture.md", file=sys.stderr)
        return 1
    print("check_layers: every include follows the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
