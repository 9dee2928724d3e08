#!/usr/bin/env python3
"""Every interleaving of kernels/flash_attention_wgmma.cuh's barrier protocol, explored.

A model, written by hand from the header, of the order in which the producer thread and the two
consumer warpgroups of a 128-row block wait on and arrive at the ring's mbarriers (Q, and K and V
full/empty per stage) and the consumers' named barriers (the ping-pong turns), for a sequence of
blocks through one CTA (the persistent kernel; one block is the plain grid). TMA loads land in any
order, at any time after they are issued. A breadth-first search over every reachable state
reports:
  - a deadlock: a state where nothing can move and some agent has not finished;
  - a wrong phase: a wait on a full barrier that passes while its stage holds another tile;
  - an arrival left pending on a named barrier when the CTA ends (the next CTA on the SM would
    inherit it);
  - a turn out of order: a consumer issuing its turn's P V while the other should (the turns go
    round robin, consumer 0 first, in every block of more than one tile).
It models the order of synchronisation, not the machine: a wgmma group's completion, warps of a
warpgroup running apart and the compiler's placement of instructions are outside it. Keep it in
step with the header's schedules (serial has no turns; pingpong, overlap and
overlap_early_turn below).

  scripts/flash_wgmma_protocol.py [--blocks 3,4 ...]   check the schedules on these sequences
  scripts/flash_wgmma_protocol.py --self-test           the schedules pass, planted defects fail
"""
import argparse
import collections
import sys

STAGES = 2
CONSUMERS = 2
SCHEDULES = ("pingpong", "overlap", "overlap_early_turn")


