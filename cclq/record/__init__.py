"""``cclq record``: the front half of the benchmark loop (generate -> ingest -> metric -> board).

Runs distributed primitives from a DDLB-style config under the PyTorch profiler and
leaves one workload folder per configuration: a Kineto trace per rank, DDLB's results
CSV and a filled workload card, ready for ``cclq ingest``. Modules: ``config``
(reading and cartesian expansion, no torch), ``results`` (the DDLB CSV), ``card``,
``primitives`` and ``worker`` (torch; the rank processes), ``runner`` (launching and
collecting), ``progress`` (what the command shows). PyTorch is the optional extra
``record``; nothing here imports it until a configuration runs.
"""

# Files a rank process leaves in its configuration's scratch folder.
TRACE_NAME = "kineto_trace_{rank}.json"
RESULT_FILE = "result.json"
CHECK_FILE = "check-{rank}.json"
READY_FILE = "ready-{rank}"  # the rank has torn the configuration down and waits for the next
ERROR_FILE = "error-{rank}.json"
