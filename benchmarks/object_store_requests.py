"""Benchmark: the object-store requests of one ``dr-scale evaluate --fit-reward-model`` on a 20-part S3 log.

A moto S3 server on 127.0.0.1 (as ``tests/s3_server.py``) holds a generated log of ``--rows`` rows in
``--parts`` part files (``dr-scale generate bandit``). The command

    dr-scale evaluate s3://BUCKET/log --policy uniform --fit-reward-model --storage-options FILE --no-progress

runs once per source tree, each in its own process with that tree first on ``PYTHONPATH`` — ``--before`` (e.g.
the main checkout) and ``--after`` (default: this checkout) — on the same log. In each process s3fs's
requests are counted where they leave for the server (``S3FileSystem._call_s3``: one call per HTTP request,
by its S3 operation), and every opening of a part file is classed by who opened it: **data** when the
contract's ``read_table`` reads the part's rows (pyarrow reads the footer there too), **footer** otherwise
(a schema, the metadata, the footers' statistics); each ranged GET of a part (``S3File._fetch_range``) is
counted under the purpose of the opening it serves. Prints both counts per kind of request, the footer
reads per part, the data reads per part and the GETs of each purpose.

    python benchmarks/object_store_requests.py --before OTHER_CHECKOUT [--after .] [--rows 20000] [--parts 20]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
CREDENTIALS = {"key": "testing", "secret": "testing"}


# -- in the measured process ------------------------------------------------------------------------
def child(out: str, argv: list[str]) -> int:
    """Run ``dr-scale ARGV`` with s3fs's requests and openings counted; write them to ``out`` as JSON."""
    import s3fs.core

    requests, opens, fetches = [], [], []
    call_s3 = s3fs.core.S3FileSystem._call_s3

    async def counted_call(self, method, *args, **kwargs):
        name = getattr(method, "__name__", method)
        requests.append((str(name), kwargs.get("Key") or kwargs.get("Prefix") or ""))
        return await call_s3(self, method, *args, **kwargs)

    fetch_range = s3fs.core.S3File._fetch_range

    def counted_fetch(self, start, end):
        fetches.append((self.path, getattr(self, "opened_for", "?")))  # one GET of bytes [start, end)
        return fetch_range(self, start, end)

    fs_open = s3fs.core.S3FileSystem.open

    def counted_open(self, path, mode="rb", *args, **kwargs):
        frame, purpose, opener = sys._getframe(1), "footer", None
        while frame is not None:
            code = frame.f_code
            if "dr_scale" in code.co_filename:
                opener = opener or code.co_name
                if code.co_name == "read_table" and frame.f_globals.get("__name__", "").startswith("dr_scale.logs."):
                    purpose = "data"
            frame = frame.f_back
        opens.append((str(path), purpose if "r" in mode else "write", opener))
        f = fs_open(self, path, mode, *args, **kwargs)
        f.opened_for = purpose
        return f

    s3fs.core.S3FileSystem._call_s3 = counted_call
    s3fs.core.S3FileSystem.open = counted_open
    s3fs.core.S3File._fetch_range = counted_fetch
    import dr_scale
    from dr_scale.cli import main

    status = main(argv)
    with open(out, "w") as f:
        json.dump({"dr_scale": dr_scale.__file__, "requests": requests, "opens": opens, "fetches": fetches,
                   "status": status}, f)
    return 0


# -- the driver -------------------------------------------------------------------------------------
def run(tree: Path, argv: list[str], env: dict) -> dict:
    """``dr-scale ARGV`` in a process with ``tree`` first on the path; its counts."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    subprocess.run([sys.executable, str(HERE), "--child", out, "--", *argv], check=True,
                   env={**env, "PYTHONPATH": str(tree)}, stdout=subprocess.DEVNULL)
    with open(out) as f:
        counts = json.load(f)
    os.unlink(out)
    return counts


def summary(counts: dict, parts: list[str]) -> dict:
    """Requests by S3 operation, and the openings of each part by purpose."""
    part_keys = {p.split("/", 1)[1] for p in parts}
    kinds = collections.Counter()
    for op, key in counts["requests"]:
        kinds[f"{op}{' (part files)' if key in part_keys else ' (other)' if op == 'get_object' else ''}"] += 1
    opens = {purpose: collections.Counter(path for path, p, _ in counts["opens"] if p == purpose)
             for purpose in ("footer", "data")}
    openers = collections.Counter(opener for path, p, opener in counts["opens"] if p == "footer" and path in parts)
    gets = collections.Counter(p for path, p in counts["fetches"] if path in parts)
    return {"kinds": kinds, "total": sum(kinds.values()), "opens": opens, "openers": openers, "gets": gets}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the source tree measured first (a checkout)")
    parser.add_argument("--after", type=Path, default=HERE.parents[1], help="the source tree measured second")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--parts", type=int, default=20)
    args = parser.parse_args()

    import logging

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request otherwise
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ["AWS_DEFAULT_REGION"] = "us-east-1"  # else bucket creation fails: InvalidLocationConstraint
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        options = {**CREDENTIALS, "client_kwargs": {"endpoint_url": f"http://{host}:{port}"}}
        s3fs.S3FileSystem(**options).mkdir("requests")
        with tempfile.TemporaryDirectory() as tmp:
            opts = Path(tmp) / "storage-options.json"
            opts.write_text(json.dumps(options))
            logs = "s3://requests/log"
            generate = ["generate", "bandit", "--rows", str(args.rows), "--features", "1000", "--actions", "4",
                        "--rows-per-part", str(args.rows // args.parts), "--out", logs,
                        "--storage-options", str(opts), "--no-progress"]
            run(args.after, generate, env)
            parts = sorted(p for p in s3fs.S3FileSystem(**options).find("requests/log") if p.endswith(".parquet")
                           and not p.rsplit("/", 1)[1].startswith(("_", ".")))
            command = ["evaluate", logs, "--policy", "uniform", "--fit-reward-model", "--storage-options", str(opts),
                       "--no-progress"]
            measured = {label: summary(run(tree, command, env), parts)
                        for label, tree in (("before", args.before), ("after", args.after))}
    finally:
        server.stop()

    print(f"one `dr-scale {' '.join(command[:1] + ['s3://…/log'] + command[2:-3])}` on a {len(parts)}-part, "
          f"{args.rows:,}-row log (moto S3 on 127.0.0.1)")
    print(f"  before: {args.before}\n  after:  {args.after}\n")
    kinds = sorted(set(measured["before"]["kinds"]) | set(measured["after"]["kinds"]))
    width = max(len(k) for k in kinds + ["requests"])
    print(f"{'requests':<{width}}  {'before':>7}  {'after':>7}")
    for kind in kinds:
        print(f"{kind:<{width}}  {measured['before']['kinds'][kind]:>7}  {measured['after']['kinds'][kind]:>7}")
    print(f"{'total':<{width}}  {measured['before']['total']:>7}  {measured['after']['total']:>7}\n")
    for label, m in measured.items():
        footer = [m["opens"]["footer"][p] for p in parts]
        data = [m["opens"]["data"][p] for p in parts]
        print(f"{label}: footer reads per part (part 0 … {len(parts) - 1}): {footer} — total {sum(footer)}, "
              f"at most {max(footer)} per part; by {dict(m['openers'])}")
        print(f"{label}: data reads per part: {data} — total {sum(data)}")
        print(f"{label}: GET requests of part files by purpose: footer {m['gets']['footer']}, data {m['gets']['data']}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2], sys.argv[4:]))
    sys.exit(main())