def programs(blocks, schedule, defect=None):
    """The producer's and each consumer's operations for a CTA walking `blocks` (tile counts)."""
    producer, consumers = [], [[] for _ in range(CONSUMERS)]
    ring = 0
    for b, tiles in enumerate(blocks):
        if b > 0:
            producer.append(("wait", "q_empty", (b - 1) & 1, None))
        producer.append(("load", "q_full", None, b))

        def load(kind, t):
            n = ring + t
            if n >= STAGES:
                producer.append(("wait", f"{kind}_empty{n % STAGES}", (n // STAGES - 1) & 1, None))
            producer.append(("load", f"{kind}_full{n % STAGES}", None, n))

        if schedule != "pingpong":  # the overlap schedules: K one tile ahead of V
            load("k", 0)
            for t in range(1, tiles):
                load("k", t)
                load("v", t - 1)
            load("v", tiles - 1)
        else:
            for t in range(tiles):
                load("k", t)
                load("v", t)
        for cw, ops in enumerate(consumers):
            last_consumer = cw == CONSUMERS - 1

            def wait(kind, n):
                parity = (n // STAGES) & 1
                if defect == "parity" and cw == 0 and kind == "v" and n == ring + tiles - 1:
                    parity ^= 1
                ops.append(("wait", f"{kind}_full{n % STAGES}", parity, n))

            def release(kind, n):
                ops.append(("arrive", f"{kind}_empty{n % STAGES}", None, None))

            def turn():
                ops.append(("bar_sync", 1 + cw, None, None))

            def pass_turn():
                ops.append(("bar_arrive", 1 + (cw + 1) % CONSUMERS, None, None))

            def issue_in_turn():  # the turn's P V issue, which the turns must order
                ops.append(("issue", cw, None, None))

            ops.append(("wait", "q_full", b & 1, b))
            if last_consumer and tiles > 1 and defect != "no_first_pass":
                pass_turn()
            if schedule != "pingpong":  # overlap, overlap_early_turn
                early = schedule == "overlap_early_turn"
                wait("k", ring)  # S of tile 0 issued
                for k in range(tiles):  # overlap_tile
                    n, first, last = ring + k, k == 0, k == tiles - 1
                    passes = not first and (not last_consumer or not last or defect == "extra_pass")
                    if not first:
                        if passes and defect == "arrive_first":
                            pass_turn()
                        turn()
                        wait("v", n - 1)
                        issue_in_turn()  # P V of tile k - 1
                        if early and passes and defect != "arrive_first":
                            pass_turn()  # before P V is waited for
                    # P V of tile k - 1 waited for (tile 0: its S)
                    release("k", n)
                    if not first:
                        release("v", n - 1)
                    if last:
                        ops.append(("arrive", "q_empty", None, None))
                    else:
                        wait("k", n + 1)  # S of tile k + 1 issued
                    if not early and passes and defect != "arrive_first":
                        pass_turn()
            else:  # pingpong
                wait("k", ring)
                release("k", ring)
                for t in range(1, tiles):
                    n = ring + t
                    passes = not last_consumer or t + 1 < tiles or defect == "extra_pass"
                    if passes and defect == "arrive_first":
                        pass_turn()
                    turn()
                    wait("k", n)
                    wait("v", n - 1)
                    issue_in_turn()  # S of tile t and P V of tile t - 1
                    if passes and defect != "arrive_first":
                        pass_turn()
                    release("k", n)
                    release("v", n - 1)
                ops.append(("arrive", "q_empty", None, None))
            wait("v", ring + tiles - 1)  # the last P V
            release("v", ring + tiles - 1)
        ring += tiles
    return [producer] + consumers


def explore(blocks, schedule, defect=None):
    """(states visited, first problem found or None)."""
    agents = programs(blocks, schedule, defect)
    names = ["q_full", "q_empty"] + [f"{k}_{f}{s}" for k in "kv" for f in ("full", "empty")
                                     for s in range(STAGES)]
    index = {name: i for i, name in enumerate(names)}
    arrivals = [CONSUMERS if "empty" in name else 1 for name in names]
    # state: program counters, completed phases and pending arrivals per mbarrier, loads in flight
    # (barrier, tile), the tile each full barrier last completed with, named barrier (count,
    # generation) per id, the generation each agent waits on at a bar_sync (or None), and the
    # consumer whose turn's issue comes next.
    start = (tuple(0 for _ in agents), tuple(0 for _ in names), tuple(arrivals), frozenset(),
             tuple(-1 for _ in names), ((0, 0),) * CONSUMERS, (None,) * len(agents), 0)
    seen, queue = {start}, collections.deque([start])
    while queue:
        state = queue.popleft()
        pcs, phases, pending, flight, landed, named, waiting, turn = state
        nexts = []
        for bar, tile in flight:  # a load lands
            i = index[bar]
            nexts.append((pcs, phases[:i] + (phases[i] + 1,) + phases[i + 1:], pending,
                          flight - {(bar, tile)}, landed[:i] + (tile,) + landed[i + 1:], named,
                          waiting, turn))
        for a, program in enumerate(agents):
            if pcs[a] >= len(program):
                continue
            op, target, parity, tile = program[pcs[a]]
            advanced = pcs[:a] + (pcs[a] + 1,) + pcs[a + 1:]
            if op == "wait":
                i = index[target]
                if phases[i] & 1 != parity:
                    if tile is not None and landed[i] != tile:
                        return len(seen), f"wrong phase: agent {a} passed {target} for tile {tile} " \
                                          f"while it holds tile {landed[i]}"
                    nexts.append((advanced, phases, pending, flight, landed, named, waiting, turn))
            elif op == "issue":
                if target != turn:
                    return len(seen), f"turn out of order: consumer {target} issued in " \
                                      f"consumer {turn}'s turn"
                nexts.append((advanced, phases, pending, flight, landed, named, waiting,
                              (turn + 1) % CONSUMERS))
            elif op == "arrive":
                i = index[target]
                left = pending[i] - 1
                done = left == 0
                nexts.append((advanced, phases[:i] + (phases[i] + done,) + phases[i + 1:],
                              pending[:i] + (arrivals[i] if done else left,) + pending[i + 1:],
                              flight, landed, named, waiting, turn))
            elif op == "load":
                nexts.append((advanced, phases, pending, flight | {(target, tile)}, landed, named,
                              waiting, turn))
            else:  # named barriers: count CONSUMERS arrivals (one a warpgroup) per generation
                j = target - 1
                count, generation = named[j]
                if op == "bar_sync" and waiting[a] is not None:  # blocked until its generation ends
                    if generation > waiting[a]:
                        nexts.append((advanced, phases, pending, flight, landed, named,
                                      waiting[:a] + (None,) + waiting[a + 1:], turn))
                    continue
                count += 1
                bumped = (0, generation + 1) if count == CONSUMERS else (count, generation)
                named2 = named[:j] + (bumped,) + named[j + 1:]
                if op == "bar_sync":
                    nexts.append((pcs, phases, pending, flight, landed, named2,
                                  waiting[:a] + (generation,) + waiting[a + 1:], turn))
                else:
                    nexts.append((advanced, phases, pending, flight, landed, named2, waiting,
                                  turn))
        if not nexts:
            stuck = [a for a, program in enumerate(agents) if pcs[a] < len(program)]
            if stuck or flight:
                where = ", ".join(f"agent {a} at {agents[a][pcs[a]][:2]}" for a in stuck)
                return len(seen), f"deadlock: {where}"
            if any(count for count, _ in named):
                return len(seen), f"named barrier arrivals pending at exit: {named}"
            continue
        for state2 in nexts:
            if state2 not in seen:
                seen.add(state2)
                queue.append(state2)
    return len(seen), None


SEQUENCES = [[1], [2], [3], [4], [5], [6], [3, 3], [4, 4], [2, 5], [5, 2], [1, 4], [4, 1], [3, 1, 3]]


def check(sequences, out):
    failures = 0
    for schedule in SCHEDULES:
        for blocks in sequences:
            states, problem = explore(blocks, schedule)
            out.write(f"{schedule:18} blocks {blocks}: {states} states, {problem or 'ok'}\n")
            failures += problem is not None
    return failures


def self_test():
    """The real schedules pass; each planted defect is found."""
    if check(SEQUENCES, sys.stdout):
        return 1
    # arrive_first: each turn passed before it is waited for, so nothing orders the consumers'
    # issues (the turns' one job) though every wait is still matched by one arrival.
    planted = {"extra_pass": "pending at exit", "no_first_pass": "deadlock",
               "parity": "wrong phase", "arrive_first": "turn out of order"}
    bad = 0
    for schedule in SCHEDULES:
        for defect, expected in planted.items():
            blocks = [3]
            _, problem = explore(blocks, schedule, defect)
            found = problem is not None and expected in problem
            print(f"planted {defect} ({schedule}): {'found' if found else 'MISSED'}: {problem}")
            bad += not found
    print("self-test:", "FAILED" if bad else "passed")
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", nargs="*", help="block sequences, each tile counts joined by commas")
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    sequences = [[int(t) for t in s.split(",")] for s in args.blocks] if args.blocks else SEQUENCES
    return 1 if check(sequences, sys.stdout) else 0


if __name__ == "__main__":
    sys.exit(main())
