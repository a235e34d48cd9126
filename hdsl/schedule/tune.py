"""`hdsl tune FILE`: the 2013 paper's stochastic search over schedules.

Ragan-Kelley et al., "Halide: a language and compiler for optimizing parallelism,
locality, and recomputation in image processing pipelines" (PLDI 2013), section 5:
a genetic search whose individuals are schedules, one gene per Func. A generation
keeps its best (elitism), fills the rest by two-point crossover between the Funcs of
two parents picked by tournament selection, by mutation of one Func's gene, and by
fresh individuals: "reasonable" ones (the automatic scheduler's rules with random
tile sizes, vector widths and task sizes) and random ones. The first generation is
seeded with the automatic schedule and every schedule block of the file.

Each candidate is elaborated from the file's text with the candidate appended as a
block (so it passes every check a block written by hand gets), compiled, run and
timed in a worker process with a time limit; a candidate that is refused, crashes,
runs out of time, or whose output differs from the reference evaluator's, is
rejected. A single measurement can be lucky (another process paused while it ran), so
a candidate that beats the best so far is measured again against it at once, interleaved
in one worker (`compare`), and ranked by the median; and before the search returns, its
few best candidates and the seeds are compared the same way over several rounds: the
schedule returned is the one with the best median there, never one measured slower than
the best seed in that comparison. That final phase is inside the budget (`--minutes`).
The best is written into the file as a named `schedule` block with its measured time
(hdsl/runtime/files.py write_atomic).
"""
from __future__ import annotations

import math
import multiprocessing as mp
import random
import re
import sys
import time
from dataclasses import dataclass

import numpy as np

from hdsl.diagnostics import HdslError
from hdsl.ir.func import Pipeline
from hdsl.schedule.auto import (SMALL, _large_dims, _Stage, analyse, auto_genes, block_text, decide,
                                estimate_lines, loop_directives, schedule_text, vector_width)
from hdsl.schedule.record import GPU_SCHEDULES

Genome = dict      # Func name -> its chains (a list of lines); a name absent: the defaults


@dataclass
class Result:
    genome: Genome
    time_ms: float            # math.inf when rejected
    why: str = ""             # why it was rejected
    origin: str = ""
    cost_s: float = 0.0       # the wall time its measurement took (compiling, checking, timing)
    rounds: list | None = None   # its times (ms) in the final comparison, one per round


def genome_text(p: Pipeline, genome: Genome) -> str:
    return "\n".join(estimate_lines(p) + [line for name in sorted(genome) for line in genome[name]]) + "\n"


def split_by_func(p: Pipeline, text: str) -> Genome:
    """Schedule text -> its chains grouped by the Func each one schedules."""
    genome: Genome = {}
    names = set(p.names.values())
    for line in text.splitlines():
        line = line.strip()
        if not line or ".estimate(" in line:
            continue
        head = line.split(".update(")[0]
        # the longest known name the line starts with (sharp.unsharp_blur.gauss_x)
        name = max((n for n in names if head.startswith(n + ".")), key=len, default=None)
        if name is not None:
            genome.setdefault(name, []).append(line)
    return genome


