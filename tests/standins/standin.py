"""Stand-ins for LSF (bsub, bjobs, bkill) and PBS Professional (qsub, qstat, qdel), which cannot be
installed here. Test helpers only: they really run the submitted job script, detached in a session
of its own, with the scheduler's environment and hosts of the virtual cluster, and print the
documented output formats:

  bsub < script       `Job <123> is submitted to default queue <normal>.`  (#BSUB -J name[1-5] arrays,
                      -n, -R "span[ptile=K]", -W, -q, -P, -x, -o/-e with %J and %I, -cwd, -b)
  bjobs -o "jobid stat exit_code run_time exec_host" -json IDS
                      {"COMMAND":"bjobs","JOBS":N,"RECORDS":[{"JOBID":"123[4]","STAT":"RUN",...}]}
  bkill IDS           `Job <123> is being terminated`
  qsub script         `123.server`, `123[].server` for an array (#PBS -J 0-4, -N, -l select=K:ncpus=C:mpiprocs=R,
                      -l walltime, -q, -A, -o/-e with ^array_index^, -a)
  qstat -f -F json [-x] [-t] IDS
                      {"timestamp":...,"pbs_version":"...","pbs_server":"server","Jobs":{"123.server":{...}}}
  qdel IDS            (silent)

Job environment: LSF sets LSB_JOBID, LSB_JOBINDEX (1-based in arrays, 0 otherwise), LSB_DJOB_HOSTFILE
(one host per slot), LSB_MCPU_HOSTS ("node1 2 node2 2"), LSB_HOSTS; PBS sets PBS_JOBID, PBS_ARRAY_INDEX,
PBS_ARRAY_ID, PBS_NODEFILE (one line per mpiproc), PBS_O_WORKDIR, and starts the job in $HOME.
The hosts are CB_STANDIN_HOSTS (default "node1 node2 node3"); one job runs at a time (each takes the
cluster, as exclusive jobs would), the others wait as PEND / Q. State lives in $CB_STANDIN_STATE.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

SERVER = "server"


def state_dir() -> Path:
    raw = os.environ.get("CB_STANDIN_STATE")
    if not raw:
        sys.exit(f"{Path(sys.argv[0]).name}: CB_STANDIN_STATE is not set (the stand-in's state directory)")
    path = Path(raw)
    (path / "jobs").mkdir(parents=True, exist_ok=True)
    return path


def new_id(state: Path) -> int:
    with open(state / "counter.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        counter = state / "counter"
        value = int(counter.read_text()) + 1 if counter.exists() else 100
        counter.write_text(str(value))
        return value


def write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def directives(script: str, prefix: str) -> list[str]:
    """The words of the scheduler lines (#BSUB / #PBS) before the first command."""
    words: list[str] = []
    for line in script.splitlines()[1:]:
        if line.startswith(prefix):
            words += shlex.split(line[len(prefix):])
        elif line.strip() and not line.startswith("#"):
            break
    return words


def parse_options(words: list[str], with_value: set[str]) -> dict[str, list[str]]:
    opts: dict[str, list[str]] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word in with_value and i + 1 < len(words):
            opts.setdefault(word, []).append(words[i + 1])
            i += 2
        else:
            opts.setdefault(word, []).append("")
            i += 1
    return opts


def hosts_for(nodes: int, per_node: int) -> list[tuple[str, int]]:
    names = os.environ.get("CB_STANDIN_HOSTS", "node1 node2 node3").split()
    if nodes > len(names):
        sys.exit(f"asks for {nodes} hosts, the stand-in cluster has {len(names)}")
    return [(n, per_node) for n in names[:nodes]]


def spawn(job_dir: Path, index: int) -> None:
    """The element's runner, detached: its own session, no terminal, nothing inherited."""
    subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "run", str(job_dir), str(index)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True, close_fds=True)


# ----------------------------------------------------------------------------------------- submission

