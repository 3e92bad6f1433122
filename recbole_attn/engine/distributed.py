"""
recbole_attn.engine.distributed
###############################

Multi-process training as RecBole 1.2 does it (``nproc``, ``world_size``, ``ip``, ``port``,
``offset``; one process per device, torch DDP, every process trains on its shard of the
users and evaluation metrics are averaged over the shards), for our models and RecBole's,
on GPUs (NCCL, RecBole's own path) and on CPUs (gloo; RecBole 1.2.1 hard-codes NCCL and
CUDA devices).

One machine, two processes::

    python run_recbole_attn.py --model=SASRecAP --dataset=ml-100k --nproc=2

Two machines with two processes each (the first machine's address and a free port)::

    machine A: python run_recbole_attn.py ... --nproc=2 --world_size=4 --ip=A --port=5678 --offset=0
    machine B: python run_recbole_attn.py ... --nproc=2 --world_size=4 --ip=A --port=5678 --offset=2

The dataset (same path), the package and the configuration must be the same on every
machine; process 0 (machine A) writes the checkpoints and the log.
"""

import contextlib

import torch
from torch.nn.parallel import DistributedDataParallel

from recbole_attn.options.declared import Integer
from recbole_attn.options.values import convert_value

#: config keys of a multi-process run (RecBole's names), taken out of the overrides by ``run``
DISTRIBUTED_KEYS = ("nproc", "world_size", "ip", "port", "offset")


#: what the multi-process keys must be
RULES = {
    "nproc": Integer(1),
    "world_size": Integer(1),
    "offset": Integer(0),
    "port": Integer(1, maximum=65535),
}


def _checked(options, keys):
    """``options``, command-line text read as the values it spells, with ``keys``
    checked against :data:`RULES` (:func:`~recbole_attn.options.check.check_options`: a
    one-line ``ConfigError`` naming the key)."""
    from recbole_attn.options.check import check_options

    options = {
        k: convert_value(v) if isinstance(v, str) else v for k, v in options.items()
    }
    check_options(options, {k: RULES[k] for k in keys})
    return options


def distributed_options(config_dict):
    """Split the multi-process keys out of ``config_dict``: ``(options, rest)``; options
    is empty for a single-process run. Their values are checked (a
    :class:`~recbole_attn.errors.ConfigError`): whole numbers, and this machine's
    processes ``offset .. offset + nproc - 1`` among the ``world_size`` ranks."""
    from recbole_attn.errors import ConfigError

    rest = dict(config_dict or {})
    options = _checked(
        {k: rest.pop(k) for k in DISTRIBUTED_KEYS if k in rest}, ["nproc"]
    )
    nproc = options.get("nproc", 1)
    if "world_size" not in options and nproc == 1:
        return {}, rest
    options = _checked(options, ["world_size", "offset", "port"])
    world_size, offset = options.get("world_size", nproc), options.get("offset", 0)
    if offset + nproc > world_size:
        raise ConfigError(
            f"{nproc} processes (nproc) from rank {offset} (offset) need ranks up to "
            f"{offset + nproc - 1}, but world_size {world_size} has ranks 0 to "
            f"{world_size - 1}; give --world_size={offset + nproc} or more, or fewer "
            "processes"
        )
    if world_size == 1:
        return {}, rest
    return {
        "nproc": nproc,
        "world_size": world_size,
        "ip": str(options.get("ip", "localhost")),
        "port": str(options.get("port", 5678)),
        "offset": offset,
    }, rest


#: set in a process that :func:`spawn` started (a fresh interpreter), before its run
SPAWNED = False


def started_by_command():
    """Whether this process is one of a multi-process run that :func:`spawn` started:
    the command checked the run before it started the processes."""
    return SPAWNED


def cpu_only(config):
    """Whether this run has no CUDA device to use (then processes talk over gloo)."""
    gpu_id = str(config["gpu_id"] if config["gpu_id"] is not None else "")
    return not (config["use_gpu"] and gpu_id and torch.cuda.is_available())


def init_cpu_process_group(config):
    """RecBole's multi-process device set-up with gloo and CPU tensors."""
    cfg = config.final_config_dict
    rank = cfg["local_rank"] + cfg["offset"]
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            backend="gloo",
            rank=rank,
            world_size=cfg["world_size"],
            init_method=f"tcp://{cfg['ip']}:{cfg['port']}",
        )
    cfg["device"] = torch.device("cpu")
    cfg["single_spec"] = False
    if cfg["local_rank"] != 0:  # as RecBole: only the first process talks
        cfg["state"] = "error"
        cfg["show_progress"] = False
        cfg["verbose"] = False


