"""Worker processes with limits: every check, compile and run of a program someone sends.

Each job runs in a process of its own, forked from a server process that has hdsl imported
(multiprocessing's forkserver, so a job starts in milliseconds), under `resource.setrlimit`
limits on CPU time, address space and file size, and killed when it outlives its wall-time
limit. A job that dies (out of memory, a signal) or is killed becomes an answer that says
which limit it hit; the web server itself never runs a program.

Jobs wait in lanes, each with a number of workers and a bounded queue: a job that finds its
lane's queue full is refused at once (`Busy`), so a flood of requests cannot pile up.
"""
from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PRELOAD = ["hdsl.playground.warm", "hdsl.playground.jobs", "hdsl.api", "hdsl.aot", "hdsl.lower.lower", "hdsl.codegen.llvm",
           "hdsl.runtime.native", "hdsl.interp.evaluate", "hdsl.runtime.images", "PIL.PngImagePlugin"]


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 20            # CPU seconds of a job (all its threads)
    wall_s: float = 30.0       # seconds from start to answer
    memory_mb: int = 3072      # address space
    file_mb: int = 256         # the largest file a job may write (the compile cache's objects)


class Busy(Exception):
    """The lane's queue is full: the request is refused, not queued."""


@dataclass(frozen=True)
class Folders:
    examples: Path | None
    images: Path | None


def _apply_limits(limits: Limits) -> None:
    cpu = resource.RLIMIT_CPU
    resource.setrlimit(cpu, (limits.cpu_s, limits.cpu_s + 2))
    mem = limits.memory_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    size = limits.file_mb << 20
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _child(conn, kind: str, req: dict, folders: Folders, limits: Limits, work: str) -> None:
    """A job, in its own process: limits first, then the work; the answer goes down `conn`."""
    work = Path(work)
    _apply_limits(limits)
    os.chdir(folders.examples if folders.examples is not None else work)
    printed = work / "printed.txt"
    fd = os.open(printed, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = open(1, "w", closefd=False, buffering=1)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    from hdsl.playground import jobs
    try:
        if kind == "check":
            answer = jobs.check(req, folders.examples)
        elif kind == "run":
            answer = jobs.run(req, folders.examples, folders.images, work)
        elif kind == "view":
            answer = jobs.view(req, folders.examples)
        else:
            answer = {"ok": False, "error": f"unknown job '{kind}'"}
    except MemoryError:
        answer = limit_answer("memory", limits)
    except RecursionError:
        answer = {"ok": False, "limit": "depth", "error": "the program nests too deeply to compile"}
    except Exception as e:        # a bug in hdsl, never the user's fault
        answer = {"ok": False, "internal": True,
                  "error": f"internal compiler error: {type(e).__name__}: {e} (this is a bug in hdsl; "
                           f"please report it with the program)"}
    sys.stdout.flush()
    sys.stderr.flush()
    with open(printed, "rb") as f:
        answer["printed"] = f.read(jobs.MAX_PRINTED).decode("utf-8", "replace")
    conn.send(answer)
    conn.close()


def limit_answer(limit: str, limits: Limits, detail: str = "") -> dict:
    """The answer for a job stopped by a limit, worded for the person who sent it."""
    words = {
        "cpu": f"the program used more than its {limits.cpu_s} s of CPU time and was stopped",
        "wall": f"the program took longer than {limits.wall_s:g} s and was stopped",
        "memory": f"the program needed more than its {limits.memory_mb} MiB of memory and was stopped",
        "crash": f"the program's worker died{detail}; most often it ran out of its {limits.memory_mb} MiB "
                 f"of memory",
    }
    hint = ("a smaller input, fewer points in an rdom, or a schedule that stores less (compute_root "
            "on a large Func needs a buffer of its whole region); the playground's limits are "
            "set by `hdsl playground --cpu-seconds/--wall-seconds/--memory-mb`")
    return {"ok": False, "limit": limit, "error": words[limit], "hint": hint}


class Lane:
    """Jobs of one kind of work: at most `workers` at once and `queue` more waiting."""

    def __init__(self, workers: int, queue: int, limits: Limits):
        self.workers, self.queue, self.limits = workers, queue, limits
        self.pending = 0
        self._slots: asyncio.Semaphore | None = None

    async def submit(self, pool: "Pool", kind: str, req: dict) -> dict:
        if self.pending >= self.workers + self.queue:
            raise Busy()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        self.pending += 1
        try:
            async with self._slots:
                return await asyncio.to_thread(pool.run_job, kind, req, self.limits)
        finally:
            self.pending -= 1


class Pool:
    """Starts the jobs; `lanes`: "check" (as you type) and "run" (runs and compiled forms)."""

    def __init__(self, folders: Folders, run_limits: Limits, workers: int = 2, queue: int = 32):
        self.folders = folders
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(PRELOAD)
        check_limits = Limits(cpu_s=min(run_limits.cpu_s, 10), wall_s=min(run_limits.wall_s, 15.0),
                              memory_mb=run_limits.memory_mb, file_mb=16)
        self.lanes = {"check": Lane(1, 8, check_limits), "run": Lane(workers, queue, run_limits)}

    async def submit(self, kind: str, req: dict) -> dict:
        lane = self.lanes["check" if kind == "check" else "run"]
        return await lane.submit(self, kind, req)

    def run_job(self, kind: str, req: dict, limits: Limits) -> dict:
        """One job in a new process (blocking: called on a thread)."""
        work = tempfile.mkdtemp(prefix="hdsl-playground-")
        recv, send = self.ctx.Pipe(duplex=False)
        proc = self.ctx.Process(target=_child, args=(send, kind, req, self.folders, limits, work), daemon=True)
        try:
            proc.start()
            send.close()
            answer = None
            if recv.poll(limits.wall_s):
                try:
                    answer = recv.recv()
                except (EOFError, OSError):
                    answer = None
            else:
                proc.kill()
                proc.join()
                return limit_answer("wall", limits)
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
            if answer is not None:
                return answer
            code = proc.exitcode
            if code == -signal.SIGXCPU or code == -signal.SIGKILL:
                return limit_answer("cpu", limits)
            detail = f" (signal {signal.Signals(-code).name})" if code is not None and code < 0 else \
                f" (exit status {code})"
            return limit_answer("crash", limits, detail)
        finally:
            recv.close()
            shutil.rmtree(work, ignore_errors=True)