class Space:
    """The genes a Func can take: inline, root or inside a consumer, and the loops' shapes."""

    def __init__(self, p: Pipeline, target: str, rng: random.Random):
        self.p, self.target, self.rng = p, target, rng
        self.stages = analyse(p, target)
        decide(p, self.stages)
        self.order = [s for s in self.stages.values() if s.name is not None and s.choice != "default"]

    def reasonable(self) -> Genome:
        """The automatic scheduler's choices of where to compute, with random loop shapes."""
        genome = {}
        for s in self.order:
            genome[s.name] = self.gene(s, s.choice if s.choice != "output" else "output", s.at)
        return genome

    def random(self) -> Genome:
        return {s.name: self.random_gene(s) for s in self.order}

    def random_gene(self, s: _Stage) -> list[str]:
        if s.choice == "output":
            return self.gene(s, "output", None)
        options = ["root"] + ([] if s.f.updates else ["inline"])
        ats = self._at_options(s)
        if ats and not s.f.updates:
            options.append("at")
        choice = self.rng.choice(options)
        return self.gene(s, choice, self.rng.choice(ats) if choice == "at" else None)

    def _at_options(self, s: _Stage) -> list[tuple]:
        out = []
        for g in s.consumers:
            sg = self.stages[id(g)]
            if sg.name is not None and sg.choice not in ("default",):
                large = _large_dims(sg)
                for d in large[:2]:
                    out.append((g, g.args[d]))
        return out

    def gene(self, s: _Stage, choice: str, at) -> list[str]:
        rng = self.rng
        if choice == "inline":
            return [f"{s.name}.compute_inline()"] if not s.f.updates else []
        chain = []
        if choice == "root":
            chain.append("compute_root()")
        elif choice == "at":
            g, v = at
            chain.append(f"compute_at({self.p.names.get(id(g), g.name)}, {v})")
        vec = rng.choice([0, vector_width(s.f, self.target) // 2, vector_width(s.f, self.target),
                          vector_width(s.f, self.target) * 2])
        tile = (rng.choice([16, 32, 64, 128, 256]), rng.choice([8, 16, 32, 64])) if rng.random() < 0.5 else None
        par = None if choice == "at" or rng.random() < 0.15 else rng.choice([1, 2, 4, 8, 16])
        chain += loop_directives(s, vec, tile, par)
        lines = [f"{s.name}." + ".".join(chain)] if chain else []
        if choice != "inline":
            for i, u in enumerate(s.f.updates):
                if rng.random() < 0.5:
                    from hdsl.ir.func import pure_positions
                    pure = [a for _, a in pure_positions(s.f, u) if s.extent(s.f.args.index(a)) > SMALL]
                    if pure:
                        lines.append(f"{s.name}.update({i}).parallel({pure[-1]})")
        return lines

    def mutate(self, genome: Genome) -> Genome:
        out = dict(genome)
        s = self.rng.choice(self.order)
        if self.rng.random() < 0.5 and s.choice != "output":
            out[s.name] = self.random_gene(s)
        else:   # the same place, other loop shapes
            where = "output" if s.choice == "output" else _where(out.get(s.name, []))
            at = None
            if where == "at":
                ats = self._at_options(s)
                if not ats:
                    where = "root"
                else:
                    at = self.rng.choice(ats)
            out[s.name] = self.gene(s, where, at)
        return out

    def repair(self, genome: Genome) -> Genome:
        """A genome whose compute_at sites exist: a Func computed at a loop of a consumer
        that the genome inlines, or also read by a stage outside that consumer's loops, is
        computed at the root instead (keeping its loop shapes). Crossover and mutation make
        such genomes (6 of 21 candidates of a bilateral_grid search), which the compiler
        refuses."""
        out = dict(genome)
        by_id = {id(s.f): s for s in self.stages.values()}

        def site(s: _Stage):
            """('inline' | 'root' | 'output', None) or ('at', consumer's name)."""
            if s.choice == "output":
                return "output", None
            if s.name is None or s.choice == "default" or s.name not in out:
                return ("root" if s.f.updates else "inline"), None
            m = re.search(r"compute_at\(([\w.\[\]]+), ", " ".join(out[s.name]))
            return ("at", m.group(1)) if m else (_where(out[s.name]), None)

        def users(s: _Stage) -> list[_Stage]:
            got, todo, seen = [], list(s.consumers), set()
            while todo:
                g = by_id[id(todo.pop())]
                if id(g.f) in seen:
                    continue
                seen.add(id(g.f))
                if site(g)[0] == "inline":
                    todo += g.consumers
                else:
                    got.append(g)
            return got

        changed = True
        while changed:
            changed = False
            for s in self.order:
                kind, at = site(s)
                if kind != "at":
                    continue
                host = next((g for g in self.order if g.name == at), None)
                ok = host is not None and site(host)[0] != "inline" and \
                    all(u is host or site(u) == ("at", at) for u in users(s))
                if not ok:
                    out[s.name] = [re.sub(r"\.store_at\([^)]*\)", "",
                                          re.sub(r"compute_at\([^)]*\)", "compute_root()", line))
                                   for line in out[s.name]]
                    changed = True
        return out

    def crossover(self, a: Genome, b: Genome) -> Genome:
        """Two-point crossover over the Funcs in pipeline order."""
        names = [s.name for s in self.order]
        i, j = sorted(self.rng.sample(range(len(names) + 1), 2)) if len(names) > 1 else (0, len(names))
        child = {}
        for k, n in enumerate(names):
            src = b if i <= k < j else a
            if n in src:
                child[n] = src[n]
        return child


