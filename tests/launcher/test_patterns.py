#!/usr/bin/env python3
"""Every ctest test of a build, as ctest sees it (--show-only=json-v1): a test that ran nothing
must report skipped, never passed (issue 38: ch04.mpi.nccl_4_ranks passed on a machine with no
GPU because its PASS_REGULAR_EXPRESSION accepted the SKIPPED line).

  - no PASS_REGULAR_EXPRESSION may accept a skip line (an alternative naming SKIP, any case):
    output that says it skipped belongs in SKIP_REGULAR_EXPRESSION, which ctest reports skipped;
  - every test labelled gpu or chapter has SKIP_RETURN_CODE or SKIP_REGULAR_EXPRESSION, so that
    without a GPU it reports skipped;
  - every test labelled gpu takes a slot of ctest's "gpus" resource or runs alone (RUN_SERIAL):
    ctest -j never puts two GPU tests on one GPU at once (cmake/BenchGpuTest.cmake).

  test_patterns.py <ctest> <build dir>
"""
import json
import re
import subprocess
import sys


def faults(test):
    props = {p["name"]: p["value"] for p in test.get("properties", [])}
    out = []
    for pattern in props.get("PASS_REGULAR_EXPRESSION", []):
        if re.search("skip", pattern, re.IGNORECASE):
            out.append(f"its PASS_REGULAR_EXPRESSION accepts a skip line ({pattern!r}): "
                       "a test that ran nothing would pass; match that line with SKIP_REGULAR_EXPRESSION")
    labels = props.get("LABELS", [])
    if ({"gpu", "chapter"} & set(labels) and "SKIP_RETURN_CODE" not in props
            and "SKIP_REGULAR_EXPRESSION" not in props):
        out.append(f"labelled {','.join(labels)} but has neither SKIP_RETURN_CODE nor SKIP_REGULAR_EXPRESSION: "
                   "without a GPU it cannot report skipped")
    takes_gpu_slot = any(r.get(".type") == "gpus"
                         for group in props.get("RESOURCE_GROUPS", []) for r in group.get("requirements", []))
    if "gpu" in labels and not takes_gpu_slot and not props.get("RUN_SERIAL"):
        out.append("labelled gpu but takes no GPU slot and is not RUN_SERIAL: ctest -j could run it on a GPU "
                   "another test is timing; register it with bench_add_gpu_test")
    return out


def self_test():
    # The pattern ch04.mpi.nccl_4_ranks had: the check must catch it, and pass its fix.
    old = {"name": "old", "properties": [
        {"name": "LABELS", "value": ["chapter", "gpu"]},
        {"name": "PASS_REGULAR_EXPRESSION", "value": [
            "SKIPPED: needs one GPU per rank \\(4 ranks\\)|4 ranks, 67108868 bytes, ncclAllReduce.*: PASS\n"]}]}
    fixed = {"name": "fixed", "properties": [
        {"name": "LABELS", "value": ["chapter", "gpu"]},
        {"name": "SKIP_REGULAR_EXPRESSION", "value": ["SKIPPED: needs one GPU per rank \\(4 ranks\\)"]},
        {"name": "PASS_REGULAR_EXPRESSION", "value": ["4 ranks, 67108868 bytes, ncclAllReduce.*: PASS\n"]}]}
    assert len(faults(old)) == 3, faults(old)  # the skip pattern, no skip code, no GPU slot
    fixed["properties"].append({"name": "RUN_SERIAL", "value": True})
    assert faults(fixed) == [], faults(fixed)
    one_gpu = {"name": "one_gpu", "properties": [
        {"name": "LABELS", "value": ["gpu"]}, {"name": "SKIP_RETURN_CODE", "value": 77},
        {"name": "RESOURCE_GROUPS", "value": [{"requirements": [{".type": "gpus", "slots": 1}]}]}]}
    assert faults(one_gpu) == [], faults(one_gpu)
    unguarded = {"name": "unguarded", "properties": one_gpu["properties"][:2]}
    assert len(faults(unguarded)) == 1, faults(unguarded)


def main():
    self_test()
    ctest, build = sys.argv[1], sys.argv[2]
    listing = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"], check=True,
                             capture_output=True, text=True).stdout
    tests = json.loads(listing)["tests"]
    with_pattern = 0
    failures = 0
    for test in tests:
        props = {p["name"] for p in test.get("properties", [])}
        with_pattern += "PASS_REGULAR_EXPRESSION" in props
        for why in faults(test):
            print(f"FAIL {test['name']}: {why}")
            failures += 1
    print(f"test_patterns: {len(tests)} tests, {with_pattern} with a PASS_REGULAR_EXPRESSION, {failures} fault(s)")
    return 1 if failures or not tests else 0


if __name__ == "__main__":
    sys.exit(main())
