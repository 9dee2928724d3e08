#!/usr/bin/env python3
"""Jobs on a machine of several GPUs, side by side, against one deadline: the compares, peers and
tests of a session laid out as one queue per GPU, with the host-bound ones run alone.

  python3 scripts/gpu_jobs.py PLAN.py --budget SECONDS [--out DIR] [--state DIR] [--bench PATH]
                             [--pack FILE.tar.gz]
  python3 scripts/gpu_jobs.py --self-test      (the runner on a made-up plan, and every plan in
                                               scripts/gpu_plans/ laid out: ctest, CI)

Run from the repository root, after a build (`./bench test` builds build/default; a compare job
that finds no bench fails naming it, and a plan may build in a stage of its own). PLAN.py is
Python that sets STAGES, a list of stages run in order; a stage is a dict:
  {"all": [job, ...]}                 one job at a time, every GPU visible: host-bound compares
                                      (with the other GPUs idle), chapters of several GPUs (ch04);
  {"0": [job, ...], "1": [...], ...}  one queue per GPU, side by side, each job seeing only its
                                      GPU (CUDA_VISIBLE_DEVICES);
  and optionally "until": seconds from the start by which that stage's jobs end.
Jobs come from helpers in the plan's namespace:
  compare(tag, args, min_s=60, expectations="private")  `bench compare ARGS`, its Markdown report
      (OUT/r/TAG.md), saved results (OUT/r/res_TAG.json) and output (OUT/TAG.log), against a copy
      of expectations/ called `expectations` ("private": the tag's own); jobs naming one copy share
      it, so an update and its rerun go under one name, and only jobs of one queue should;
  peer(tag, command, min_s=60)   a peer script (scripts/peers/), its rows into OUT/r/TAG.json;
  shell(tag, command, min_s=30)  any other command;
and `gpus`, how many GPUs this process may use (scripts/gpu_slots.sh's count), to lay out queues;
other_plan(name, gpus) gives another plan's names (its STAGES laid out for that many GPUs, with the
same helpers), for a plan that puts two others side by side.
A job is not started with less than min_s left before its stage's end or the budget, and one still
running then is interrupted (SIGINT, then SIGKILL after 20 s); an interrupted compare updates no
expectations. A job that finished (exit 0 or 1) leaves a marker under --state (default
/tmp/gpu_jobs), where the expectation copies live too, and its tag is skipped in a later run on the
same machine: a plan sent again to a warm machine picks up what a deadline dropped.
At the end the copies that changed are brought into OUT/expectations/: a file that one copy changed
is that copy, verbatim (the tool's own formatting); one that several changed is merged, each
example's entry from the copy whose provenance date is newest (the merge is printed).
OUT/summary.txt lists every job with its GPU, exit status and seconds. --pack packs OUT into one
.tar.gz and removes it (the device tool brings back only a few files of $OUT). NVLink multicast stays off
(NCCL_NVLS_ENABLE=0 and its PyTorch and NVSHMEM switches) in every job.
An update records the build's git SHA as its provenance: export BENCH_GIT_SHA with the commit of the
tree that was sent, taken on the machine that sent it (the GPU machine's git may name another
commit, main's rather than the branch's, as it did on 2026-11-29); the summary's first line says
which SHA the jobs see.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

from bench_results import self_test_verdict

QUIET_NCCL = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class Runner:
    def __init__(self, budget, out, state, bench):
        self.t0 = time.time()
        self.budget, self.out, self.state, self.bench = budget, out, state, bench
        self.lock = threading.Lock()
        os.makedirs(os.path.join(out, "r"), exist_ok=True)
        os.makedirs(os.path.join(state, "done"), exist_ok=True)
        self.summary = open(os.path.join(out, "summary.txt"), "a")
        self.copies = set()

    def say(self, line):
        with self.lock:
            line = f"[{time.time() - self.t0:7.1f}s] {line}"
            print(line, flush=True)
            self.summary.write(line + "\n")
            self.summary.flush()

    # The helpers a plan calls.
    def compare(self, tag, args, min_s=60, expectations="private"):
        copy = tag if expectations == "private" else expectations
        self.copies.add(copy)
        where = os.path.join(self.state, "exp", copy)
        command = (f"{self.bench} compare --expectations-dir {where} --markdown {self.out}/r/{tag}.md "
                   f"--save-results {self.out}/r/res_{tag}.json {args}")
        return {"tag": tag, "cmd": command, "min_s": min_s, "needs_bench": True}

    def peer(self, tag, command, min_s=60):
        return {"tag": tag, "cmd": f"{command} --json {self.out}/r/{tag}.json", "min_s": min_s}

    def shell(self, tag, command, min_s=30):
        return {"tag": tag, "cmd": command, "min_s": min_s}

    def run(self, job, gpu, until):
        tag, done = job["tag"], os.path.join(self.state, "done", job["tag"])
        if os.path.exists(done):
            self.say(f"SKIP  {tag}: finished in an earlier run on this machine")
            return
        left = min(self.budget, until) - (time.time() - self.t0)
        if left < job["min_s"]:
            self.say(f"DROP  {tag} (gpu {gpu}): {left:.0f} s left, it asks {job['min_s']}")
            return
        if job.get("needs_bench") and not os.access(self.bench, os.X_OK):
            # Checked when the job is due, not when the plan is read: a stage may build it first.
            self.say(f"FAIL  {tag}: no {self.bench}: build first (cmake --preset default && cmake "
                      f"--build --preset default), or give the plan a stage that builds")
            return
        env = dict(os.environ, **QUIET_NCCL)
        if gpu != "all":
            env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        self.say(f"START {tag} (gpu {gpu})")
        start = time.time()
        with open(os.path.join(self.out, tag + ".log"), "w") as log:
            process = subprocess.Popen(["bash", "-c", job["cmd"]], stdout=log, stderr=subprocess.STDOUT,
                                       env=env, start_new_session=True)
            try:
                status = process.wait(timeout=left)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGINT)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                status = "interrupted at the deadline"
        if status in (0, 1):
            open(done, "w").close()
        self.say(f"END   {tag} (gpu {gpu}): exit {status} in {time.time() - start:.1f} s")

    def run_plan(self, stages):
        for copy in sorted(self.copies):  # made before any job starts: no two jobs race to make one
            where = os.path.join(self.state, "exp", copy)
            if not os.path.isdir(where):
                shutil.copytree("expectations", where)
        for stage in stages:
            stage = dict(stage)
            until = stage.pop("until", self.budget)
            if "all" in stage:
                for job in stage["all"]:
                    self.run(job, "all", until)
                continue
            queues = [threading.Thread(target=lambda q=queue, g=gpu: [self.run(j, g, until) for j in q])
                      for gpu, queue in stage.items()]
            for queue in queues:
                queue.start()
            for queue in queues:
                queue.join()
        self.say(f"DONE in {time.time() - self.t0:.1f} s")
        for line in bring_back(sorted(self.copies), os.path.join(self.state, "exp"), "expectations",
                               os.path.join(self.out, "expectations")):
            self.say(line)


def gpu_count():
    """The GPUs this process may use, counted as ctest's slots are (scripts/gpu_slots.sh): at least 1."""
    slots = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_slots.sh")
    printed = subprocess.run(["bash", slots, os.devnull], capture_output=True, text=True).stdout.split()
    return int(printed[-1]) if printed and printed[-1].isdigit() else 1


