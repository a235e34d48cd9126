"""`hdsl tune FILE`: the 2013 paper's stochastic search over schedules.

Ragan-Kelley et al., "Halide: a language and compiler for optimizing parallelism,
locality, and recomputation in image processing pipelines" (PLDI 2013), section 5:
a genetic search whose individuals are schedules, one gene per Func. A generation
keeps its best (elitism), fills the rest by two-point crossover between the Funcs of
two parents picked by tournament selection, by mutation of one Func's gene, and by
fresh individuals: "reasonable" ones (the automatic scheduler's rules with random
tile sizes, vector widths and task sizes) and random ones. The first generation is
seeded with the automatic schedule and every schedule block of the file. Within a
budget of minutes a slow-compiling pipeline gets a few dozen candidates, and random
genes rarely improve a good automatic schedule: so about half of each generation (and
most of the first) is local moves from the best schedule so far (`Space.neighbour`,
hill climbing from the elite): a vector width, task size or tile size halved or
doubled, a Func moved inline, to the root or into a consumer's tiles, rows or row
tasks (a sliding window), for one Func, a whole array of Funcs, or every Func.

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
from hdsl.schedule.auto import (SMALL, TILE_Y, _large_dims, _Stage, analyse, auto_genes, block_text, decide,
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
        self._memo: dict = {}

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
        computed at the root instead (keeping its loop shapes); so is one computed or stored
        at a loop the consumer's chain does not make (y_i of a consumer no longer split).
        Crossover and mutation make such genomes (6 of 21 candidates of a bilateral_grid
        search), which the compiler refuses."""
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
                    all(u is host or site(u) == ("at", at) for u in users(s)) and \
                    set(re.findall(rf"(?:compute|store)_at\({re.escape(at)}, (\w+)\)", " ".join(out[s.name]))) \
                    <= _loop_names(host.f, out.get(host.name, []))
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

    # ---- local moves: the neighbours of a good schedule --------------------------------------
    # A random gene rarely beats a good automatic one; what separates the automatic schedule
    # from a hand-written one is a few local changes (bilateral_grid, interpolate,
    # local_laplacian, examples/*.hl): vector widths (8 against 16), parallel task sizes, tile
    # sizes, and where a producer is computed (the histogram per row of blurz, interpolate's
    # levels and local_laplacian's output pyramid per row strip of the output, stored per
    # strip: a sliding window). `neighbour` makes one such change to one Func, or the same
    # change to every Func of an array (it[1], it[2], ...: the hand-written schedules treat a
    # pyramid's levels alike in a loop), or a vector width or task size changed alike in every
    # Func (bilateral_grid: every vector width halved ran 0.84x of the automatic schedule, out
    # of 5 interleaved rounds on the loaded machine); its candidates are cheap to measure (near the
    # incumbent's time, so they are not stopped early only to be discarded) and are where
    # the search climbs from the best it has (hill climbing from the elite).

    MOVES = ("vector", "tasks", "tile", "place", "update")

    def neighbour(self, genome: Genome, tries: int = 32) -> Genome:
        """A genome one local move from `genome` (after repair), different from it; the
        mutation operator's result when no move applies."""
        for _ in range(tries):
            s = self.rng.choice(self.order)
            move = self.rng.choice(self.MOVES)
            family, roll = [s], self.rng.random()
            if roll < 0.2 and move in ("vector", "tasks"):      # every Func alike (vector widths of 8)
                family = [s] + [t for t in self.order if t is not s]
            elif "[" in s.name and roll < 0.6:      # ds[1].dx, ds[2].dx, ...
                base = _array_of(s.name)
                family = [s] + [t for t in self.order if t is not s and _array_of(t.name) == base]
            out, self._memo = dict(genome), {}
            for t in family:
                new = getattr(self, f"_move_{move}")(t, out, same=(t is not s))
                if new is not None:
                    out[t.name] = new
            out = self.repair(out)
            if out != genome:
                return out
        return self.repair(self.mutate(genome))

    def _pure(self, s: _Stage, genome: Genome) -> tuple[int, list[str]] | None:
        """The index of s's pure chain in its gene and the chain's directives; None for an
        inlined (or unscheduled) Func."""
        for i, line in enumerate(genome.get(s.name, [])):
            if not line.startswith(f"{s.name}.update("):
                if "compute_inline()" in line:
                    return None
                return i, _directives(line[len(s.name) + 1:])
        return None

    def _with(self, s: _Stage, genome: Genome, i: int, chain: list[str]) -> list[str]:
        lines = list(genome[s.name])
        lines[i] = f"{s.name}." + ".".join(chain)
        return lines

    def _move_vector(self, s, genome, same=False):
        """The vector width halved or doubled (at least 4, at most 4x the automatic rules'), or
        the vectorize dropped; a Func without one vectorized with the rules' width."""
        got = self._pure(s, genome)
        if got is None:
            return None
        i, chain = got
        vw = vector_width(s.f, self.target)
        k = next((k for k, d in enumerate(chain) if d.startswith("vectorize(")), None)
        roll = self._pick(same)
        if k is None:
            large = _large_dims(s)
            if not large or s.extent(large[0]) < vw:
                return None
            x = _tile_names(chain)[2] if _tile_names(chain) else s.f.args[large[0]]
            return self._with(s, genome, i, chain + [f"vectorize({x}, {vw})"])
        m = re.fullmatch(r"vectorize\((\w+), (\d+)\)", chain[k])
        if m is None:        # vectorize(x) of a split's inner loop (a file's own schedule): left as it is
            return None
        v, n = m.group(1), int(m.group(2))
        if roll < 0.15:
            return self._with(s, genome, i, chain[:k] + chain[k + 1:])
        m = n * 2 if roll < 0.55 else n // 2
        if not 4 <= m <= 4 * vw:
            m = n // 2 if m > n else n * 2
        if not 4 <= m <= 4 * vw:
            return None
        return self._with(s, genome, i, chain[:k] + [f"vectorize({v}, {m})"] + chain[k + 1:])

    def _move_tasks(self, s, genome, same=False):
        """A root Func's parallel tasks twice or half as many rows, whole rows of tiles, or
        no parallel loop; a serial one made parallel over its outer dim."""
        got = self._pure(s, genome)
        if got is None or _where(genome.get(s.name, [])) == "at":
            return None
        i, chain = got
        tiles = _tile_names(chain)
        k = next((k for k, d in enumerate(chain) if d.startswith("parallel(")), None)
        roll = self._pick(same)
        large = _large_dims(s)
        if k is None:
            if len(large) < 2:
                return None
            outer = s.f.args[large[-1]]
            return self._with(s, genome, i, chain + [f"parallel({outer})"])
        m = re.fullmatch(r"parallel\((\w+)(?:, (\d+))?\)", chain[k])
        if m is None:        # a tail strategy named (a file's own schedule): left as it is
            return None
        v, n = m.group(1), int(m.group(2) or 1)
        if roll < 0.1:
            new = None
        elif tiles:
            return None      # a tiled Func's parallel loop is its rows of tiles: the tile move shapes them
        else:
            n = max(1, n * 2 if roll < 0.55 else n // 2) if n > 1 else (2 if roll < 0.55 else 4)
            new = f"parallel({v}, {n})" if n > 1 else f"parallel({v})"
        return self._with(s, genome, i, chain[:k] + ([new] if new else []) + chain[k + 1:])

    def _move_tile(self, s, genome, same=False):
        """One of a tile's sizes halved or doubled, or the tiles dropped (rows again); an
        untiled Func with two large dims tiled 64x32 (its tasks: rows of tiles)."""
        got = self._pure(s, genome)
        if got is None:
            return None
        i, chain = got
        roll = self._pick(same)
        k = next((k for k, d in enumerate(chain) if d.startswith("tile(")), None)
        if k is None:
            large = _large_dims(s)
            if len(large) < 2 or any(d.startswith(("split(", "fuse(")) for d in chain):
                return None
            x, y = s.f.args[large[0]], s.f.args[large[1]]
            out = [d for d in chain if not d.startswith("parallel(")]
            at = next((j + 1 for j, d in enumerate(out) if d.startswith(("compute_", "store_", "reorder("))), 0)
            while at < len(out) and out[at].startswith(("compute_", "store_", "reorder(")):
                at += 1
            out = out[:at] + [f"tile({x}, {y}, {x}_i, {y}_i, 64, 32)"] + \
                [re.sub(rf"^vectorize\({x},", f"vectorize({x}_i,", d) for d in out[at:]]
            if any(d.startswith("parallel(") for d in chain):
                out.append(f"parallel({y})")
            return self._with(s, genome, i, out)
        m = re.fullmatch(r"tile\((\w+), (\w+), (\w+), (\w+), (\d+), (\d+)\)", chain[k])
        if m is None:        # tile's other forms (outer names, a tail strategy): left as they are
            return None
        x, y, xi, yi, w, h = m.groups()
        w, h = int(w), int(h)
        if roll < 0.1:       # rows again: the inner names go, and loops of the tile with them
            out = chain[:k] + [re.sub(rf"\b{xi}\b", x, d) for d in chain[k + 1:] if yi not in d]
            return self._with(s, genome, i, out)
        vec = next((int(m.group(1)) for d in chain if (m := re.match(r"vectorize\(\w+, (\d+)\)", d))), 1)
        grow = self._pick(same, "grow") < 0.5
        if roll < 0.55:
            w = w * 2 if grow else w // 2
        else:
            h = h * 2 if grow else h // 2
        if w < max(8, vec) or h < 2 or w > 2048 or h > 512:
            return None
        return self._with(s, genome, i, chain[:k] + [f"tile({x}, {y}, {xi}, {yi}, {w}, {h})"] + chain[k + 1:])

    def _move_place(self, s, genome, same=False):
        """Where s is computed: inline, at the root, or in a loop of a Func that reads it
        (directly or through inlined Funcs: any scheduled Func downstream) -- per row or
        tile of it, or per row of a parallel task and stored per task (a sliding window;
        a consumer whose rows are parallel one by one gets tasks of TILE_Y rows for it, as
        interpolate's and local_laplacian's hand-written schedules split the output's rows).
        Its loop shapes are kept; a Func moved inside another loses its parallel loops. Only
        places the compiler accepts (those `repair` leaves alone) are drawn. Sets the host's
        gene in `genome` (a copy of the neighbour's) where the place changes it."""
        if s.choice == "output":
            return None
        lines = genome.get(s.name, [])
        where = _where(lines) if lines else ("root" if s.f.updates else "inline")
        options = ([] if s.f.updates or where == "inline" else [("inline", None, None)]) + \
            ([] if where == "root" else [("root", None, None)]) + self._sites(s, genome)
        made = []
        for head, host, host_lines in options:
            new = self._placed(s, genome, head)
            trial = dict(genome, **{s.name: new}, **({host: host_lines} if host_lines else {}))
            if self.repair(trial) == trial:
                made.append((head, new, host, host_lines))
        if same:       # the family's first member's place (ds[3].dx at ds[3]: ds[4].dx at ds[4])
            made = [m for m in made if _array_of(m[0]) == self._memo.get("site")]
        if not made:
            return None
        head, new, host, host_lines = made[int(self._pick(same, "site_roll") * len(made))]
        self._memo.setdefault("site", _array_of(head))
        if host_lines:
            genome[host] = host_lines
        return new

    def _placed(self, s: _Stage, genome: Genome, head: str) -> list[str]:
        """s's gene computed at `head` (inline, root, or a compute_at chain head)."""
        if head == "inline":
            return [f"{s.name}.compute_inline()"]
        got = self._pure(s, genome)
        if got is None:       # from inline: the rules' vector width, serial (at) or rows in parallel
            vw = vector_width(s.f, self.target)
            i, chain, lines = 0, loop_directives(s, vw, None, None if head != "root" else 1), [""]
        else:
            i, chain = got
            chain = [d for d in chain if not d.startswith(("compute_", "store_at(", "store_root("))]
            lines = list(genome[s.name])
        if head == "root":
            lines[i] = f"{s.name}." + ".".join(["compute_root()"] + chain)
            return lines
        chain = [d for d in chain if not d.startswith("parallel(")]
        out = [f"{s.name}." + ".".join([head] + chain)]
        for j, ln in enumerate(lines):       # its updates serial too
            ln = re.sub(r"\.parallel\([^)]*\)", "", ln)
            if j != i and not re.fullmatch(r"[\w.\[\]]+\.update\(\d+\)", ln):
                out.append(ln)
        return out

    def _sites(self, s: _Stage, genome: Genome) -> list[tuple]:
        """(compute_at head, host name, the host's new gene or None) for s in the loops of the
        scheduled Funcs downstream of it: a tiled one's tiles (x) and rows of tiles (y); a
        parallel(y, n) one's rows (y_i) stored per task (y), and its tasks; a split one's
        likewise; another's rows, or (its rows in tasks of TILE_Y) its rows stored per task."""
        out = []
        for g in self._downstream(s):
            gs = self.stages[id(g)]
            gname = self.p.names.get(id(g), g.name)
            got = self._pure(gs, genome) if gs.choice == "output" or gname in genome else None
            if got is None and gs.choice != "output":
                continue
            i, chain = got if got else (0, [])
            large = _large_dims(gs)
            if len(large) < 2:
                continue
            y = g.args[large[-1]]
            tiles = _tile_names(chain)
            par = next((m for d in chain if (m := re.match(r"parallel\((\w+), (\d+)\)", d))), None)
            splits = [m.groups() for d in chain if (m := re.match(r"split\((\w+), (\w+), (\w+),", d))]
            if tiles:
                out += [(f"compute_at({gname}, {tiles[0]})", gname, None),
                        (f"compute_at({gname}, {tiles[1]})", gname, None)]
            elif par:
                v = par.group(1)
                out += [(f"compute_at({gname}, {v}_i).store_at({gname}, {v})", gname, None),
                        (f"compute_at({gname}, {v})", gname, None)]
            elif splits:
                _, outer, inner = splits[-1]
                out += [(f"compute_at({gname}, {inner}).store_at({gname}, {outer})", gname, None),
                        (f"compute_at({gname}, {outer})", gname, None)]
            else:
                out.append((f"compute_at({gname}, {y})", gname, None))
                if got is not None and not any(d.startswith(("fuse(", "tile(")) for d in chain):
                    rest = [d for d in chain if not d.startswith("parallel(")] + [f"parallel({y}, {TILE_Y})"]
                    host = list(genome[gname])
                    host[i] = f"{gname}." + ".".join(rest)
                    out.append((f"compute_at({gname}, {y}_i).store_at({gname}, {y})", gname, host))
        return out

    def _downstream(self, s: _Stage) -> list:
        """The Funcs that read s, directly or through others, nearest first."""
        got, todo, seen = [], list(s.consumers), set()
        while todo:
            g = todo.pop(0)
            if id(g) in seen:
                continue
            seen.add(id(g))
            gs = self.stages[id(g)]
            if gs.name is not None and gs.choice != "default":
                got.append(g)
            todo += gs.consumers
        return got

    def _move_update(self, s, genome, same=False):
        """An update's outer pure loop made parallel, or made serial again."""
        if not s.f.updates or _where(genome.get(s.name, [])) == "inline":
            return None
        from hdsl.ir.func import pure_positions
        lines = list(genome.get(s.name, []))
        i = int(self._pick(same, "update") * len(s.f.updates))
        head = f"{s.name}.update({i})"
        k = next((k for k, ln in enumerate(lines) if ln.startswith(head + ".")), None)
        if k is not None and ".parallel(" in lines[k]:
            new = re.sub(r"\.parallel\([^)]*\)", "", lines[k])
            return lines[:k] + ([new] if new != head else []) + lines[k + 1:]
        if _where(lines) == "at":
            return None
        pure = [a for _, a in pure_positions(s.f, s.f.updates[i]) if s.extent(s.f.args.index(a)) > SMALL]
        if not pure:
            return None
        if k is None:
            return lines + [f"{head}.parallel({pure[-1]})"]
        lines[k] = lines[k] + f".parallel({pure[-1]})"
        return lines

    def _pick(self, same: bool, key: str = "roll") -> float:
        """A random number; a family's later members get the first member's (so every level
        of a pyramid halves its vector width, not some)."""
        if same and key in self._memo:
            return self._memo[key]
        r = self.rng.random()
        self._memo[key] = r
        return r


def _where(lines: list[str]) -> str:
    text = " ".join(lines)
    if "compute_inline" in text:
        return "inline"
    if "compute_at" in text:
        return "at"
    return "root"


def _array_of(name: str) -> str:
    """ds[3].dx -> ds[].dx: the Funcs of one array share it."""
    return re.sub(r"\[\d+\]", "[]", name)


def _directives(chain: str) -> list[str]:
    """`compute_root().tile(x, y, x_i, y_i, 64, 32).vectorize(x_i, 16)` -> its directives."""
    return re.findall(r"\w+\([^()]*\)", chain)


def _tile_names(chain: list[str]) -> tuple | None:
    """(x, y, x_i, y_i) of a chain's tile(x, y, x_i, y_i, w, h); None without one."""
    for d in chain:
        m = re.match(r"tile\((\w+), (\w+), (\w+), (\w+), \d+, \d+\)", d)
        if m:
            return m.groups()
    return None


def _loop_names(f, lines: list[str]) -> set[str]:
    """The loops a Func's pure chain gives it: its args, a tile's or a split's new names, and
    parallel(v, n)'s inner v_i."""
    names = {str(a) for a in f.args}
    for line in lines:
        if ".update(" in line:
            continue
        for d in _directives(line):
            if (m := re.match(r"tile\((.*)\)", d)):
                parts = [a.strip() for a in m.group(1).split(",")]
                names.update(a for a in parts if not a.isdigit() and not a.startswith(("round", "guard", "shift")))
            elif (m := re.match(r"split\((\w+), (\w+), (\w+),", d)):
                names.update(m.groups())
            elif (m := re.match(r"parallel\((\w+), \d+", d)):
                names.add(m.group(1) + "_i")
            elif (m := re.match(r"fuse\((\w+), (\w+), (\w+)\)", d)):
                names.add(m.group(3))
    return names


# ---- the worker: compile, check, time ------------------------------------------------------------

def _output_arrays(api, sizes) -> list:
    """The outputs' arrays for `realize_into`, in the layout native code writes (colour
    planar behind an (H, W, C) view); `sizes` as `realize` takes them (one size for every
    output, or one per output)."""
    from hdsl.bench import output_arrays
    per = [list(sizes)] * len(api.ir.outputs) if sizes and isinstance(sizes[0], (int, np.integer)) else sizes
    return output_arrays(api, per)


def _worker(conn, source, filename, block, inputs, params, sizes, expected, runs, target="host", best_ms=None):
    try:
        from hdsl.api import Pipeline as Api
        from hdsl.frontend.elaborate import check_source
        ir = check_source(source + "\n" + block, filename)
        name = re.match(r"(?:#[^\n]*\n)*schedule (\w+)", block).group(1)
        api = Api(ir)
        c = api.compile(target, schedule=name)
        conn.send(("compiled", None))     # the run's own time limit starts now
        # (timed into arrays made once, in the layout native code writes: `realize` would
        # allocate and, for colour, convert planes to interleaved pixels on every run, which
        # took 21 of camera_pipe's 25 ms per run and hid the differences between schedules)
        outs = _output_arrays(api, sizes)
        c.realize_into(outs if len(outs) > 1 else outs[0], **inputs, **params)
        for g, e in zip(outs, expected):
            if g.shape != e.shape or not np.array_equal(g, e, equal_nan=True):
                conn.send(("wrong", "its output differs from the reference evaluator's"))
                return
        target_outs = tuple(outs) if len(outs) > 1 else outs[0]
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            c.realize_into(target_outs, **inputs, **params)
            times.append(time.perf_counter() - t0)
            if best_ms is not None and times[-1] * 1e3 > STOP_SLOWER * best_ms:
                break        # clearly slower than the best: one timed run ranks it
        conn.send(("ok", float(np.median(times)) * 1e3))
    except HdslError as e:
        conn.send(("refused", e.diagnostics[0].message if e.diagnostics else str(e)))
    except Exception as e:       # a candidate must never take the search down
        conn.send(("crashed", f"{type(e).__name__}: {e}"))


def measure(source, filename, block, inputs, params, sizes, expected, runs, limit_s,
            target: str = "host", run_limit_s: float | None = None, best_ms: float | None = None,
            compile_limit_s: float | None = None) -> tuple[str, object]:
    """Compile, check and time one candidate in a worker process: ("ok", median ms), or
    (why, message) with why one of refused, wrong, crashed, timeout (compiling and running
    took longer than limit_s) and slow (running, after it compiled, took longer than
    run_limit_s: no better than the best found by far). Given the best candidate's time
    (best_ms), the worker stops timing what is clearly slower: after a timed run over
    STOP_SLOWER times best_ms, its time is the median of the runs so far (a process's first
    run, the checked one, is not compared: it pays for starting the thread pool and first
    touching memory, 3-7x a later run of interpolate). The check is never skipped. A
    candidate still compiling after compile_limit_s is a timeout too."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(child, source, filename, block, inputs, params, sizes, expected,
                                             runs, target, best_ms))
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

    if compile_limit_s is not None and compile_limit_s < limit_s:
        out = receive(compile_limit_s, ("timeout", f"compiling took longer than {compile_limit_s:.0f} s"))
    else:
        out = receive(limit_s, ("timeout", f"took longer than {limit_s:g} s"))
    if out[0] == "compiled":
        left = limit_s - (time.monotonic() - start)
        if run_limit_s is not None and run_limit_s < left:
            out = receive(run_limit_s, ("slow", f"ran longer than {run_limit_s:.1f} s, "
                                                f"the limit set by the best candidate's runs"))
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
        outs = None
        for block in blocks:
            try:
                name = re.match(r"(?:#[^\n]*\n)*schedule (\w+)", block).group(1)
                api = Api(check_source(source + "\n" + block, filename))
                c = api.compile(target, schedule=name)
                if outs is None:          # (as in _worker: arrays made once, in native layout)
                    made = _output_arrays(api, sizes)
                    outs = tuple(made) if len(made) > 1 else made[0]
                c.realize_into(outs, **inputs, **params)       # the first run pays for the page faults
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
                    compiled[i].realize_into(outs, **inputs, **params)
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
STOP_SLOWER = 2.5   # a candidate is not timed again after a run this many times the best's median
COMPILE_SLOWER = 3.0    # a candidate is stopped when compiling takes this many times the seeds' measurement
MIN_COMPILE_S = 15.0    # (but never before this)
CLIMB = 0.45        # the share of a generation made by a local move from the best (hill climbing)
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
        # the check's run (a first run: up to ~8x a later one) and the timed runs at the pace
        # the worker's early stop allows (STOP_SLOWER), with a margin: a random schedule can
        # be 1000x slower (bilateral_grid's histogram recomputed per point ran past 120 s, a
        # fifth of a 10-minute search)
        timed = best_ms < math.inf and origin not in seed_names
        run_limit = max(MIN_RUN_S, 1.5 * (8 + STOP_SLOWER * runs) * best_ms / 1e3) if timed else None
        t0 = time.monotonic()
        # the seeds are always measured in full; a later candidate only in the budget's time
        # left before the final comparison (--minutes is the whole budget)
        limit = limit_s if origin in seed_names or deadline == math.inf else \
            max(1.0, min(limit_s, deadline - reserve() - t0))
        # compiling: at most COMPILE_SLOWER times the slowest seed's whole measurement (an
        # interpolate neighbour compiled past 100 s, a sixth of a 10-minute search)
        compile_limit = None if origin in seed_names else \
            max(MIN_COMPILE_S, COMPILE_SLOWER * max((seen[t].cost_s for t in seed_texts if t in seen), default=math.inf))
        status, value = measure_fn(source, filename, block, inputs, params, sizes, expected, runs, limit, target,
                                   run_limit, best_ms if timed else None, compile_limit)
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
        return len(history) < trials and time.monotonic() < deadline - reserve() and stale[0] < 100

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

    def best() -> Result:
        return incumbent[0] if incumbent else min(pop, key=lambda r: r.time_ms)

    stale = [0]        # candidates in a row that were all measured before: the space is spent

    def fresh(make) -> tuple[Genome, str]:
        """A candidate not measured yet (a few tries: a local move from the same best can
        repeat one), made by make() -> (genome, origin)."""
        for _ in range(8):
            g, origin = make()
            g = space.repair(g)
            if genome_text(p, g) not in seen:
                stale[0] = 0
                break
        else:
            stale[0] += 1
        return g, origin

    # the first generation: the seeds, then mostly neighbours of the best seed (a random
    # individual of a slow-compiling app costs as much as several local moves, and rarely
    # runs near the seed's time), with a few reasonable and random ones
    def first() -> tuple[Genome, str]:
        roll = rng.random()
        if roll < 0.7 and pop:
            return space.neighbour(best().genome), "climb"
        return (space.reasonable(), "reasonable") if roll < 0.9 else (space.random(), "random")
    while budget_left() and len(pop) < population:
        pop.append(evaluate(*fresh(first)))
    while budget_left():
        pop.sort(key=lambda r: r.time_ms)
        nxt = pop[:elite]

        def pick() -> Result:
            return min(rng.sample(pop, min(3, len(pop))), key=lambda r: r.time_ms)

        def child() -> tuple[Genome, str]:
            roll = rng.random()
            if roll < CLIMB:        # hill climbing: one local move from the best so far
                return space.neighbour(best().genome), "climb"
            if roll < CLIMB + 0.2:
                return space.crossover(pick().genome, pick().genome), "crossover"
            if roll < CLIMB + 0.4:
                return space.mutate(pick().genome), "mutation"
            if roll < CLIMB + 0.5:
                return space.reasonable(), "reasonable"
            return space.random(), "random"
        while len(nxt) < population and budget_left():
            nxt.append(evaluate(*fresh(child)))
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
