"""What a search writes into its output folder: the trial table (``trials.csv``,
``trials.md``), the selected configuration (``best.yaml``, for ``--config_files``) and
``result.json``.
"""

import contextlib
import csv
import json
import os

import yaml

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import remove_stale_temporaries, write_failure, write_replacing

#: what a search writes into its output folder (never replaced without ``overwrite``)
OUTPUTS = ("trials.csv", "trials.md", "best.yaml", "result.json", "saved", "ray")
#: written by a search that was stopped (Ctrl-C, SIGTERM): its finished trials, which
#: the same command continues from (the folder is then that search's own)
INTERRUPTED = "interrupted.json"


def _write(path, write):
    """``write_replacing`` (a complete file or the one before), and a write that fails
    as one line naming the file and the cause."""
    try:
        write_replacing(path, write)
    except OSError as err:
        reason, advice = write_failure(err, path)
        raise RecboleAttnError(f"cannot write {path} ({reason}); {advice}") from None


def _table(trials, params):
    """The header and rows of the trial table."""
    names = [p.name for p in params]
    header = names + [
        "best_valid_score",
        "epochs",
        "seconds",
        "stop_reason",
        "saved_model_file",
    ]
    rows = [
        [t["params"][n] for n in names]
        + [
            f"{t['best_valid_score']:.6f}",
            t["epochs"],
            t.get("seconds", ""),  # none in the records of searches before 2026-12-03
            t["stop_reason"],
            t["saved_model_file"],
        ]
        for t in trials
    ]
    return header, rows


def _write_tables(output, header, rows, lines):
    """``trials.csv``, and ``trials.md``: its ``lines``."""
    table = [header, *rows]
    _write(os.path.join(output, "trials.csv"), lambda f: csv.writer(f).writerows(table))
    text = "\n".join(lines)
    _write(os.path.join(output, "trials.md"), lambda f: f.write(text))


def _markdown(cells):
    """A row of a Markdown table."""
    return "| " + " | ".join(str(v) for v in cells) + " |"


def write_interrupted(output, trials, params, total, model, dataset):
    """What a stopped search keeps: its finished ``trials`` in ``trials.csv`` and
    ``trials.md`` (none selected, nothing tested) and in ``interrupted.json``, which the
    same command reads to continue the search."""
    header, rows = _table(trials, params)
    lines = [
        f"# {model} on {dataset}: interrupted after {len(trials)} of {total} trials",
        "",
        "The search was stopped; nothing was selected or tested yet. The same command "
        'continues it (docs/tuning.md, "A stopped search").',
        "",
        _markdown(header),
        "|" + "---|" * len(header),
    ]
    _write_tables(output, header, rows, lines + [_markdown(row) for row in rows] + [""])
    write_record(output, trials, total, model, dataset)


def write_record(output, trials, total, model, dataset):
    """``interrupted.json``, the finished ``trials`` the same command continues from:
    written whole after each finished trial, so that a search killed outright (SIGKILL,
    the memory killer: no clean-up runs) keeps them too."""
    record = {"model": model, "dataset": dataset, "total": total, "trials": trials}
    _write(
        os.path.join(output, INTERRUPTED),
        lambda f: json.dump(record, f, indent=2, default=str),
    )


def read_interrupted(output):
    """The finished trials an interrupted search left in ``output`` (``[]`` if none)."""
    path = os.path.join(output, INTERRUPTED)
    for name in ("trials.csv", "trials.md", INTERRUPTED):
        remove_stale_temporaries(os.path.join(output, name))
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as f:
            trials = json.load(f)["trials"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [t for t in trials if isinstance(t, dict) and "params" in t]


def write_outputs(output, result, overrides, params):
    """``trials.csv`` and ``trials.md`` (every trial), ``best.yaml`` (the user's
    overrides and the selected values; ``--config_files`` accepts it), ``result.json``.
    """
    header, rows = _table(result["trials"], params)
    _write_tables(output, header, rows, _trials_page(result, header, rows))
    _write(os.path.join(output, "best.yaml"), _best_yaml(result, overrides))
    _write(  # last: a complete result.json is a complete search
        os.path.join(output, "result.json"),
        lambda f: json.dump(result, f, indent=2, default=str),
    )
    with contextlib.suppress(FileNotFoundError):  # nothing left to continue
        os.remove(os.path.join(output, INTERRUPTED))


def _trials_page(result, header, rows):
    """The lines of ``trials.md``: every trial, the selected one marked, its results."""
    best = result["best_params"]
    lines = [
        f"# {result['model']} on {result['dataset']}: {len(rows)} trials, "
        f"algo {result['algo']} ({result['tool']}, scheduler {result['scheduler']}"
        + (
            f", grace period {result['grace_period']}"
            if result.get("grace_period")
            else ""
        )
        + f"), "
        f"{result['search_seconds']} s",
        "",
        f"Selected on validation {result['valid_metric']}; only the selected "
        "configuration was evaluated on test.",
        "",
        _markdown(header[:-1] + ["selected"]),
        "|" + "---|" * len(header),
    ]
    for trial, row in zip(result["trials"], rows):
        lines.append(
            _markdown(row[:-1] + ["**yes**" if trial["params"] == best else ""])
        )
    lines += [
        "",
        f"Best configuration: `{json.dumps(best)}`",
        "",
        f"Validation: `{json.dumps(result['best_valid_result'])}`",
        "",
        f"Test: `{json.dumps(result['test_result'])}`",
        "",
    ]
    return lines


def _best_yaml(result, overrides):
    """The writer of ``best.yaml``: the overrides (command-line strings as the values
    they spell) and the selected values."""
    from recbole_attn.options.values import convert_values

    chosen = convert_values(overrides)
    chosen.pop("checkpoint_dir", None)
    chosen.update(result["best_params"])

    def write(f):
        """A comment line on the selection, then the keys."""
        f.write(
            f"# selected by recbole_attn.commands.tuning for {result['model']} on "
            f"{result['dataset']} (validation {result['valid_metric']} = "
            f"{result['best_valid_score']:.4f})\n"
        )
        yaml.safe_dump(chosen, f, sort_keys=True)

    return write
