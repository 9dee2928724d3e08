#!/usr/bin/env python3
"""Every interleaving of kernels/flash_attention_wgmma.cuh's barrier protocol, explored.

A model, written by hand from the header, of the order in which the producer thread and the two
consumer warpgroups of a 128-row block (or the three of a 192-row block, --consumers 3) wait on and
arrive at the ring's mbarriers (Q, and K and V full/empty per stage) and the consumers' named
barriers (the ping-pong turns), for a sequence of blocks through one CTA (the persistent kernel;
one block is the plain grid). In a 192-row block each consumer computes only the first `mine` of
the block's tiles (consumer_tiles) and passes over the rest, still taking its turns and releasing
their stages; a block is then written T:m0:m1:m2 (T tiles, consumer c computing mc), and plain T
means every consumer computes all T. TMA loads land in any order, at any time after they are
issued. A breadth-first search over every reachable state reports:
  - a deadlock: a state where nothing can move and some agent has not finished;
  - a wrong phase: a wait on a full barrier that passes while its stage holds another tile;
  - an arrival left pending on a named barrier when the CTA ends (the next CTA on the SM would
    inherit it);
  - a turn out of order: a consumer taking its turn (issuing its P V, or passing over a tile)
    while another should (the turns go round robin, consumer 0 first, in every block of more
    than one tile).
It models the order of synchronisation, not the machine: a wgmma group's completion, warps of a
warpgroup running apart and the compiler's placement of instructions are outside it. Keep it in
step with the header's schedules (serial has no turns; pingpong, overlap and
overlap_early_turn below; three consumers run pingpong only).

  scripts/flash_wgmma_protocol.py [--blocks 3,4 ...]   check the schedules on these sequences
  scripts/flash_wgmma_protocol.py --consumers 3 --blocks 2:1:1:2,3:2:3:3 ...
  scripts/flash_wgmma_protocol.py --self-test           the schedules pass, planted defects fail
"""
import argparse
import collections
import sys

STAGES = 2
SCHEDULES = ("pingpong", "overlap", "overlap_early_turn")
NAMED_ARRIVALS = 2  # a turn's named barrier counts 256 threads: the waiter and the passer


def schedules(consumers):
    return SCHEDULES if consumers == 2 else ("pingpong",)  # overlap: two S sets, two consumers


def block_spec(block, consumers):
    """(tiles, each consumer's computed tiles) from a tile count or a (tiles, mine...) tuple."""
    if isinstance(block, int):
        return block, (block,) * consumers
    tiles, mine = block[0], tuple(block[1:])
    assert len(mine) == consumers and all(1 <= m <= tiles for m in mine), block
    return tiles, mine


