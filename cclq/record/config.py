"""What ``cclq record`` runs: DDLB's ``config.json``, extended, expanded to one run per
configuration (the cartesian product of every list in it).

Pure Python (no torch), so that a config can be checked, and its runs listed, on a
machine without PyTorch. The schema is DDLB's ``benchmark`` object (``primitive``,
``m``/``n``/``k``, ``dtype``, ``validate``, ``num_iterations``, ``num_warmups``,
``time_measurement_backend``, ``barrier_at_each_iteration``, ``output_csv``,
``implementations``), read as DDLB reads it: a list-valued size expands to the
cartesian product of shapes, and each implementation's list of option dicts expands
dict by dict, every list-valued option to the product of its values (DDLB's
``impl_id`` is ``<implementation>_<i>`` over that expansion). cclq adds primitives
(``tp_rowwise``'s all-reduce variant, the four plain collectives over a
``message_bytes`` sweep, a data-parallel MLP step ``dp_mlp``), a ``dtype`` list,
``layers``, ``seed`` and ``card`` (fields merged into every workload card).

An implementation or option cclq does not have (DDLB's ``fuser``, ``jax``, a UCC
transport ...) is not an error of the config: its runs are listed with the
``problem`` that stops them, reported as failed, and the rest go on, as DDLB's
README asks users to edit such entries out by hand today.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cclq.errors import UsageError

# Primitive -> the size keys it takes, in the order they name a run.
GEMM_PRIMITIVES = ("tp_columnwise", "tp_rowwise")
COLLECTIVE_PRIMITIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
MODEL_PRIMITIVES = ("dp_mlp",)
PRIMITIVES = GEMM_PRIMITIVES + COLLECTIVE_PRIMITIVES + MODEL_PRIMITIVES
SIZE_KEYS: dict[str, tuple[str, ...]] = {
    **{p: ("m", "n", "k") for p in GEMM_PRIMITIVES},
    **{p: ("message_bytes",) for p in COLLECTIVE_PRIMITIVES},
    "dp_mlp": ("m", "n", "k", "layers"),
}
DEFAULT_SIZES: dict[str, dict[str, int]] = {"dp_mlp": {"layers": 2}}

# Element sizes of the dtypes DDLB accepts (its dtype_map), in bytes.
DTYPE_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4}
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")

TIME_BACKENDS = ("cpu_clock", "cuda_event")
BACKENDS = ("gloo", "nccl", "ucc", "mpi")
DEVICES = ("cpu", "cuda")

# Each implementation's options and their defaults, per primitive. ``None`` means
# "decided by the machine" (``resolve_auto``): nccl and cuda where CUDA is present,
# else gloo and cpu. DDLB's option names where DDLB has the option.
IMPLEMENTATION_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "pytorch": {
        "tp_columnwise": {"backend": None, "order": "AG_before", "device": None},
        "tp_rowwise": {"backend": None, "collective": "reduce_scatter", "device": None},
        **{p: {"backend": None, "device": None} for p in COLLECTIVE_PRIMITIVES},
        # bucket_mb: the fusion threshold (MB = 2**20 bytes, as DDP's bucket_cap_mb);
        # overlap: all-reduce each bucket as soon as backward has produced it (wait-free
        # backpropagation) instead of after the whole backward pass.
        "dp_mlp": {"backend": None, "bucket_mb": 25.0, "overlap": True, "device": None},
    },
    "compute_only": {
        **{p: {"size": "sharded", "device": None} for p in GEMM_PRIMITIVES},
        **{p: {"device": None} for p in COLLECTIVE_PRIMITIVES + MODEL_PRIMITIVES},
    },
}
ALLOWED_VALUES: dict[str, tuple[Any, ...]] = {
    "order": ("AG_before", "AG_after"),
    "collective": ("reduce_scatter", "all_reduce"),
    "size": ("sharded", "unsharded"),
    "device": DEVICES,
    "overlap": (True, False),
}
# DDLB leaves `size` out of the implementation label and the option column.
OPTIONS_NOT_LABELLED = ("size",)

DEFAULTS: dict[str, Any] = {
    "dtype": "float32",
    "validate": True,
    # CCL-Bench's trace_gen asks for at least 5 warm-up and 5 profiled iterations.
    "num_iterations": 10,
    "num_warmups": 5,
    "time_measurement_backend": "cpu_clock",
    "barrier_at_each_iteration": True,  # DDLB's default
    "seed": 42,  # DDLB's default seed
}
KNOWN_KEYS = frozenset(
    {"primitive", "implementations", "output_csv", "card", "message_bytes", "m", "n", "k", "layers"} | set(DEFAULTS)
)


class ConfigError(UsageError):
    """The config cannot be read or does not say what to run (exit 2, nothing runs)."""


@dataclass(frozen=True)
class Run:
    """One configuration: what one workload folder records."""

    primitive: str
    implementation: str
    impl_index: int  # DDLB's impl_id = f"{implementation}_{impl_index}"
    options: dict[str, Any]  # every option of the implementation, defaults filled in
    sizes: dict[str, int]
    dtype: str
    validate: bool
    num_iterations: int
    num_warmups: int
    time_measurement_backend: str
    barrier_at_each_iteration: bool
    seed: int
    card: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # why this run cannot run here; None when it can

    @property
    def impl_id(self) -> str:
        return f"{self.implementation}_{self.impl_index}"

    @property
    def labelled_options(self) -> dict[str, Any]:
        return {k: v for k, v in self.options.items() if k not in OPTIONS_NOT_LABELLED}

    @property
    def option_text(self) -> str:
        """DDLB's ``option`` column: ``backend=gloo, order=AG_before``."""
        return ", ".join(f"{k}={_text(v)}" for k, v in self.labelled_options.items())

    @property
    def label(self) -> str:
        """DDLB's ``implementation`` column: ``pytorch (backend=gloo, order=AG_before)``."""
        return f"{self.implementation} ({self.option_text})" if self.labelled_options else self.implementation

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def backend(self) -> str | None:
        """The communication backend the timed loop uses (None: compute only)."""
        return self.options.get("backend") if self.implementation == "pytorch" else None

    @property
    def device(self) -> str:
        return str(self.options.get("device") or "cpu")

    def to_json(self) -> dict[str, Any]:
        return {
            "primitive": self.primitive,
            "implementation": self.implementation,
            "impl_index": self.impl_index,
            "options": self.options,
            "sizes": self.sizes,
            "dtype": self.dtype,
            "validate": self.validate,
            "num_iterations": self.num_iterations,
            "num_warmups": self.num_warmups,
            "time_measurement_backend": self.time_measurement_backend,
            "barrier_at_each_iteration": self.barrier_at_each_iteration,
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Run:
        return cls(
            **{
                k: d[k]
                for k in (
                    "primitive",
                    "implementation",
                    "impl_index",
                    "options",
                    "sizes",
                    "dtype",
                    "validate",
                    "num_iterations",
                    "num_warmups",
                    "time_measurement_backend",
                    "barrier_at_each_iteration",
                    "seed",
                )
            }
        )


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def workload_name(run: Run, world_size: int) -> str:
    """The workload folder (and trace id): primitive, implementation, option values,
    sizes, dtype and world size, e.g. ``tp_columnwise-pytorch-gloo-AG_before-cpu-m64-n32-k16-float32-np2``."""
    parts = [run.primitive, run.implementation]
    parts += [f"{k}{_text(v)}" if k in ("bucket_mb", "overlap") else _text(v) for k, v in run.options.items()]
    parts += [f"{'bytes' if k == 'message_bytes' else k}{v}" for k, v in run.sizes.items()]
    parts += [run.dtype, f"np{world_size}"]
    return _NAME_UNSAFE.sub("_", "-".join(parts))


# ----------------------------------------------------------------------- reading
def load_config(path: Path) -> dict[str, Any]:
    """The ``benchmark`` object of a JSON (or YAML) config; a bare object is taken as it."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from e
    try:
        doc = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {str(e).splitlines()[0]}") from e
    if isinstance(doc, dict) and "benchmark" in doc:
        doc = doc["benchmark"]
    if not isinstance(doc, dict):
        raise ConfigError(f'{path}: expected an object with a "benchmark" object (DDLB\'s config.json)')
    return doc


class _Checker:
    """Reads typed values out of the benchmark object; errors name the file and key."""

    def __init__(self, path: Path, doc: dict[str, Any]) -> None:
        self.path = path
        self.doc = doc

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(f"{self.path}: benchmark.{key}: {problem}")

    def value(self, key: str) -> Any:
        return self.doc.get(key, DEFAULTS.get(key))

    def boolean(self, key: str) -> bool:
        v = self.value(key)
        if not isinstance(v, bool):
            raise self.fail(key, f"expected true or false, got {json.dumps(v)}")
        return v

    def count(self, key: str, minimum: int) -> int:
        v = self.value(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.fail(key, f"expected an integer >= {minimum}, got {json.dumps(v)}")
        return v

    def choice(self, key: str, allowed: tuple[str, ...]) -> str:
        v = self.value(key)
        if v not in allowed:
            raise self.fail(key, f"expected one of {', '.join(allowed)}, got {json.dumps(v)}")
        return v

    def int_list(self, key: str, default: int | None = None) -> list[int]:
        v = self.doc.get(key, default)
        if v is None:
            raise self.fail(key, "missing (an integer or a list of integers)")
        values = v if isinstance(v, list) else [v]
        if not values or any(isinstance(x, bool) or not isinstance(x, int) or x <= 0 for x in values):
            raise self.fail(key, f"expected a positive integer or a list of them, got {json.dumps(v)}")
        return values

    def dtypes(self) -> list[str]:
        v = self.value("dtype")
        values = v if isinstance(v, list) else [v]
        bad = [x for x in values if x not in DTYPE_BYTES]
        if not values or bad:
            raise self.fail("dtype", f"expected one of {', '.join(DTYPE_BYTES)} (or a list), got {json.dumps(v)}")
        return values


def _expand_options(option_dicts: Any, impl: str, checker: _Checker) -> list[dict[str, Any]]:
    """DDLB's generate_config_combinations for one implementation: each dict of the
    list expands to the product of its list-valued options."""
    if option_dicts is None:
        option_dicts = [{}]
    if isinstance(option_dicts, dict):
        option_dicts = [option_dicts]
    if not isinstance(option_dicts, list) or not all(isinstance(d, dict) for d in option_dicts):
        raise checker.fail(f"implementations.{impl}", 'expected a list of option objects, e.g. [{"backend": ["gloo"]}]')
    expanded: list[dict[str, Any]] = []
    for base in option_dicts:
        listed = {k: v for k, v in base.items() if isinstance(v, list)}
        for combo in itertools.product(*listed.values()) if listed else [()]:
            expanded.append({**base, **dict(zip(listed, combo))})
    return expanded


def resolve_auto(options: dict[str, Any], cuda: bool) -> dict[str, Any]:
    """Fills the machine-dependent defaults: nccl on cuda where CUDA is present, else
    gloo on cpu; a compute-only run goes where the data would be."""
    out = dict(options)
    if "backend" in out and out["backend"] is None:
        out["backend"] = "nccl" if cuda else "gloo"
    if "device" in out and out["device"] is None:
        backend = out.get("backend")
        out["device"] = "cuda" if (backend == "nccl" or (backend is None and cuda)) else "cpu"
    return out


def _option_problem(primitive: str, impl: str, given: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(the options with defaults filled, why they cannot run or None)."""
    per_primitive = IMPLEMENTATION_OPTIONS.get(impl)
    if per_primitive is None:
        known = ", ".join(IMPLEMENTATION_OPTIONS)
        return dict(given), f"implementation {impl!r} is not available in cclq record (it has {known})"
    defaults = per_primitive[primitive]
    unknown = [k for k in given if k not in defaults]
    if unknown:
        return dict(given), (
            f"{impl} has no option {', '.join(map(repr, unknown))} for {primitive} "
            f"(options: {', '.join(defaults) or 'none'})"
        )
    options = {**defaults, **given}
    for key, value in options.items():
        allowed = ALLOWED_VALUES.get(key)
        if value is not None and allowed is not None and value not in allowed:
            return options, f"{impl} option {key}={_text(value)} is not one of {', '.join(map(_text, allowed))}"
    backend = options.get("backend")
    if backend is not None and backend not in BACKENDS:
        return options, (
            f"backend {backend!r} is not supported by cclq record (torch.distributed backends: {', '.join(BACKENDS)})"
        )
    bucket = options.get("bucket_mb")
    if bucket is not None and (isinstance(bucket, bool) or not isinstance(bucket, (int, float)) or bucket < 0):
        return options, f"bucket_mb must be a number >= 0, got {json.dumps(bucket)}"
    return options, None


def _shape_problem(primitive: str, sizes: dict[str, int], dtype: str, world_size: int) -> str | None:
    """Why a shape cannot be split over the ranks (DDLB's divisibility checks), or the
    dtype cannot run the primitive."""
    if primitive in MODEL_PRIMITIVES and dtype not in FLOAT_DTYPES:
        return f"{primitive} trains in a floating-point dtype, not {dtype}"
    if primitive == "tp_columnwise" and sizes["m"] % world_size:
        return f"m={sizes['m']} is not divisible by the world size {world_size}"
    if primitive == "tp_rowwise":
        for key in ("m", "k"):
            if sizes[key] % world_size:
                return f"{key}={sizes[key]} is not divisible by the world size {world_size}"
    if primitive in COLLECTIVE_PRIMITIVES:
        unit = DTYPE_BYTES[dtype] * (1 if primitive == "all_reduce" else world_size)
        if sizes["message_bytes"] % unit:
            what = f"{DTYPE_BYTES[dtype]} bytes ({dtype})" + (
                "" if primitive == "all_reduce" else f" x {world_size} ranks"
            )
            return f"message_bytes={sizes['message_bytes']} is not a multiple of {what}"
    return None


def expand(config_path: Path, world_size: int, cuda: bool = False) -> list[Run]:
    """Every run the config asks for, in DDLB's order: shape by shape, then dtype,
    then implementation by implementation."""
    doc = load_config(config_path)
    check = _Checker(config_path, doc)
    unknown = sorted(set(doc) - KNOWN_KEYS)
    if unknown:
        raise check.fail(unknown[0], f"unknown key (known: {', '.join(sorted(KNOWN_KEYS))})")
    primitive = doc.get("primitive")
    if primitive not in PRIMITIVES:
        raise check.fail("primitive", f"expected one of {', '.join(PRIMITIVES)}, got {json.dumps(primitive)}")
    size_lists = {key: check.int_list(key, DEFAULT_SIZES.get(primitive, {}).get(key)) for key in SIZE_KEYS[primitive]}
    stray = [k for k in ("m", "n", "k", "message_bytes", "layers") if k in doc and k not in size_lists]
    if stray:
        raise check.fail(stray[0], f"{primitive} takes {', '.join(SIZE_KEYS[primitive])}, not {stray[0]}")
    card = doc.get("card") or {}
    if not isinstance(card, dict):
        raise check.fail("card", "expected an object of workload-card fields")
    common: dict[str, Any] = dict(
        validate=check.boolean("validate"),
        num_iterations=check.count("num_iterations", 1),
        num_warmups=check.count("num_warmups", 0),
        time_measurement_backend=check.choice("time_measurement_backend", TIME_BACKENDS),
        barrier_at_each_iteration=check.boolean("barrier_at_each_iteration"),
        seed=check.count("seed", 0),
        card=card,
    )
    implementations = doc.get("implementations")
    if not isinstance(implementations, dict) or not implementations:
        raise check.fail("implementations", 'expected an object such as {"pytorch": [{"backend": ["gloo"]}]}')
    impl_runs: list[tuple[str, int, dict[str, Any]]] = []
    for impl, option_dicts in implementations.items():
        for i, given in enumerate(_expand_options(option_dicts, impl, check)):
            impl_runs.append((impl, i, given))
    runs: list[Run] = []
    for shape in itertools.product(*size_lists.values()):
        sizes = dict(zip(size_lists, shape))
        for dtype in check.dtypes():
            for impl, i, given in impl_runs:
                options, problem = _option_problem(primitive, impl, given)
                options = resolve_auto(options, cuda)
                problem = problem or _shape_problem(primitive, sizes, dtype, world_size)
                runs.append(Run(primitive, impl, i, options, sizes, dtype, problem=problem, **common))
    return runs
