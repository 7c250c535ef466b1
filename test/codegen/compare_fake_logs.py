#!/usr/bin/env python3
"""Compares the fake CUDA driver's log of a program kdflow codegen wrote with its log of
`kdflow replay` on the same flow (test/fake_cuda/fake_cuda.cpp writes both).

The same allocations (sizes, in order), the same bytes uploaded (the fake's FNV-1a of each
cuMemcpyHtoD, and where they land), and the same steps in the same order: every kernel launch
(kernel, grid, block, dynamic shared memory, launch attributes, the packed parameter bytes) and
every cuBLAS call (operation, sizes, leading dimensions, strides, operands). Device addresses
are compared up to the renaming of allocations: a pointer is written a<k>+<offset>, k the
allocation's rank among the log's cuMemAlloc calls.

A sharded program (`--ranks N`) runs every rank in one thread, one block of allocations each;
a sharded replay runs each rank on a thread of its own (the fake ends each line of a thread but
the first with " thread=N"): each rank's part of the program is compared with its thread.

Replay makes `--runs` runs of the sequence (its checked run, then --warmup and --repeat runs);
the program one (`run --repeat 1`): the replay log's steps are that many copies of the program's.

Exit 0 when the logs agree, 1 with the first difference on stderr, 2 on bad usage.
"""
import argparse
import re
import struct
import sys

ALLOC = re.compile(r"^cuMemAlloc bytes=(\d+) -> 0 ptr=0x([0-9a-f]+)")
HTOD = re.compile(r"^cuMemcpyHtoD dst=0x([0-9a-f]+) bytes=(\d+) -> 0 .*fnv=0x([0-9a-f]+)")
# An upload on a stream (cuMemcpyHtoDAsync) counts where it lands, in stream order.
LANDS = re.compile(r"^memcpy-lands dst=0x([0-9a-f]+) bytes=(\d+) index=\S+ fnv=0x([0-9a-f]+)")
# A launch that may run before a NULL-stream copy or memset lands: the bytes it reads are not
# those of the flow.
RACING = re.compile(r"^cuLaunchKernel.* racing=([1-9]\d*)")
LAUNCH = re.compile(r"^(cuLaunchKernel(?:Ex)?) name=(\S+) grid=(\S+) block=(\S+) smem=(\d+) .*captured=0 "
                    r"param_bytes=(\d+) params=([0-9a-f]*) .*attrs=(\S+) -> 0")
GEMM = re.compile(r"^(cublasSgemm\S*) handle=\S+ stream=\S+ (?:workspace=\S+ )?(.*) -> 0")


THREAD = re.compile(r" thread=(\d+)$")


def read_lines(path):
    with open(path, errors="replace") as f:
        return f.read().splitlines()


def by_thread(lines):
    """The fake's lines per calling thread (" thread=N" ends the lines of every thread but the
    first), the suffix removed."""
    groups = {}
    for line in lines:
        m = THREAD.search(line)
        groups.setdefault(int(m.group(1)) if m else 0, []).append(line[:m.start()] if m else line)
    return [groups[k] for k in sorted(groups)]


