"""`gateway bench`: what the gateway costs, measured against a built-in zero-latency upstream.

Usage. `gateway bench` starts a fake upstream speaking every wire the gateway speaks and the
gateway in front of it (audit trail on), then runs a closed-loop load generator against the
upstream directly and through the gateway, alternating the two in each of `--reps`
repetitions, and prints per cell (non-stream / 20-chunk stream in one burst / paced one chunk
per write; same-format and cross-format; concurrency 1, 32, 64) the medians of requests/s,
p50/p99 latency, what the gateway adds to them, time to first byte, CPU per request and per
chunk, and peak RSS; then the RSS per idle open stream and the performance targets as a
checklist. `--compare URL` measures another gateway in the same rounds, `--growth` measures
how CPU per request grows with stream length, request size and open streams, `--json FILE`
writes everything (`-`: to stdout, nothing else printed), `--plot FILE.png` draws the latency
distributions (`pip install 'llm-gateway[bench]'`), `--quick` is a smoke run of seconds.

Every helper runs in its own process so that the gateway's CPU, read from /proc (utime + stime
of its process tree over each measured window), is its own; each is built to cost as little
as possible, since on a small machine they all compete for the same cores.

    scenario.py       what the fake upstream answers, chosen by the model name
    answers*.py       the answers of each wire, rendered once per scenario
    eventstream.py    AWS's binary event stream (Bedrock), encoded
    bodies.py         the requests the load generator sends
    wires.py          one row per wire: paths, bodies, answers, terminators
    upstream.py       the fake upstream (python -m gateway_bench.upstream)
    client.py         its HTTP/1.1 client: raw protocol, httptools
    load.py           the load generator (python -m gateway_bench.load)
    procstat.py       CPU and RSS of process trees; the process behind a port
    targets.py        where load goes, loopback only
    gateway_config.py the configuration of the gateway the bench starts
    gateway_log.py    its log, read for warnings and emptied between runs
    children.py       starting and stopping those processes
    plan.py           the matrix: modes, formats, concurrencies, durations
    run.py            the runs, alternated; the idle-stream probe
    growth.py         --growth
    stats.py          percentiles, medians, per-repetition ratios, CPU per chunk
    summary.py        per-cell summaries of the raw runs
    goals.py          the targets, as a checklist
    report.py         tables and JSON
    plot.py           --plot
    progress.py       the progress bar
    session.py        one session: processes, targets, measurements, the document
    command.py        the command line
"""
