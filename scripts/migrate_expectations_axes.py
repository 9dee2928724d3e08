#!/usr/bin/env python3
"""One-time migration of expectations/*.json to axis points (issue 39).

Examples whose shape lived in their name (ch18/flash_decoding_batch2) or whose only size became
an axis's default point (ch07/hbm_copy at 1 GiB per buffer) are keyed by their point now
(ch18/flash_decoding/batch:2, ch07/hbm_copy/mib:1024): the key changes, every figure stays, since
the point is exactly the problem that was measured under the old name. Nothing is re-measured.

  python3 scripts/migrate_expectations_axes.py                 # print the diff of every file
  python3 scripts/migrate_expectations_axes.py --write         # and rewrite the files
  python3 scripts/migrate_expectations_axes.py FILE... [--write]

A file already migrated is left as it is (running it twice changes nothing). Only the key lines
change, so the diff is the renames alone.
"""
import argparse
import difflib
import json
import pathlib
import sys

# old key -> new key (chNN/<example>/<axis>:<value>/...). Only problems identical to the old
# example's are listed: an entry whose problem changed is dropped by hand, never renamed.
RENAMES = {
    # ch07: the copies' size is the axis `mib` (MiB per buffer); 1024 is the old size.
    "ch07/copy_coalescing": "ch07/copy_coalescing/mib:1024",
    "ch07/copy_vectorized": "ch07/copy_vectorized/mib:1024",
    "ch07/hbm_copy": "ch07/hbm_copy/mib:1024",
    # ch18: flash decoding's batch.
    "ch18/flash_decoding": "ch18/flash_decoding/batch:1",
    "ch18/flash_decoding_batch2": "ch18/flash_decoding/batch:2",
    "ch18/flash_decoding_batch4": "ch18/flash_decoding/batch:4",
}


def migrate(path, write):
    text = path.read_text()
    doc = json.loads(text)
    examples = doc.get("examples", {})
    after = text
    for old, new in RENAMES.items():
        if old not in examples:
            continue
        if new in examples:
            sys.exit(f"{path}: both {old} and {new} exist; resolve by hand")
        examples[new] = examples.pop(old)
        # The key's own line, renamed in place: every other byte (numbers included) stays as
        # bench wrote it. bench sorts the keys again the next time it writes the file.
        line = f'\n    {json.dumps(old)}: {{\n'
        if after.count(line) != 1:
            sys.exit(f"{path}: {old} is not on a line of its own as bench writes it; migrate by hand")
        after = after.replace(line, f'\n    {json.dumps(new)}: {{\n')
    if json.loads(after) != doc:
        sys.exit(f"{path}: the renamed text does not hold the renamed entries; nothing written")
    diff = list(difflib.unified_diff(text.splitlines(True), after.splitlines(True), str(path), str(path) + " (migrated)"))
    sys.stdout.writelines(diff)
    if not diff:
        print(f"{path}: nothing to migrate")
    elif write:
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(after)
        tmp.replace(path)  # atomic, as bench's own updates are
        print(f"{path}: written")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=pathlib.Path)
    parser.add_argument("--write", action="store_true", help="rewrite the files (default: print the diff only)")
    args = parser.parse_args()
    files = args.files or sorted((pathlib.Path(__file__).resolve().parent.parent / "expectations").glob("*.json"))
    for path in files:
        migrate(path, args.write)


if __name__ == "__main__":
    main()