def is_distributed(config):
    return not config["single_spec"]


def is_main_process(config):
    return config["single_spec"] or (config["local_rank"] + config["offset"]) == 0


def broadcast(value, config):
    """``value`` of process 0, in every process (a no-op in a single-process run)."""
    if not is_distributed(config):
        return value
    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def combine_results(per_process, decimals):
    """The metrics of one evaluation split over processes: ``per_process`` holds, for
    each process, ``(users, {metric: unrounded mean over its users})``; the result is
    the mean over all users, rounded to ``decimals`` once. (RecBole's ``_map_reduce``
    averages values each process has already rounded, weighted by its number of
    batches: 0.2334 for 30 users, where 7/30 = 0.2333.)"""
    total = sum(users for users, _ in per_process)
    keys = list(per_process[0][1])
    return {
        k: round(
            sum(users * values[k] for users, values in per_process) / total, decimals
        )
        for k in keys
    }


def gather_results(result, users, config):
    """:func:`combine_results` of this process's ``result`` over ``users`` users and
    every other process's."""
    keys = list(result)
    row = torch.tensor(
        [float(users)] + [float(result[k]) for k in keys], dtype=torch.float64
    )
    rows = [torch.zeros_like(row) for _ in range(config["world_size"])]
    torch.distributed.all_gather(rows, row)
    per_process = [(r[0].item(), dict(zip(keys, r[1:].tolist()))) for r in rows]
    return combine_results(per_process, config["metric_decimal_place"])


class _CountingEvaluator:
    """RecBole's Evaluator that also remembers how many users its last evaluation was
    over (the rows of the collected top-K)."""

    def __init__(self, evaluator):
        self._evaluator = evaluator
        self.users = 0

    def evaluate(self, struct):
        self.users = len(struct.get("rec.topk")) if "rec.topk" in struct else 1
        return self._evaluator.evaluate(struct)

    def __getattr__(self, name):
        return getattr(self._evaluator, name)


@contextlib.contextmanager
def wrapping_on_cpu(trainer, config):
    """Around RecBole's ``Trainer.__init__`` of ``trainer``: in a process of a
    multi-process run on the CPU, RecBole's wrapping of the model for GPU devices
    (``device_ids=[local_rank]``) is skipped and the model wrapped without device ids.
    """
    if not (is_distributed(config) and config["device"].type == "cpu"):
        yield
        return
    config["single_spec"] = True
    try:
        yield
    finally:
        config["single_spec"] = False
    trainer.distributed_model = DistributedDataParallel(trainer.model)


def exact_evaluator(evaluator, config):
    """``evaluator`` (RecBole's) for a process of a multi-process run: its metrics
    unrounded, and the users of its last evaluation counted, so that
    :func:`gather_results` gives the mean over all users exactly; in one process
    ``evaluator`` itself."""
    if not is_distributed(config):
        return evaluator
    for metric in evaluator.metric_class.values():
        metric.decimal_place = 15
    return _CountingEvaluator(evaluator)


def barrier(config):
    if is_distributed(config):
        torch.distributed.barrier()


def _process(rank, run_fn, model, dataset, kwargs, queue):
    from recbole_attn.errors import RecboleAttnError

    global SPAWNED
    SPAWNED = True
    config_dict = dict(kwargs.pop("config_dict"))
    config_dict["local_rank"] = rank
    try:
        result = run_fn(model, dataset, config_dict=config_dict, **kwargs)
    except RecboleAttnError as err:
        # the user's error, for the parent to report as one line; raised again so that
        # torch stops the other processes
        queue.put(("error", err))
        raise
    if rank == 0:
        queue.put(("result", result))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def spawn(run_fn, model, dataset, options, config_dict, **kwargs):
    """Run ``run_fn(model, dataset, config_dict=..., **kwargs)`` in ``options['nproc']``
    processes of this machine; the result of process 0. A
    :class:`~recbole_attn.errors.RecboleAttnError` of a process (a missing dataset, a
    bad value) is raised here as it is, not as torch's report of a failed process with
    its traceback."""
    import torch.multiprocessing as mp

    queue = mp.get_context("spawn").SimpleQueue()
    kwargs["config_dict"] = {**config_dict, **options}
    try:
        mp.spawn(
            _process,
            args=(run_fn, model, dataset, kwargs, queue),
            nprocs=options["nproc"],
            join=True,
        )
    except mp.ProcessRaisedException:
        while not queue.empty():
            kind, value = queue.get()
            if kind == "error":
                raise value from None
        raise
    while not queue.empty():
        kind, value = queue.get()
        if kind == "result":
            return value
    return None