def provenance_date(entry):
    return (entry.get("provenance") or {}).get("date", "")


def bring_back(copies, copies_dir, tree, out):
    """The expectation files the copies changed, into `out`; returns what it did, a line each."""
    lines = []
    for name in sorted(f for f in os.listdir(tree) if f.endswith(".json")):
        original = open(os.path.join(tree, name)).read()
        changed = [c for c in copies if os.path.exists(os.path.join(copies_dir, c, name))
                   and open(os.path.join(copies_dir, c, name)).read() != original]
        if not changed:
            continue
        os.makedirs(out, exist_ok=True)
        if len(changed) == 1:
            shutil.copyfile(os.path.join(copies_dir, changed[0], name), os.path.join(out, name))
            lines.append(f"expectations/{name}: from copy {changed[0]}")
            continue
        doc = json.loads(original)
        for copy in changed:
            for key, entry in json.load(open(os.path.join(copies_dir, copy, name)))["examples"].items():
                if key not in doc["examples"] or provenance_date(entry) > provenance_date(doc["examples"][key]):
                    if entry != doc["examples"].get(key):
                        lines.append(f"expectations/{name}: {key} from copy {copy} ({provenance_date(entry)})")
                    doc["examples"][key] = entry
        with open(os.path.join(out, name), "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return lines


def plan_namespace(path, helpers, gpus):
    """The names plan file `path` sets, run with `helpers` (compare, peer, shell) and `gpus`, and
    `other_plan(name, gpus)`: another plan of the same folder's names, laid out for that many GPUs
    with the same helpers (a plan that puts two others side by side)."""
    namespace = dict(helpers, gpus=gpus)
    namespace["other_plan"] = lambda name, count: plan_namespace(
        os.path.join(os.path.dirname(path), f"{name}.py"), helpers, count)
    exec(compile(open(path).read(), path, "exec"), namespace)
    return namespace


def touch_changed_sources(build_dir):
    """Before the plan's builds: the sources whose content changed since the last build in
    build_dir touched (scripts/touch_changed.sh: the device machine's copy of the tree keeps each
    file's own time, which can be older than the objects a previous call built there)."""
    if os.path.isfile(os.path.join(build_dir, "build.ninja")):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "touch_changed.sh")
        subprocess.run(["bash", script, build_dir], check=True)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plan", nargs="?")
    parser.add_argument("--budget", type=float, help="seconds from the start by which every job ends")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "jobs"))
    parser.add_argument("--state", default="/tmp/gpu_jobs")
    parser.add_argument("--bench", default="build/default/tools/bench")
    parser.add_argument("--pack", help="at the end, OUT as this .tar.gz (OUT itself removed)")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not args.plan or args.budget is None:
        parser.error("a plan and --budget are needed")
    touch_changed_sources(os.path.dirname(os.path.dirname(args.bench)))
    runner = Runner(args.budget, args.out, args.state, args.bench)
    runner.say(f"BENCH_GIT_SHA {os.environ.get('BENCH_GIT_SHA') or 'unset: the build names the commit'}")
    helpers = {"compare": runner.compare, "peer": runner.peer, "shell": runner.shell}
    runner.run_plan(plan_namespace(args.plan, helpers, gpu_count())["STAGES"])
    if args.pack:
        runner.summary.close()
        shutil.copyfile(os.path.join(args.out, "summary.txt"), args.pack + ".summary.txt")
        with tarfile.open(args.pack, "w:gz") as tar:
            tar.add(args.out, arcname=os.path.basename(os.path.normpath(args.out)))
        shutil.rmtree(args.out)
    return 0