class Log:
    def __init__(self, path=None, lines=None):
        self.allocs = []   # (base, bytes)
        self.uploads = []  # text
        self.steps = []    # text
        if lines is None:
            lines = read_lines(path)
        for line in lines:
            m = ALLOC.match(line)
            if m:
                self.allocs.append((int(m.group(2), 16), int(m.group(1))))
        self.racing = [line for line in lines if RACING.match(line)]
        for line in lines:
            m = HTOD.match(line) or LANDS.match(line)
            if m:
                self.uploads.append(f"upload {m.group(2)} bytes to {self.where(int(m.group(1), 16))} "
                                    f"fnv={m.group(3)}")
                continue
            m = LAUNCH.match(line)
            if m:
                api, name, grid, block, smem, nbytes, params, attrs = m.groups()
                self.steps.append(f"{api} {name} grid={grid} block={block} smem={smem} attrs={attrs} "
                                  f"params={self.params(bytes.fromhex(params))}")
                continue
            m = GEMM.match(line)
            if m:
                fields = re.sub(r"\b([ABC])=0x([0-9a-f]+)",
                                lambda g: f"{g.group(1)}={self.where(int(g.group(2), 16))}", m.group(2))
                self.steps.append(f"{m.group(1)} {fields}")

    def where(self, address):
        for k, (base, size) in enumerate(self.allocs):
            if base <= address < base + max(size, 1):
                return f"a{k}+{address - base}"
        return f"0x{address:x}"

    def params(self, raw):
        """8-byte words that point into an allocation as a<k>+<offset>; other bytes as hex."""
        out = []
        i = 0
        while i < len(raw):
            if i % 8 == 0 and i + 8 <= len(raw):
                (v,) = struct.unpack_from("<Q", raw, i)
                w = self.where(v)
                if not w.startswith("0x") and v != 0:
                    out.append(w)
                    i += 8
                    continue
            out.append(raw[i:i + 4].hex() if i + 4 <= len(raw) else raw[i:].hex())
            i += 4 if i + 4 <= len(raw) else len(raw) - i
        return ",".join(out)


def first_difference(a, b, what):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"{what} {i} differs:\n  program: {x}\n  replay:  {y}"
    if len(a) != len(b):
        return f"{what}s: the program has {len(a)}, replay {len(b)}"
    return None


def same_on_every_rank(prog, ranks, min_steps):
    """A sharded program (no replay on CUDA to compare with): its allocations are one block per
    rank, and every rank makes the same steps on its own block, at least min_steps of them."""
    a = len(prog.allocs)
    if a % ranks:
        return [f"{a} allocations do not split over {ranks} ranks"]
    per = a // ranks
    sizes = [s for _, s in prog.allocs]
    problems = []
    for r in range(1, ranks):
        if sizes[r * per:(r + 1) * per] != sizes[:per]:
            problems.append(f"rank {r}'s allocations differ from rank 0's")
    seqs = [[] for _ in range(ranks)]
    for step in prog.steps:
        # The rank is that of the first pointer (two small int32 scalars can read as an address
        # in allocation 0: such a word is renamed only within the owner's block).
        first = re.search(r"a(\d+)\+", step)
        if not first:
            problems.append(f"a step with no pointer into an allocation: {step}")
            continue
        r = int(first.group(1)) // per
        seqs[r].append(re.sub(r"a(\d+)\+", lambda m: f"a{int(m.group(1)) % per}+" if int(m.group(1)) // per == r
                              else m.group(0), step))
    for r in range(ranks):
        if len(seqs[r]) < min_steps:
            problems.append(f"rank {r} made {len(seqs[r])} steps, fewer than the {min_steps} of the flow")
        d = first_difference(seqs[r], seqs[0], f"step of rank {r} against rank 0's")
        if d:
            problems.append(d)
    return problems


def program_rank(prog, ranks, r):
    """Rank r's part of a sharded program's log: its block of allocations, the uploads into it
    and the steps whose first pointer is in it, allocations renamed within the block."""
    per = len(prog.allocs) // ranks

    def mine(text):
        first = re.search(r"a(\d+)\+", text)
        return first is not None and int(first.group(1)) // per == r

    def local(text):
        return re.sub(r"a(\d+)\+", lambda m: f"a{int(m.group(1)) % per}+" if int(m.group(1)) // per == r
                      else m.group(0), text)

    part = Log(lines=[])
    part.racing = prog.racing
    part.allocs = prog.allocs[r * per:(r + 1) * per]
    part.uploads = [local(u) for u in prog.uploads if mine(u)]
    part.steps = [local(st) for st in prog.steps if mine(st)]
    return part