def bsub(argv: list[str]) -> int:
    state = state_dir()
    script = sys.stdin.read() if not argv or argv[-1].startswith("-") else Path(argv[-1]).read_text()
    opts = parse_options(directives(script, "#BSUB") + argv, {"-J", "-n", "-R", "-W", "-q", "-P", "-o", "-e",
                                                              "-cwd", "-b"})
    name = opts.get("-J", ["job"])[-1]
    indices = [0]
    m = re.fullmatch(r"(.*)\[(\d+)-(\d+)\]", name)
    if m:
        name, indices = m.group(1), list(range(int(m.group(2)), int(m.group(3)) + 1))
    slots = int(opts.get("-n", ["1"])[-1])
    ptile = slots
    for res in opts.get("-R", []):
        p = re.search(r"span\[ptile=(\d+)\]", res)
        if p:
            ptile = int(p.group(1))
    hosts = hosts_for(-(-slots // ptile), ptile)
    begin = 0.0
    if "-b" in opts:
        parts = [int(x) for x in opts["-b"][-1].split(":")]
        now = time.localtime()
        full = [now.tm_year, now.tm_mon, now.tm_mday][: 5 - len(parts)] + parts
        begin = time.mktime((*full, 0, 0, 0, -1))
    limit = None
    if "-W" in opts:
        hm = [int(x) for x in opts["-W"][-1].split(":")]
        limit = (hm[0] * 60 + hm[1]) * 60 if len(hm) == 2 else hm[0] * 60
    job_id = new_id(state)
    job_dir = state / "jobs" / str(job_id)
    job_dir.mkdir()
    (job_dir / "script").write_text(script)
    queue = opts.get("-q", ["normal"])[-1]
    write_json(job_dir / "job.json", {
        "kind": "lsf", "id": job_id, "name": name, "array": bool(m), "indices": indices, "hosts": hosts,
        "cwd": opts.get("-cwd", [os.getcwd()])[-1], "out": opts.get("-o", [None])[-1],
        "err": opts.get("-e", [None])[-1], "begin": begin, "limit": limit, "queue": queue,
        "env": dict(os.environ), "submitted": time.time()})
    for index in indices:
        spawn(job_dir, index)
    print(f"Job <{job_id}> is submitted to {'default ' if '-q' not in opts else ''}queue <{queue}>.")
    return 0


def qsub(argv: list[str]) -> int:
    state = state_dir()
    path = next((a for a in reversed(argv) if not a.startswith("-")), None)
    script = Path(path).read_text() if path else sys.stdin.read()
    opts = parse_options(directives(script, "#PBS") + [a for a in argv if a != path],
                         {"-N", "-l", "-J", "-q", "-A", "-o", "-e", "-a"})
    name = opts.get("-N", [Path(path).name if path else "STDIN"])[-1]
    nodes, mpiprocs, limit = 1, 1, None
    for res in opts.get("-l", []):
        sel = re.match(r"select=(\d+)(.*)", res)
        if sel:
            nodes = int(sel.group(1))
            mp = re.search(r"mpiprocs=(\d+)", sel.group(2))
            mpiprocs = int(mp.group(1)) if mp else 1
        wt = re.match(r"walltime=(\d+):(\d+):(\d+)", res)
        if wt:
            limit = int(wt.group(1)) * 3600 + int(wt.group(2)) * 60 + int(wt.group(3))
    indices = [0]
    array = "-J" in opts
    if array:
        lo, hi = opts["-J"][-1].split(":")[0].split("-")
        indices = list(range(int(lo), int(hi) + 1))
    begin = 0.0
    if "-a" in opts:
        text = opts["-a"][-1]
        main, _, secs = text.partition(".")
        begin = time.mktime(time.strptime(main, "%Y%m%d%H%M")) + (int(secs) if secs else 0)
    job_id = new_id(state)
    job_dir = state / "jobs" / str(job_id)
    job_dir.mkdir()
    (job_dir / "script").write_text(script)
    write_json(job_dir / "job.json", {
        "kind": "pbs", "id": job_id, "name": name, "array": array, "indices": indices,
        "hosts": hosts_for(nodes, mpiprocs), "cwd": os.environ.get("HOME", "/"), "workdir": os.getcwd(),
        "out": opts.get("-o", [None])[-1], "err": opts.get("-e", [None])[-1], "begin": begin, "limit": limit,
        "queue": opts.get("-q", ["workq"])[-1], "env": dict(os.environ), "submitted": time.time()})
    for index in indices:
        spawn(job_dir, index)
    print(f"{job_id}[].{SERVER}" if array else f"{job_id}.{SERVER}")
    return 0


# ----------------------------------------------------------------------------------------- one element

def element_id(job: dict, index: int) -> str:
    if job["kind"] == "lsf":
        return f"{job['id']}[{index}]" if job["array"] else str(job["id"])
    return f"{job['id']}[{index}].{SERVER}" if job["array"] else f"{job['id']}.{SERVER}"


def run_element(job_dir: Path, index: int) -> int:
    job = read_json(job_dir / "job.json")
    assert job is not None
    record = job_dir / f"el-{index}.json"
    write_json(record, {"state": "pending", "pgid": os.getpgid(0), "pid": os.getpid()})
    stop = {"signal": None}

    def on_signal(signum, _frame):
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while time.time() < job["begin"] and stop["signal"] is None:
        time.sleep(0.2)
    with open(job_dir.parent.parent / "cluster.lock", "a+") as lock:  # one job at a time: each takes the cluster
        while stop["signal"] is None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.2)
        if stop["signal"] is not None:
            write_json(record, {"state": "killed", "exit": 130, "start": None, "end": time.time(), "hosts": []})
            return 1
        return _run_script(job, job_dir, index, record, stop)


def _run_script(job: dict, job_dir: Path, index: int, record: Path, stop: dict) -> int:
    hosts = [(h, n) for h, n in job["hosts"]]
    slots = [h for h, n in hosts for _ in range(n)]
    nodefile = job_dir / f"hosts-{index}"
    nodefile.write_text("".join(f"{h}\n" for h in slots))
    env = dict(job["env"])
    eid = element_id(job, index)
    if job["kind"] == "lsf":
        env |= {"LSB_JOBID": str(job["id"]), "LSB_JOBINDEX": str(index if job["array"] else 0),
                "LSB_DJOB_HOSTFILE": str(nodefile), "LSB_MCPU_HOSTS": " ".join(f"{h} {n}" for h, n in hosts),
                "LSB_HOSTS": " ".join(slots), "LSB_JOBNAME": job["name"] + (f"[{index}]" if job["array"] else "")}
        subst = {"%J": str(job["id"]), "%I": str(index if job["array"] else 0)}
    else:
        env |= {"PBS_JOBID": eid, "PBS_NODEFILE": str(nodefile), "PBS_O_WORKDIR": job["workdir"],
                "PBS_JOBNAME": job["name"], "PBS_QUEUE": job["queue"], "PBS_ENVIRONMENT": "PBS_BATCH"}
        if job["array"]:
            env |= {"PBS_ARRAY_INDEX": str(index), "PBS_ARRAY_ID": f"{job['id']}[].{SERVER}"}
        subst = {"^array_index^": str(index)}

    def output(path: str | None, default: str) -> str:
        path = path or str(job_dir / default)
        for key, value in subst.items():
            path = path.replace(key, value)
        return path

    start = time.time()
    write_json(record, {"state": "running", "start": start, "hosts": hosts, "pgid": os.getpgid(0)})
    with open(output(job["out"], f"out-{index}"), "ab") as out, open(output(job["err"], f"err-{index}"), "ab") as err:
        proc = subprocess.Popen(["/bin/bash", str(job_dir / "script")], cwd=job["cwd"], env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        code, reason = None, None
        while code is None:
            try:
                code = proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                if stop["signal"] is not None and reason is None:
                    reason = "killed"
                elif job["limit"] and time.time() - start > job["limit"] and reason is None:
                    reason = "runlimit"
                    os.killpg(0, signal.SIGTERM)  # the job's whole group; this runner notes why
    if reason == "runlimit":
        code = 140 if job["kind"] == "lsf" else -29
    elif reason == "killed" or stop["signal"] is not None:
        code = 130 if job["kind"] == "lsf" else 256 + signal.SIGTERM
    elif code < 0:
        code = 128 - code if job["kind"] == "lsf" else 256 - code
    write_json(record, {"state": "done" if code == 0 else "exit", "exit": code, "start": start,
                        "end": time.time(), "hosts": hosts})
    return 0


# ----------------------------------------------------------------------------------------- queries

def jobs_matching(state: Path, ids: list[str]) -> list[tuple[dict, Path, list[int], str]]:
    """(job, its dir, the element indices asked for, the id as asked) for each id; a missing job has job {}."""
    out = []
    for raw in ids:
        m = re.fullmatch(r"(\d+)(?:\[(\d*)\])?(?:\.[\w.-]+)?", raw)
        job_dir = state / "jobs" / (m.group(1) if m else "none")
        job = read_json(job_dir / "job.json") if m else None
        if not job:
            out.append(({}, job_dir, [], raw))
            continue
        wanted = job["indices"] if not m.group(2) else [int(m.group(2))]
        out.append((job, job_dir, [i for i in wanted if i in job["indices"]], raw))
    return out


def element_state(job_dir: Path, index: int) -> dict:
    rec = read_json(job_dir / f"el-{index}.json") or {"state": "pending"}
    if rec["state"] in ("pending", "running") and rec.get("pgid"):
        try:
            os.killpg(rec["pgid"], 0)
        except ProcessLookupError:  # the runner is gone without a word: killed hard
            rec = {"state": "exit", "exit": 137, "start": rec.get("start"), "end": time.time(),
                   "hosts": rec.get("hosts", [])}
    return rec


def bjobs(argv: list[str]) -> int:
    state = state_dir()
    opts = parse_options(argv, {"-o"})
    if "-json" not in opts:
        print("this stand-in answers only bjobs -o ... -json", file=sys.stderr)
        return 255
    fields = (opts.get("-o", ["jobid stat"])[-1]).split()
    ids = [a for a in argv if re.fullmatch(r"\d+(\[\d+\])?", a)]
    records = []
    for job, job_dir, indices, raw in jobs_matching(state, ids):
        if not job:
            records.append({"JOBID": raw, "ERROR": f"Job <{raw}> is not found"})
            continue
        for index in indices:
            rec = element_state(job_dir, index)
            stat = {"pending": "PEND", "running": "RUN", "done": "DONE", "exit": "EXIT", "killed": "EXIT"}[rec["state"]]
            started = rec.get("start")
            values = {"jobid": element_id(job, index), "stat": stat,
                      "exit_code": str(rec["exit"]) if rec.get("exit") not in (None, 0) else "",
                      "run_time": f"{int((rec.get('end') or time.time()) - started) if started else 0} second(s)",
                      "exec_host": ":".join(h for h, n in rec.get("hosts", []) for _ in range(n)) if started else "",
                      "jobindex": str(index if job["array"] else 0), "job_name": job["name"]}
            records.append({f.upper(): values.get(f, "") for f in fields})
    print(json.dumps({"COMMAND": "bjobs", "JOBS": len(records), "RECORDS": records}, indent=2))
    return 0


def qstat(argv: list[str]) -> int:
    state = state_dir()
    opts = parse_options(argv, {"-F"})
    if opts.get("-F", [""])[-1] != "json" or "-f" not in opts:
        print("this stand-in answers only qstat -f -F json", file=sys.stderr)
        return 2
    history, subjobs = "-x" in opts, "-t" in opts
    ids = [a for a in argv if not a.startswith("-") and a != "json"]
    jobs: dict[str, dict] = {}
    missing = []
    for job, job_dir, indices, raw in jobs_matching(state, ids):
        if not job:
            missing.append(raw)
            continue
        states = {i: element_state(job_dir, i) for i in indices}
        entries = {}
        for index, rec in states.items():
            letter = {"pending": "Q", "running": "R"}.get(rec["state"], "X" if job["array"] else "F")
            entry = {"Job_Name": job["name"], "job_state": letter, "queue": job["queue"]}
            if rec.get("start"):
                entry["exec_host"] = "+".join(f"{h}/0*{n}" for h, n in rec.get("hosts", []))
                used = int((rec.get("end") or time.time()) - rec["start"])
                entry["resources_used"] = {"walltime": f"{used // 3600:02d}:{used // 60 % 60:02d}:{used % 60:02d}",
                                           "ncpus": sum(n for _, n in rec.get("hosts", []))}
            if "exit" in rec:
                entry["Exit_status"] = rec["exit"]
            if job["array"]:
                entry["array_index"] = index
            entries[element_id(job, index)] = entry
        if job["array"] and "[]" in raw or (job["array"] and "[" not in raw):
            active = any(e["job_state"] in "QR" for e in entries.values())
            parent = {"Job_Name": job["name"], "job_state": "B" if active else "F", "array": "True",
                      "array_indices_submitted": f"{job['indices'][0]}-{job['indices'][-1]}"}
            if history or active:
                jobs[f"{job['id']}[].{SERVER}"] = parent
            if subjobs:
                jobs |= {k: v for k, v in entries.items() if history or v["job_state"] in "QR"}
        else:
            shown = {k: v for k, v in entries.items() if history or v["job_state"] in "QR"}
            if not shown:
                missing.append(raw)
            jobs |= shown
    for raw in missing:
        print(f"qstat: Unknown Job Id {raw}", file=sys.stderr)
    print(json.dumps({"timestamp": int(time.time()), "pbs_version": "19.1.3 (clusterbench stand-in)",
                      "pbs_server": SERVER, "Jobs": jobs}, indent=4))
    return 153 if missing and not jobs else 0


# ----------------------------------------------------------------------------------------- cancelling

def kill(argv: list[str], kind: str) -> int:
    state = state_dir()
    ids = [a for a in argv if not a.startswith("-")]
    status = 0
    for job, job_dir, indices, raw in jobs_matching(state, ids):
        if not job:
            print(f"Job <{raw}>: No matching job found" if kind == "lsf" else f"qdel: Unknown Job Id {raw}",
                  file=sys.stderr)
            status = 1
            continue
        for index in indices:
            rec = element_state(job_dir, index)
            if rec["state"] not in ("pending", "running"):
                if kind == "lsf":
                    print(f"Job <{element_id(job, index)}>: Job has already finished", file=sys.stderr)
                continue
            kill_group(rec.get("pgid"))
            if element_state(job_dir, index)["state"] in ("pending", "running"):
                write_json(job_dir / f"el-{index}.json", {"state": "killed", "exit": 130 if kind == "lsf" else 271,
                                                          "start": rec.get("start"), "end": time.time(),
                                                          "hosts": rec.get("hosts", [])})
            if kind == "lsf":
                print(f"Job <{element_id(job, index)}> is being terminated")
    return status


def kill_group(pgid: int | None, grace: float = 5.0) -> None:
    """SIGINT and SIGTERM to the element's process group (bkill's and qdel's order), SIGKILL after `grace`."""
    if not pgid:
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
    deadline = time.time() + grace
    while time.time() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_everything(state: Path) -> int:
    """For the tests' clean-up: kill every element of every job still alive; the count killed."""
    killed = 0
    for record in (state / "jobs").glob("*/el-*.json"):
        rec = read_json(record) or {}
        if rec.get("state") in ("pending", "running") and rec.get("pgid"):
            try:
                os.killpg(rec["pgid"], 0)
            except ProcessLookupError:
                continue
            kill_group(rec["pgid"], grace=2.0)
            killed += 1
    return killed


COMMANDS = {"bsub": bsub, "bjobs": bjobs, "bkill": lambda a: kill(a, "lsf"), "qsub": qsub, "qstat": qstat,
            "qdel": lambda a: kill(a, "pbs")}


def main(name: str, argv: list[str]) -> int:
    if name == "run":
        return run_element(Path(argv[0]), int(argv[1]))
    return COMMANDS[name](argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
