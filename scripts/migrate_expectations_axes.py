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
    # ch09: the tensor-core GEMM's shape is the axis `shape` (4096, 8192, ragged).
    "ch09/tensor_core_gemm": "ch09/tensor_core_gemm/shape:4096",
    "ch09/tensor_core_gemm_8192": "ch09/tensor_core_gemm/shape:8192",
    "ch09/tensor_core_gemm_ragged": "ch09/tensor_core_gemm/shape:ragged",
    # ch10: the persistent GEMM's m = n = k is the axis `mnk`.
    "ch10/persistent_gemm": "ch10/persistent_gemm/mnk:4096",
    "ch10/persistent_gemm_8192": "ch10/persistent_gemm/mnk:8192",
    # ch10: the reductions' size is the axis `mib` (MiB summed); 16 is the old size.
    "ch10/atomic_reduction": "ch10/atomic_reduction/mib:16",
    "ch10/cluster_reduction": "ch10/cluster_reduction/mib:16",
    # ch16: flash attention's shapes are the axes b, s, d and causal.
    "ch16/flash_attention_b4_s4096": "ch16/flash_attention/b:4/s:4096/d:128/causal:0",
    "ch16/flash_attention_b4_s4096_causal": "ch16/flash_attention/b:4/s:4096/d:128/causal:1",
    "ch16/flash_attention_b1_s8192": "ch16/flash_attention/b:1/s:8192/d:128/causal:0",
    "ch16/flash_attention_b1_s8192_causal": "ch16/flash_attention/b:1/s:8192/d:128/causal:1",
    "ch16/flash_attention_b4_s4096_d64": "ch16/flash_attention/b:4/s:4096/d:64/causal:0",
    "ch16/flash_attention_b4_s4096_d64_causal": "ch16/flash_attention/b:4/s:4096/d:64/causal:1",
    # ch16: decode_graphs' bucket and paged_attention's batch are the axis `batch`.
    "ch16/decode_graphs_b1": "ch16/decode_graphs/batch:1",
    "ch16/decode_graphs_b8": "ch16/decode_graphs/batch:8",
    "ch16/decode_graphs_b32": "ch16/decode_graphs/batch:32",
    "ch16/paged_attention": "ch16/paged_attention/batch:32",
    "ch16/paged_attention_b64": "ch16/paged_attention/batch:64",
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