def compare(prog, rep, runs, min_steps, who=""):
    """The problems of replay log `rep` against program log `prog` (one rank's each)."""
    problems = []
    d = first_difference([s for _, s in prog.allocs], [s for _, s in rep.allocs], who + "allocation")
    if d:
        problems.append(d)
    n = len(prog.steps)
    if n < min_steps:
        problems.append(f"{who}the program made {n} steps, fewer than the {min_steps} of the flow")
    if len(rep.steps) != runs * n:
        problems.append(f"{who}replay made {len(rep.steps)} steps in {runs} runs, the program {n} in one")
    for run in range(runs):
        d = first_difference(prog.steps, rep.steps[run * n:(run + 1) * n], f"{who}step (replay run {run})")
        if d:
            problems.append(d)
            break
    for name, log in (("program", prog), ("replay", rep)):
        if log.racing:
            problems.append(f"{who}{len(log.racing)} launches of the {name} may run before a copy lands: "
                            f"{log.racing[0][:160]}")
    # Uploads: the params and inputs, then each run's host copies (replay repeats those).
    k = len(prog.uploads)
    d = first_difference(prog.uploads, rep.uploads[:k], who + "upload")
    if d:
        problems.append(d)
    return problems


def compare_ranks(prog, replay_path, ranks, runs, min_steps):
    """A sharded program against a sharded replay (one thread per rank, each thread's lines its
    rank's): every rank of the program has a replay thread with the same allocations, uploads
    (its own params shard: how a thread is matched to a rank) and steps."""
    a = len(prog.allocs)
    if a % ranks:
        return [f"the program's {a} allocations do not split over {ranks} ranks"]
    threads = [Log(lines=g) for g in by_thread(read_lines(replay_path))]
    threads = [t for t in threads if t.allocs]
    if len(threads) != ranks:
        return [f"replay allocated on {len(threads)} threads, not one per rank ({ranks})"]
    problems = []
    free = list(range(ranks))
    for r in range(ranks):
        part = program_rank(prog, ranks, r)
        match = [t for t in free if threads[t].uploads[:len(part.uploads)] == part.uploads]
        if not match:
            problems.append(f"rank {r}: no replay thread uploads what the program's rank {r} uploads "
                            f"({len(part.uploads)} uploads)")
            continue
        free.remove(match[0])
        problems += compare(part, threads[match[0]], runs, min_steps, f"rank {r}: ")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program_log")
    ap.add_argument("replay_log")
    ap.add_argument("--runs", type=int, default=2, help="runs of the sequence in the replay log")
    ap.add_argument("--min-steps", type=int, default=0, help="fail when the program makes fewer steps")
    ap.add_argument("--ranks", type=int, default=1,
                    help="a sharded program: with replay_log '-', check that every rank makes the same steps; "
                         "with a replay log (one thread per rank), that each rank's thread agrees with it")
    args = ap.parse_args()
    prog = Log(args.program_log)
    if args.replay_log == "-":
        problems = same_on_every_rank(prog, args.ranks, args.min_steps) if args.ranks > 1 else ["no replay log"]
        if problems:
            print("compare_fake_logs: " + "\n".join(problems), file=sys.stderr)
            return 1
        print(f"compare_fake_logs: {args.ranks} ranks make the same {len(prog.steps) // args.ranks} steps on their "
              f"own {len(prog.allocs) // args.ranks} allocations")
        return 0
    if args.ranks > 1:
        problems = compare_ranks(prog, args.replay_log, args.ranks, args.runs, args.min_steps)
        if problems:
            print("compare_fake_logs: " + "\n".join(problems), file=sys.stderr)
            return 1
        print(f"compare_fake_logs: every rank of {args.ranks}: {len(prog.allocs) // args.ranks} allocations, "
              f"{len(prog.uploads) // args.ranks} uploads and {len(prog.steps) // args.ranks} steps agree with "
              f"its replay thread (replay: {args.runs} runs)")
        return 0
    rep = Log(args.replay_log)
    problems = compare(prog, rep, args.runs, args.min_steps)
    n = len(prog.steps)
    if problems:
        print("compare_fake_logs: " + "\n".join(problems), file=sys.stderr)
        return 1
    print(f"compare_fake_logs: {len(prog.allocs)} allocations, {len(prog.uploads)} uploads and {n} steps agree "
          f"(replay: {args.runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