def _where(lines: list[str]) -> str:
    text = " ".join(lines)
    if "compute_inline" in text:
        return "inline"
    if "compute_at" in text:
        return "at"
    return "root"


# ---- the worker: compile, check, time ------------------------------------------------------------

def _worker(conn, source, filename, block, inputs, params, sizes, expected, runs, target="host"):
    try:
        from hdsl.api import Pipeline as Api
        from hdsl.frontend.elaborate import check_source
        ir = check_source(source + "\n" + block, filename)
        name = re.match(r"(?:#[^\n]*\n)*schedule (\w+)", block).group(1)
        api = Api(ir)
        c = api.compile(target, schedule=name)
        conn.send(("compiled", None))     # the run's own time limit starts now
        got = c.realize(sizes, **inputs, **params)
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected):
            if g.shape != e.shape or not np.array_equal(g, e, equal_nan=True):
                conn.send(("wrong", "its output differs from the reference evaluator's"))
                return
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            c.realize(sizes, **inputs, **params)
            times.append(time.perf_counter() - t0)
        conn.send(("ok", float(np.median(times)) * 1e3))
    except HdslError as e:
        conn.send(("refused", e.diagnostics[0].message if e.diagnostics else str(e)))
    except Exception as e:       # a candidate must never take the search down
        conn.send(("crashed", f"{type(e).__name__}: {e}"))


