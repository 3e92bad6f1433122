"""Multi-process training as RecBole 1.2 does it (torch DDP), on GPUs (NCCL) and CPUs
(gloo); usage: docs/tuning.md."""

import contextlib
import os
import signal
import time

import torch
from torch.nn.parallel import DistributedDataParallel

from recbole_attn.errors import ConfigError, Interrupted, RecboleAttnError
from recbole_attn.options.check import check_options
from recbole_attn.options.declared import Integer
from recbole_attn.options.values import convert_values

#: config keys of a multi-process run (RecBole's names), taken out of the overrides by ``run``
DISTRIBUTED_KEYS = ("nproc", "world_size", "ip", "port", "offset")

RULES = {
    "nproc": Integer(1),
    "world_size": Integer(1),
    "offset": Integer(0),
    "port": Integer(1, maximum=65535),
}


def _checked(options, keys):
    """``options`` as the values they spell, ``keys`` checked against :data:`RULES`."""
    options = convert_values(options)
    check_options(options, {k: RULES[k] for k in keys})
    return options


def distributed_options(config_dict):
    """``(options, rest)``: the checked multi-process keys and the others."""
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


def usable_cores():
    """The CPU cores this process may run on (its affinity; else the machine's)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def resident_bytes():
    """This process's resident memory (``/proc/self/status``), or None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_capacity(config, nproc, cores=None, gpus=None, available=None, each=None):
    """A :class:`ConfigError` before any process starts when ``nproc`` processes are
    more than this machine runs: a CPU core each (``cores``), a GPU each (``gpus``, of
    ``gpu_id``), and each at least the memory this process holds now (``each``: it has
    imported torch and RecBole, as each of them will, before its data) within what is
    available."""
    from recbole_attn.engine.memory import _gb, available_bytes

    if cpu_only(config):
        cores = usable_cores() if cores is None else cores
        if nproc > cores:
            raise ConfigError(
                f"--nproc={nproc} starts {nproc} training processes, one a CPU core, "
                f"but this machine has {cores}; give --nproc={cores} or fewer"
            )
    else:
        listed = [g for g in str(config["gpu_id"]).split(",") if g.strip()]
        gpus = min(len(listed), torch.cuda.device_count()) if gpus is None else gpus
        if nproc > gpus:
            raise ConfigError(
                f"--nproc={nproc} starts {nproc} training processes, one a GPU, but "
                f"gpu_id {config['gpu_id']!r} gives {gpus}; give --nproc={gpus} or "
                "fewer, or list more GPUs in --gpu_id"
            )
    each = resident_bytes() if each is None else each
    available = available_bytes("cpu") if available is None else available
    if each and available and nproc * each > available:
        fit = max(1, int(available // each))
        raise ConfigError(
            f"--nproc={nproc} starts {nproc} training processes of at least "
            f"{_gb(each)} each (torch and RecBole, before the data), but "
            f"{_gb(available)} of memory is available; give --nproc={fit} or fewer"
        )


#: set in a process that :func:`spawn` started (its run was checked before it)
SPAWNED = False


def cpu_only(config):
    gpu_id = str(config["gpu_id"] if config["gpu_id"] is not None else "")
    return not (config["use_gpu"] and gpu_id and torch.cuda.is_available())


def init_cpu_process_group(config):
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
        cfg.update(state="error", show_progress=False, verbose=False)


def is_distributed(config):
    return not config["single_spec"]


def is_main_process(config):
    return config["single_spec"] or (config["local_rank"] + config["offset"]) == 0


def broadcast(value, config):
    if not is_distributed(config):
        return value
    box = [value]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def combine_results(per_process, decimals):
    """The mean over all users of ``(users, {metric: mean})`` rows, rounded once."""
    total = sum(users for users, _ in per_process)
    keys = list(per_process[0][1])
    return {
        k: round(
            sum(users * values[k] for users, values in per_process) / total, decimals
        )
        for k in keys
    }


def gather_results(result, users, config):
    keys = list(result)
    row = torch.tensor(
        [float(users)] + [float(result[k]) for k in keys], dtype=torch.float64
    )
    rows = [torch.zeros_like(row) for _ in range(config["world_size"])]
    torch.distributed.all_gather(rows, row)
    per_process = [(r[0].item(), dict(zip(keys, r[1:].tolist()))) for r in rows]
    return combine_results(per_process, config["metric_decimal_place"])


class _CountingEvaluator:
    """RecBole's Evaluator that also counts the users it evaluated."""

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
    """Around ``Trainer.__init__``: a CPU process's model wrapped without devices."""
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
    """``evaluator`` unrounded and counting its users over several processes."""
    if not is_distributed(config):
        return evaluator
    for metric in evaluator.metric_class.values():
        metric.decimal_place = 15
    return _CountingEvaluator(evaluator)


def barrier(config):
    if is_distributed(config):
        torch.distributed.barrier()


#: seconds the processes of a stopped run have to say what they saved and end
STOP_SECONDS = 30


#: the signal that stopped this process's run (a process that :func:`spawn` started)
_STOPPED_BY = []


def _stop_once(signum, frame):
    """A process's first Ctrl-C or SIGTERM stops its run (what it saved said by its
    :class:`Interrupted`); later ones, such as the SIGTERM the command sends each process
    after a Ctrl-C the terminal sent them all, do not cut that short. (The handler
    stays: one set to ``SIG_IGN`` meanwhile makes Python print "Signal 15 ignored due
    to race condition" for a signal already on its way.)"""
    if not _STOPPED_BY:
        _STOPPED_BY.append(signum)
        raise KeyboardInterrupt


def _process(rank, run_fn, model, dataset, kwargs, queue):
    global SPAWNED
    SPAWNED = True
    signal.signal(signal.SIGINT, _stop_once)
    signal.signal(signal.SIGTERM, _stop_once)
    config_dict = dict(kwargs.pop("config_dict"))
    config_dict["local_rank"] = rank
    try:
        result = run_fn(model, dataset, config_dict=config_dict, **kwargs)
    except RecboleAttnError as err:
        # for the parent to report as one line; raised so that torch stops the others
        queue.put(("error", rank, err))
        raise
    if rank == 0:
        queue.put(("result", rank, result))
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def spawn(run_fn, model, dataset, options, config_dict, **kwargs):
    """``run_fn`` in ``options['nproc']`` processes; process 0's result, or its error
    (the first of another process's when it has none). A Ctrl-C or SIGTERM of the
    command stops every process (:func:`_stop`): process 0's line says what it saved."""
    import torch.multiprocessing as mp

    queue = mp.get_context("spawn").SimpleQueue()
    kwargs["config_dict"] = {**config_dict, **options}
    context = mp.start_processes(
        _process,
        args=(run_fn, model, dataset, kwargs, queue),
        nprocs=options["nproc"],
        join=False,
        start_method="spawn",
    )
    try:
        while not context.join():
            pass
    except mp.ProcessRaisedException:
        if error := _sent(queue, "error"):
            raise error from None
        raise
    except KeyboardInterrupt:
        _stop(context.processes)
        raise _sent(queue, "error") or Interrupted(
            "interrupted; the training processes were stopped before process 0 said "
            "what it saved (a -last.pth checkpoint in checkpoint_dir continues with "
            "--resume_checkpoint)"
        ) from None
    return _sent(queue, "result")


def _stop(processes, seconds=None):
    """SIGTERM to each process still running, then :data:`STOP_SECONDS` for all of them
    to end; those left are killed."""
    seconds = STOP_SECONDS if seconds is None else seconds
    for process in processes:
        if process.is_alive():
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + seconds
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join()


def _sent(queue, what):
    """Process 0's value of kind ``what`` in ``queue``, else the first other's; or
    None."""
    sent = []
    while not queue.empty():
        kind, rank, value = queue.get()
        if kind == what:
            sent.append((rank != 0, value))
    return min(sent, key=lambda item: item[0])[1] if sent else None