def programs(blocks, schedule, defect=None, n_consumers=2):
    """The producer's and each consumer's operations for a CTA walking `blocks` (block_spec)."""
    producer, consumers = [], [[] for _ in range(n_consumers)]
    ring = 0
    for b, block in enumerate(blocks):
        tiles, mines = block_spec(block, n_consumers)
        assert schedule == "pingpong" or all(m == tiles for m in mines), "overlap: mine == tiles"
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
            last_consumer = cw == n_consumers - 1
            mine = mines[cw]

            def wait(kind, n):
                parity = (n // STAGES) & 1
                if defect == "parity" and cw == 0 and kind == "v" and n == ring + mine - 1:
                    parity ^= 1
                ops.append(("wait", f"{kind}_full{n % STAGES}", parity, n))

            def release(kind, n):
                ops.append(("arrive", f"{kind}_empty{n % STAGES}", None, None))

            def turn():
                ops.append(("bar_sync", 1 + cw, None, None))

            def pass_turn():
                ops.append(("bar_arrive", 1 + (cw + 1) % n_consumers, None, None))

            def issue_in_turn():  # the turn's P V issue (or pass-over), which the turns order
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
                wait("v", ring + tiles - 1)  # the last P V
                release("v", ring + tiles - 1)
            else:  # pingpong
                wait("k", ring)
                release("k", ring)
                for t in range(1, mine):
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
                wait("v", ring + mine - 1)  # the last P V
                release("v", ring + mine - 1)
                for t in range(mine, tiles):  # the tiles past this consumer's rows: pass_over
                    n = ring + t
                    if defect != "skip_pass_over_turns":
                        passes = not last_consumer or t + 1 < tiles
                        turn()
                        issue_in_turn()  # the turn taken, nothing issued
                        if passes:
                            pass_turn()
                    wait("k", n)
                    release("k", n)
                    wait("v", n)
                    release("v", n)
        ring += tiles
    return [producer] + consumers


def explore(blocks, schedule, defect=None, consumers=2):
    """(states visited, first problem found or None)."""
    agents = programs(blocks, schedule, defect, consumers)
    names = ["q_full", "q_empty"] + [f"{k}_{f}{s}" for k in "kv" for f in ("full", "empty")
                                     for s in range(STAGES)]
    index = {name: i for i, name in enumerate(names)}
    arrivals = [consumers if "empty" in name else 1 for name in names]
    # state: program counters, completed phases and pending arrivals per mbarrier, loads in flight
    # (barrier, tile), the tile each full barrier last completed with, named barrier (count,
    # generation) per id, the generation each agent waits on at a bar_sync (or None), and the
    # consumer whose turn's issue comes next.
    start = (tuple(0 for _ in agents), tuple(0 for _ in names), tuple(arrivals), frozenset(),
             tuple(-1 for _ in names), ((0, 0),) * consumers, (None,) * len(agents), 0)
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
                              (turn + 1) % consumers))
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
            else:  # named barriers: NAMED_ARRIVALS arrivals (one a warpgroup) a generation
                j = target - 1
                count, generation = named[j]
                if op == "bar_sync" and waiting[a] is not None:  # blocked until its generation ends
                    if generation > waiting[a]:
                        nexts.append((advanced, phases, pending, flight, landed, named,
                                      waiting[:a] + (None,) + waiting[a + 1:], turn))
                    continue
                count += 1
                bumped = (0, generation + 1) if count == NAMED_ARRIVALS else (count, generation)
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
# Three consumers (192-row blocks), consumer c computing mc of T tiles (T:m0:m1:m2): causal blocks
# (each consumer the prefix its rows need, the last one all), a head's ragged last block
# (consumers whose rows start past seq compute tile 0 alone), and block changes between them in
# both directions, with one-tile blocks between (no turns at all). A single block is
# wgmma_pingpong_192's plain grid; the sequences are a persistent three-consumer CTA, which ch16
# tried and did not keep (its README: "Tried and not kept").
SEQUENCES_3 = [[(2, 1, 1, 2)], [(3, 2, 3, 3)], [(4, 1, 1, 1)], [(2, 1, 1, 2), (3, 2, 3, 3)],
               [(3, 2, 3, 3), (2, 1, 1, 2)], [(3, 3, 1, 1), (3, 1, 2, 3)], [(2, 1, 2, 2), 1, 3],
               [1, (3, 1, 1, 3), (2, 2, 1, 1)], [(3, 1, 2, 3), (3, 1, 2, 3)]]


def check(sequences, out, consumers=2):
    failures = 0
    for schedule in schedules(consumers):
        for blocks in sequences:
            states, problem = explore(blocks, schedule, consumers=consumers)
            spec = [b if isinstance(b, int) else ":".join(map(str, b)) for b in blocks]
            out.write(f"{consumers} consumers {schedule:18} blocks {spec}: {states} states, "
                      f"{problem or 'ok'}\n")
            failures += problem is not None
    return failures


def self_test():
    """The real schedules pass; each planted defect is found."""
    if check(SEQUENCES, sys.stdout) or check(SEQUENCES_3, sys.stdout, consumers=3):
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
    # Three consumers: the planted defects on a block change (the extra pass there is a second
    # turn in flight in the next block, not an arrival left at exit), and a consumer past its
    # tiles that skips its turns (the others' turns then wait for it).
    planted3 = dict(planted, extra_pass="turn out of order", skip_pass_over_turns="deadlock")
    for defect, expected in planted3.items():
        blocks = [(3, 2, 3, 3), (3, 1, 2, 3)]
        _, problem = explore(blocks, "pingpong", defect, consumers=3)
        found = problem is not None and expected in problem
        print(f"planted {defect} (pingpong, 3 consumers): {'found' if found else 'MISSED'}: "
              f"{problem}")
        bad += not found
    print("self-test:", "FAILED" if bad else "passed")
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", nargs="*",
                        help="block sequences, blocks joined by commas, each T or T:m0:m1[:m2] "
                             "(T tiles, consumer c computing mc)")
    parser.add_argument("--consumers", type=int, choices=(2, 3), default=2)
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()

    def block(text):
        fields = [int(f) for f in text.split(":")]
        return fields[0] if len(fields) == 1 else tuple(fields)

    default = SEQUENCES if args.consumers == 2 else SEQUENCES_3
    sequences = [[block(b) for b in s.split(",")] for s in args.blocks] if args.blocks else default
    return 1 if check(sequences, sys.stdout, args.consumers) else 0


if __name__ == "__main__":
    sys.exit(main())