def measure(source, filename, block, inputs, params, sizes, expected, runs, limit_s,
            target: str = "host", run_limit_s: float | None = None) -> tuple[str, object]:
    """Compile, check and time one candidate in a worker process: ("ok", median ms), or
    (why, message) with why one of refused, wrong, crashed, timeout (compiling and running
    took longer than limit_s) and slow (running, after it compiled, took longer than
    run_limit_s: no better than the best found by far)."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(child, source, filename, block, inputs, params, sizes, expected,
                                             runs, target))
    start = time.monotonic()
    proc.start()
    child.close()

    def receive(wait, late):
        if parent.poll(max(0.0, wait)):
            try:
                return parent.recv()
            except EOFError:
                return ("crashed", "the worker died")
        return late

    out = receive(limit_s, ("timeout", f"took longer than {limit_s:g} s"))
    if out[0] == "compiled":
        left = limit_s - (time.monotonic() - start)
        if run_limit_s is not None and run_limit_s < left:
            out = receive(run_limit_s, ("slow", f"ran longer than {run_limit_s:.1f} s, "
                                                f"{SLOWER:g}x the best candidate's runs"))
        else:
            out = receive(left, ("timeout", f"took longer than {limit_s:g} s"))
    if proc.is_alive():
        proc.kill()
    proc.join()
    if out[0] == "ok" or proc.exitcode in (0, None) or out[0] != "crashed":
        return out
    return ("crashed", f"the worker exited with {proc.exitcode}")


def _compare_worker(conn, source, filename, blocks, inputs, params, sizes, rounds, runs, target="host"):
    """Compile every block (each one a `schedule NAME {...}`), then time them in turns:
    each round runs every candidate `runs` times (its median is the round's time), starting
    one candidate further along each round, and sends the round's times."""
    try:
        from hdsl.api import Pipeline as Api
        from hdsl.frontend.elaborate import check_source
        compiled = []
        for block in blocks:
            try:
                name = re.match(r"(?:#[^\n]*\n)*schedule (\w+)", block).group(1)
                c = Api(check_source(source + "\n" + block, filename)).compile(target, schedule=name)
                c.realize(sizes, **inputs, **params)       # the first run pays for allocation
                compiled.append(c)
            except Exception:    # it ran in the search; here it only loses
                compiled.append(None)
        conn.send(("compiled", None))
        n = len(compiled)
        for r in range(rounds):
            times = [math.inf] * n
            for k in range(n):
                i = (k + r) % n
                if compiled[i] is None:
                    continue
                ts = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    compiled[i].realize(sizes, **inputs, **params)
                    ts.append(time.perf_counter() - t0)
                times[i] = float(np.median(ts)) * 1e3
            conn.send(("round", times))
        conn.send(("done", None))
    except Exception as e:
        conn.send(("crashed", f"{type(e).__name__}: {e}"))


def compare(source, filename, blocks, inputs, params, sizes, rounds, runs, limit_s,
            target: str = "host") -> list[list[float]]:
    """The candidates (schedule blocks) timed interleaved in one worker process, over
    `rounds` rounds: a list of rounds, each one time (ms, inf for a candidate that failed)
    per block. The rounds finished within limit_s (compiling included); maybe none."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_compare_worker, args=(child, source, filename, blocks, inputs, params, sizes,
                                                     rounds, runs, target))
    end = time.monotonic() + limit_s
    proc.start()
    child.close()
    got = []
    try:
        while parent.poll(max(0.0, end - time.monotonic())):
            try:
                kind, value = parent.recv()
            except EOFError:
                break
            if kind == "round":
                got.append(value)
            elif kind != "compiled":
                break
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
    return got


def medians(rounds: list[list[float]], n: int) -> list[float]:
    """Each candidate's median over the rounds (inf without any)."""
    return [float(np.median([r[i] for r in rounds])) if rounds else math.inf for i in range(n)]


def choose(finalists: list[Result], n_seeds: int, rounds: list[list[float]]) -> Result:
    """The final comparison's winner: the finalist with the best median over the rounds,
    the seeds (the first n_seeds finalists) winning ties; a candidate that is not faster than
    the best seed there is never chosen. Without a finished round nothing was compared: the
    best seed that ran in the search if any (a search's single measurement can be lucky),
    else the search's best."""
    if not rounds:
        seeds = [r for r in finalists[:n_seeds] if r.time_ms < math.inf]
        return min(seeds or finalists, key=lambda r: r.time_ms)
    med = medians(rounds, len(finalists))
    if min(med) == math.inf:
        return choose(finalists, n_seeds, [])
    for i, r in enumerate(finalists):        # each finalist keeps its times there
        r.rounds = [x[i] for x in rounds]
    win = min(range(len(finalists)), key=lambda i: (med[i], i >= n_seeds, i))
    r = finalists[win]
    return Result(r.genome, med[win], r.why, r.origin, r.cost_s, r.rounds)


# ---- the search ----------------------------------------------------------------------------------

SLOWER = 8.0        # a candidate whose runs take this many times the best's is stopped once compiled
MIN_RUN_S = 5.0     # (but never before it has run this long; the seeds have no run limit)
FINALISTS = 3       # the search's best candidates compared again with the seeds before it returns
FINAL_ROUNDS = 5    # rounds of that comparison (and CONFIRM_ROUNDS for a new best against the old)
CONFIRM_ROUNDS = 3


def tune(p: Pipeline, source: str, filename: str, inputs, params, sizes, expected, *, trials: int = 40,
         minutes: float | None = None, population: int = 8, elite: int = 2, seed: int = 0, runs: int = 5,
         limit_s: float = 60.0, progress=None, file_seeds: bool = True,
         target: str = "host", measure_fn=None, compare_fn=None) -> tuple[Result, list[Result]]:
    """The best schedule found within the budget, and every candidate measured (in order).
    file_seeds=False leaves the file's own schedule blocks out of the first generation (the
    search starts from the automatic schedule alone: how a file without a schedule is tuned,
    and how benchmarks/autosched.py judges the search against the hand-written schedule).
    target: a CPU target, with its features (host-fast_math). The best is chosen by the
    final comparison (`choose`): its time_ms is its median there and `rounds` its times.
    measure_fn and compare_fn stand in for `measure` and `compare` (the tests' fake timers)."""
    from hdsl.target import parse_target
    measure_fn = measure_fn or measure
    compare_fn = compare_fn or compare
    base = parse_target(target).base
    rng = random.Random(seed)
    space = Space(p, base, rng)
    start = time.monotonic()
    deadline = start + minutes * 60 if minutes else math.inf
    seen: dict[str, Result] = {}
    history: list[Result] = []
    incumbent: list[Result] = []      # the best so far, confirmed against its predecessor

    def text_of(r: Result) -> str:
        return genome_text(p, r.genome)

    def versus(cands: list[Result], rounds: int, limit: float) -> list[list[float]]:
        blocks = [block_text(text_of(r), f"hdsl_tune_final{i}") for i, r in enumerate(cands)]
        return compare_fn(source, filename, blocks, inputs, params, sizes, rounds, runs, max(0.0, limit), target)

    def confirm(r: Result) -> None:
        """r measured faster than the incumbent: both again, interleaved; the ranking keeps
        their medians (a lucky measurement drops back)."""
        old = incumbent[0]
        t0 = time.monotonic()
        limit = min(deadline - reserve() - t0, (old.cost_s + r.cost_s) * 2 + 10)
        got = versus([old, r], CONFIRM_ROUNDS, limit) if limit > 0 else []
        r.cost_s += (time.monotonic() - t0) / 2
        if got:
            old.time_ms, r.time_ms = medians(got, 2)
        if r.time_ms < old.time_ms:
            incumbent[0] = r

    def evaluate(genome: Genome, origin: str) -> Result:
        text = genome_text(p, genome)
        if text in seen:
            return seen[text]
        block = block_text(text, "hdsl_tune_candidate")
        best_ms = min((r.time_ms for r in history), default=math.inf)
        # the check's run and the timed runs, at SLOWER times the best's pace: a random
        # schedule can be 1000x slower (bilateral_grid's histogram recomputed per point ran
        # past 120 s, a fifth of a 10-minute search)
        run_limit = None if best_ms == math.inf or origin in seed_names else \
            max(MIN_RUN_S, SLOWER * best_ms / 1e3 * (runs + 1))
        t0 = time.monotonic()
        # the seeds are always measured in full; a later candidate only in the budget's time
        # left before the final comparison (--minutes is the whole budget)
        limit = limit_s if origin in seed_names or deadline == math.inf else \
            max(1.0, min(limit_s, deadline - reserve() - t0))
        status, value = measure_fn(source, filename, block, inputs, params, sizes, expected, runs, limit, target,
                                   run_limit)
        r = Result(genome, value if status == "ok" else math.inf, "" if status == "ok" else f"{status}: {value}",
                   origin, time.monotonic() - t0)
        seen[text] = r
        history.append(r)
        if r.time_ms < math.inf:
            if not incumbent:
                incumbent.append(r)
            elif r.time_ms < incumbent[0].time_ms:
                confirm(r)
        if progress:
            progress(r, history)
        return r

    def finalists() -> list[Result]:
        seeds = [seen[t] for t in seed_texts if t in seen and seen[t].time_ms < math.inf]
        ids = {id(r) for r in seeds}
        rest = sorted((r for r in history if r.time_ms < math.inf and id(r) not in ids), key=lambda r: r.time_ms)
        return seeds + rest[:FINALISTS]

    def reserve() -> float:
        """Time kept for the final comparison: its candidates' compiling and timing, as long
        as their measurements took, with a margin."""
        if deadline == math.inf:
            return 0.0
        return 1.5 * sum(r.cost_s for r in finalists()) + min(5.0, 0.02 * (deadline - start))

    def budget_left() -> bool:
        return len(history) < trials and time.monotonic() < deadline - reserve()

    seeds = [("auto", auto_genes(p, base))]
    for name, sched in (p.schedules.items() if file_seeds else ()):
        if name in GPU_SCHEDULES or sched.auto or not sched.directives:
            continue
        try:
            seeds.append((f"schedule {name}" if name else "the default schedule",
                          split_by_func(p, schedule_text(p, sched))))
        except HdslError:
            continue
    seed_names = {origin for origin, _ in seeds}
    seed_texts = list(dict.fromkeys(genome_text(p, g) for _, g in seeds))
    pop: list[Result] = []
    for origin, g in seeds:
        if len(history) < trials and time.monotonic() < deadline:     # the seeds are always measured
            pop.append(evaluate(g, origin))
    while budget_left() and len(pop) < population:
        origin = "reasonable" if rng.random() < 0.7 else "random"
        pop.append(evaluate(space.repair(space.reasonable() if origin == "reasonable" else space.random()), origin))
    while budget_left():
        pop.sort(key=lambda r: r.time_ms)
        nxt = pop[:elite]

        def pick() -> Result:
            return min(rng.sample(pop, min(3, len(pop))), key=lambda r: r.time_ms)
        while len(nxt) < population and budget_left():
            roll = rng.random()
            if roll < 0.4:
                g, origin = space.crossover(pick().genome, pick().genome), "crossover"
            elif roll < 0.8:
                g, origin = space.mutate(pick().genome), "mutation"
            elif roll < 0.9:
                g, origin = space.reasonable(), "reasonable"
            else:
                g, origin = space.random(), "random"
            nxt.append(evaluate(space.repair(g), origin))
        pop = nxt
    if not history:
        return None, history
    final = finalists()
    n_seeds = sum(1 for t in seed_texts if t in seen and seen[t].time_ms < math.inf)
    if len(final) > 1:
        limit = deadline - time.monotonic() if deadline < math.inf else limit_s * len(final)
        rounds = versus(final, FINAL_ROUNDS, limit)
    else:
        rounds = []
    if final:
        return choose(final, n_seeds, rounds), history
    return min(history, key=lambda r: r.time_ms), history


def write_block(path: str, text: str, name: str, comment: str) -> None:
    """Put `schedule NAME { ... }` (with its comment line) into the file at path, replacing
    a block of that name written by an earlier run."""
    from pathlib import Path

    from hdsl.runtime.files import write_atomic
    old = Path(path).read_text()
    lines = old.splitlines(keepends=True)
    out, skip = [], False
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(rf"schedule\s+{re.escape(name)}\s*\{{", line):
            while out and out[-1].startswith("# hdsl tune"):
                out.pop()
            skip = True
        if not skip:
            out.append(line)
        elif line.rstrip() == "}":
            skip = False
        i += 1
    body = "".join(out)
    if body and not body.endswith("\n"):
        body += "\n"
    if body and not body.endswith("\n\n"):
        body += "\n"
    write_atomic(path, (body + block_text(text, name, comment)).encode())


def progress_line(trials: int, stream=None):
    """A progress bar on one line (stderr): trials done, the best and the last time."""
    start = time.monotonic()

    def show(r: Result, history: list[Result]):
        out = stream or sys.stderr
        best = min(h.time_ms for h in history)
        done = len(history)
        width = 20
        bar = "#" * int(width * min(done, trials) / max(trials, 1))
        best_s = f"{best:.3f} ms" if best < math.inf else "none yet"
        this = f"{r.time_ms:.3f} ms" if r.time_ms < math.inf else r.why.split(":")[0]
        out.write(f"\r[{bar:<{width}}] {done}/{trials}  best {best_s}  last {this} ({r.origin})  "
                     f"{time.monotonic() - start:.0f} s   ")
        out.flush()
    return show