# A stand-in for bench: `fake_bench compare --expectations-dir D ... KEY=SPEEDUP` writes that entry
# into D/x.json with the current time as its provenance date, as an update would.
FAKE_BENCH = r'''#!/usr/bin/env python3
import json, sys, time
args = sys.argv[1:]
where = args[args.index("--expectations-dir") + 1]
key, speedup = args[-1].split("=")
doc = json.load(open(where + "/x.json"))
doc["examples"][key] = {"speedup": float(speedup), "provenance": {"date": "%.6f" % time.time()}}
time.sleep(0.05)
json.dump(doc, open(where + "/x.json", "w"), indent=1)
print("scored", key)
'''


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "expectations"))
        with open(os.path.join(root, "expectations", "x.json"), "w") as f:
            json.dump({"examples": {"a": {"speedup": 1.0, "provenance": {"date": "0"}}}}, f)
        with open(os.path.join(root, "expectations", "y.json"), "w") as f:
            f.write('{"examples": {}}')
        # In a build folder, as build/default/tools/bench is: the run touches what changed first.
        os.makedirs(os.path.join(root, "build", "tools"))
        open(os.path.join(root, "build", "build.ninja"), "w").close()
        bench = os.path.join(root, "build", "tools", "fake_bench")
        with open(bench, "w") as f:
            f.write(FAKE_BENCH)
        os.chmod(bench, 0o755)
        plan = os.path.join(root, "plan.py")
        with open(plan, "w") as f:
            f.write('STAGES = [\n'
                    '  {"all": [shell("first", "echo $CUDA_VISIBLE_DEVICES-unset", 0),\n'
                    '           shell("count", "echo gpus=%d" % gpus, 0)]},\n'
                    '  {"until": 3, "0": [compare("upd", "b=2.0", 0, expectations="g0"),\n'
                    '                     compare("rerun", "c=3.0", 0, expectations="g0"),\n'
                    '                     shell("long", "sleep 30", 0), shell("after", "true", 0)],\n'
                    '               "1": [shell("gpu1", "echo gpu=$CUDA_VISIBLE_DEVICES nvls=$NCCL_NVLS_ENABLE", 0),\n'
                    '                     compare("other", "b=5.0", 0)]},\n'
                    '  {"all": [shell("asks_too_much", "true", 10**6)]},\n'
                    ']\n')
        cwd = os.getcwd()
        os.chdir(root)
        try:
            out, state = os.path.join(root, "out"), os.path.join(root, "state")
            started = time.time()
            main([plan, "--budget", "60", "--out", out, "--state", state, "--bench", bench])
            took = time.time() - started
            if not os.path.isfile(os.path.join(root, "build", "source_sums.txt")):
                failures.append("the sources' sums were not taken before the plan (touch_changed.sh)")
            summary = open(os.path.join(out, "summary.txt")).read()
            log = lambda tag: open(os.path.join(out, tag + ".log")).read()
            if not (3 <= took < 30):
                failures.append(f"the stage's 'until' of 3 s should have cut `sleep 30`: took {took:.1f} s")
            if "END   long (gpu 0): exit interrupted at the deadline" not in summary:
                failures.append("the long job was not interrupted at its stage's end")
            if "DROP  after (gpu 0)" not in summary or "DROP  asks_too_much" not in summary:
                failures.append("a job with too little time left was started")
            if not re.fullmatch(r"gpus=[1-9]\d*", log("count").strip()):
                failures.append("the plan's `gpus` is not a GPU count of at least 1: " + log("count"))
            if log("first").strip() != "-unset" or log("gpu1").strip() != "gpu=1 nvls=0":
                failures.append("the GPU or NCCL environment is wrong: " + log("first") + log("gpu1"))
            merged = json.load(open(os.path.join(out, "expectations", "x.json")))["examples"]
            # b: written into copy g0 (by upd) and into copy other, side by side: the newer wins.
            copies = [json.load(open(os.path.join(state, "exp", c, "x.json")))["examples"]["b"]
                      for c in ("g0", "other")]
            newest = max(copies, key=provenance_date)
            if sorted(merged) != ["a", "b", "c"] or merged["c"]["speedup"] != 3.0 or merged["b"] != newest:
                failures.append(f"the merge of the copies is wrong: {merged}")
            if os.path.exists(os.path.join(out, "expectations", "y.json")):
                failures.append("an expectations file no copy changed was brought back")
            # Sent again: what finished is skipped, what was interrupted or dropped runs again.
            packed = os.path.join(root, "jobs.tar.gz")
            main([plan, "--budget", "60", "--out", out, "--state", state, "--bench", bench, "--pack", packed])
            with tarfile.open(packed) as tar:
                again = tar.extractfile("out/summary.txt").read().decode()[len(summary):]
            if os.path.exists(out) or not os.path.exists(packed + ".summary.txt"):
                failures.append("--pack should leave the archive and its summary, and no OUT")
            if "SKIP  upd" not in again or "SKIP  first" not in again or "START long" not in again:
                failures.append("a second run should skip finished jobs and retry the rest:\n" + again)
            # No bench built (a fresh machine): a compare says so by name instead of exit 127.
            unbuilt = os.path.join(root, "unbuilt")
            main([plan, "--budget", "60", "--out", unbuilt, "--state", os.path.join(root, "s2"),
                  "--bench", os.path.join(root, "no_such_bench")])
            said = open(os.path.join(unbuilt, "summary.txt")).read()
            if "FAIL  upd: no " not in said or "build first" not in said or "START upd" in said:
                failures.append("a compare without a built bench should fail naming it:\n" + said)
        finally:
            os.chdir(cwd)
    failures += check_plans(os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_plans"))
    return self_test_verdict(failures, "")


def check_plans(folder):
    """Every plan in `folder` laid out for 1, 2, 4 and 8 GPUs with stand-in helpers: its STAGES well
    formed (queues of jobs, no tag twice), or a refusal that says why (SystemExit with a message).
    A plan that only fails on the GPU machine costs a call of device time."""
    failures = []
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in sorted(f for f in os.listdir(folder) if f.endswith(".py")):
        for count in (1, 2, 4, 8):
            job = lambda tag, *args, **kwargs: {"tag": tag}
            cwd = os.getcwd()
            os.chdir(root)  # plans may read files by path from the repository root
            try:
                namespace = plan_namespace(os.path.join(folder, name), {"compare": job, "peer": job, "shell": job},
                                           count)
            except SystemExit as refusal:
                if not str(refusal.code or "").strip():
                    failures.append(f"{name} on {count} GPU(s): exits without saying why")
                continue
            except Exception as error:  # noqa: BLE001 (any error in a plan is the finding)
                failures.append(f"{name} on {count} GPU(s): {type(error).__name__}: {error}")
                continue
            finally:
                os.chdir(cwd)
            stages, tags = namespace.get("STAGES"), []
            if not isinstance(stages, list) or not stages:
                failures.append(f"{name} on {count} GPU(s): STAGES is not a non-empty list")
                continue
            for stage in stages:
                queues = {k: v for k, v in stage.items() if k != "until"}
                if any(k != "all" and not (k.isdigit() and int(k) < count) for k in queues):
                    failures.append(f"{name} on {count} GPU(s): a queue for a GPU it lacks: {sorted(queues)}")
                tags += [j["tag"] for q in queues.values() for j in q]
            if len(tags) != len(set(tags)):
                failures.append(f"{name} on {count} GPU(s): a tag twice (a finished job would skip its twin)")
    return failures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
