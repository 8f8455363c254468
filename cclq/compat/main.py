"""CCL-Bench's calling convention: ``python -m cclq.main --trace DIR --metric NAME``.

It ingests DIR (a workload folder or one trace file) if needed, runs the metric
for that trace, and prints one number as the last line of stdout, which is what
CCL-Bench's website scripts read. A trace the metric does not apply to prints
``nan`` (the reason goes to stderr), the value CCL-Bench already treats as missing.
Per-rank and per-step metrics are reduced to one number by the rule each metric
declares in its header (``summary:``; ``cclq metrics`` shows it in words): the mean
over its rows, their sum, max or min, the single value of a trace-grain metric, or
``ratio A / B``, ΣA / ΣB over the rows. CCL-Bench's tools mostly average per-rank
values, but pool the kernels of every rank file for some metrics; where cclq's
rule differs from CCL-Bench's reduction, the metric's header says so (version 2 of
mean_sm_coverage, memory_bound_fraction and average_memory_bandwidth pools as
CCL-Bench does; version 1 averaged ranks).

A workload whose ingest failed in this call (a file that changed and no longer parses)
prints ``nan`` and exits 1, with the reason on stderr: the warehouse may still hold the
file's previous version, and its number is not passed off as current. On a read-only
warehouse the call needs no write when nothing changed: it checks that every file is as
ingested and only reads.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: its import alone is ~15 ms of the client's start (mypy reads it)
if TYPE_CHECKING:
    import argparse

    from cclq.ingest.report import FileOutcome, IngestReport
    from cclq.query.registry import MetricSpec

# Standard library only at import: the client half of a warm call (cclq/compat/daemon.py) is
# this module, and it must start in milliseconds. The work's imports are in run_here.


def arg_parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m cclq.main", description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True, help="workload folder or trace file")
    parser.add_argument("--metric", required=True, help="metric name (cclq metrics lists them)")
    parser.add_argument("--model_params", type=float, help="model parameter count (overrides the card)")
    parser.add_argument("--n_chips", type=int, help="number of chips (overrides the card)")
    parser.add_argument("--warehouse", help="warehouse folder [default: $CCLQ_WAREHOUSE or ./.cclq/warehouse]")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the call in the warehouse's warm daemon (cclq/compat/daemon.py), else right here."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from cclq.compat import daemon

    if daemon.enabled():
        plain, option = warehouse_option(argv)
        if plain:
            from cclq.errors import UsageError

            try:
                root = daemon.warehouse_root(option)
            except UsageError:  # an s3:// warehouse: no daemon (it serves a folder); read here
                root = None
            rc = daemon.call(argv, root) if root is not None else None
            if rc is not None:
                return rc
    return run_here(argv)


_OPTIONS = ("--trace", "--metric", "--model_params", "--n_chips", "--warehouse")


def warehouse_option(argv: list[str]) -> tuple[bool, str | None]:
    """(True, the call's --warehouse or None when not given), read without argparse (whose
    import is ~20 ms of a warm call); (False, None) for anything but the five options
    spelled out (`--name value` or `--name=value`, each once): an abbreviation, --help, a
    stray word. Those the call runs here, where argparse reads (and reports) them."""
    seen: dict[str, str] = {}
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if name not in _OPTIONS or name in seen:
            return False, None
        if not eq:
            i += 1
            if i >= len(argv) or argv[i].startswith("-"):
                return False, None  # a missing value (or one argparse may read otherwise)
            value = argv[i]
        seen[name] = value
        i += 1
    if "--trace" not in seen or "--metric" not in seen:
        return False, None
    return True, seen.get("--warehouse")


def run_here(argv: list[str], fresh: dict[str, str] | None = None) -> int:
    """The call itself: ingest the folder if needed, run the metric, print one number.
    ``fresh``: the daemon found the folder up to date a moment ago (``is_up_to_date``'s
    ``traces``), with no ingest of its own possible since: no second look."""
    from cclq.errors import CclqError
    from cclq.ingest.plan import plan_inputs, rename_workload
    from cclq.ingest.run import ingest, is_up_to_date
    from cclq.query.cache import cached_result
    from cclq.query.metrics import run_metric, summarize
    from cclq.query.registry import resolve
    from cclq.query.session import QuerySettings, connect
    from cclq.store.durable import ReadOnlyWarehouse
    from cclq.store.remote import open_warehouse

    args = arg_parser().parse_args(argv)
    con = None
    try:
        spec = resolve(args.metric)
        wh = open_warehouse(args.warehouse)
        workloads = plan_inputs([args.trace], wh.root)
        if len(workloads) != 1:
            print(
                f"cclq: error: {args.trace} holds {len(workloads)} workloads; give one workload folder "
                "or file (or use `cclq metric NAME --all`)",
                file=sys.stderr,
            )
            return 2
        (workload,) = workloads
        # The folder's own trace: another folder of the same name ingested before keeps
        # its id, and this one gets a distinct one (never the other folder's numbers).
        traces: dict[str, str] = {}
        report: IngestReport | None = None
        failed: list[FileOutcome] = []
        try:
            # nothing changed (a folder asked for before, or ingested with its siblings by the
            # daemon): no lock, no write, no clean-up, only a look at the files
            if fresh is not None:
                traces = dict(fresh)
            elif is_up_to_date([args.trace], wh, distinct_ids=True, traces=traces):
                pass
            else:
                traces = {}
                report = ingest([args.trace], wh, jobs=None, distinct_ids=True)
                failed, traces = report.failed, report.traces
        except ReadOnlyWarehouse:
            if not is_up_to_date([args.trace], wh, distinct_ids=True, traces=traces):
                raise
            failed = []  # nothing to write: read what is there
        for outcome in failed:
            print(f"cclq: error: {outcome.message}", file=sys.stderr)
        trace = traces.get(str(workload.root))
        if trace is None:  # the workload failed as a whole: nothing of it to answer for
            return 1
        if trace != workload.trace:
            rename_workload(workload, trace)
        # a folder of several runs (Nsight exports recorded far apart, each a trace of its
        # own) answers for the run CCL-Bench's tools read, and says which
        answer = workload.answer_trace()
        note = workload.runs_note()
        if note is not None:
            print(f"cclq: note: {note}", file=sys.stderr)
        stale = report.stale({row["path"] for row in wh.read_state().files.values()}) if report and failed else []
        if stale:
            print(
                f"cclq: {spec.label} of {answer} is not computed: {len(stale)} of its files failed to "
                "ingest (above) and the warehouse holds an older version of them",
                file=sys.stderr,
            )
            print("nan")
            return 1
        params = metric_params(spec, args)
        from cclq.query.partial import partial_traces

        # said by a call that ingests (as `cclq ingest` says it), not by every later call
        for trace, what in (partial_traces(wh, [answer]) if report is not None else {}).items():
            print(
                f"cclq: warning: trace {trace!r} is partial ({what}): the value covers those ranks only",
                file=sys.stderr,
            )
        # a stored result is read without DuckDB (the daemon's calls mostly are such)
        table = cached_result(wh, spec, params, [answer])
        if table is None:
            con = connect(wh, traces=[answer], settings=QuerySettings.from_env(), cache=True)
            table = run_metric(con, spec, params)
        if table.num_rows == 0:  # every metric gives a row per trace: none means no such trace
            print(
                f"cclq: error: {spec.label}: the warehouse holds no trace {answer!r} for {args.trace}", file=sys.stderr
            )
            print("nan")
            return 1
        value, reason = summarize(spec, table)
    except CclqError as e:
        print(f"cclq: error: {e.message}", file=sys.stderr)
        return int(e.exit_code)
    finally:
        if con is not None:
            con.close()  # a daemon serves many calls: release the snapshot now
    if value is None:
        print(f"cclq: {spec.label} does not apply to {answer}: {reason}", file=sys.stderr)
        print("nan")
        return 0
    # the unit CCL-Bench's own tool prints (percent where it prints percent: the header's
    # ccl_bench_unit), so that its website shows the same number through the shim
    print(repr(spec.ccl_bench_value(value)))
    return 0


def metric_params(spec: MetricSpec, args: argparse.Namespace) -> dict[str, str]:
    """The metric's parameters the call sets (the overrides the metric declares)."""
    return {
        k: str(v)
        for k, v in (("model_params", args.model_params), ("n_chips", args.n_chips))
        if v is not None and k in {p.name for p in spec.params}
    }


if __name__ == "__main__":
    sys.exit(main())
