"""
Models compared metric by metric with paired tests over the same users (docs/compare.md):
per-user files (``evaluate --per_user``) or checkpoints; the first is the baseline. Paired t
and Wilcoxon p-values are corrected over the table (Holm, or ``--correction=bh``).
"""

import json
import math
import os
import sys

from recbole_attn.errors import RecboleAttnError

#: what must be equal in the inputs' per-user files (their metadata)
SAME = ("dataset", "data", "split", "eval_mask_history")


def holm(pvalues):
    """Holm's step-down adjusted p-values (same order as ``pvalues``)."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    m, out, running = len(pvalues), [0.0] * len(pvalues), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        out[i] = running
    return out


def benjamini_hochberg(pvalues):
    """Benjamini-Hochberg adjusted p-values (same order as ``pvalues``):
    ``scipy.stats.false_discovery_control``."""
    from scipy import stats

    if not len(pvalues):
        return []
    return [float(p) for p in stats.false_discovery_control(pvalues, method="bh")]


CORRECTIONS = {"holm": holm, "bh": benjamini_hochberg}


def adjusted(pvalues, correction):
    """``pvalues`` corrected by ``correction`` over those that are numbers; an
    undefined one (NaN, e.g. the t-test of all-zero differences) stays NaN."""
    tested = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    out = [float("nan")] * len(pvalues)
    for i, p in zip(tested, CORRECTIONS[correction]([pvalues[i] for i in tested])):
        out[i] = p
    return out


def paired(base, other):
    """The paired statistics of ``other`` against ``base`` over the users both have
    (NaN: missing): means, relative difference, 95 % CI (paired t), paired t and
    Wilcoxon p-values, as scipy gives them for degenerate differences too."""
    import warnings

    import numpy as np
    from scipy import stats

    base, other = np.asarray(base, float), np.asarray(other, float)
    keep = ~(np.isnan(base) | np.isnan(other))
    base, other = base[keep], other[keep]
    n = len(base)
    diff = other - base
    nan = float("nan")
    mean_base, mean_other, mean_diff = (
        float(x.mean()) if n else nan for x in (base, other, diff)
    )
    low = high = p_t = p_w = nan
    if n > 1:
        with warnings.catch_warnings():
            # scipy's notes on degenerate samples: the values it returns are shown
            warnings.simplefilter("ignore", RuntimeWarning)
            test = stats.ttest_rel(other, base)
            p_t = float(test.pvalue)
            interval = test.confidence_interval(0.95)
            low, high = float(interval.low), float(interval.high)
            # all differences zero: p = 1, as scipy >= 1.15 returns (1.13 raises)
            p_w = float(stats.wilcoxon(diff).pvalue) if diff.any() else 1.0
    rel = lambda x: x / mean_base if mean_base else nan
    return {
        "users": int(n),
        "baseline": mean_base,
        "mean": mean_other,
        "difference": mean_diff,
        "relative": float(rel(mean_diff)),
        "ci95": [low, high],
        "ci95_relative": [float(rel(low)), float(rel(high))],
        "p_t": p_t,
        "p_wilcoxon": p_w,
    }


def load_inputs(paths, echo=print):
    """``[(label, meta, {user: {column: value}}, columns)]`` of per-user files or
    checkpoints (evaluated here); every file checked
    (:func:`recbole_attn.per_user_file.check_table`)."""
    from recbole_attn.per_user_file import check_table, read_per_user, table_values

    loaded = []
    for path in paths:
        if not os.path.exists(path):
            raise RecboleAttnError(f"not found: {path}")
        if path.endswith(".pth") or os.path.isdir(path):
            meta, header, rows = _evaluate(path, echo)
            rows = [[str(cell) for cell in row] for row in rows]
            check_table(path, header, rows)
        else:
            meta, header, rows = read_per_user(path)
        if len(rows) < 2:
            raise RecboleAttnError(
                f"{path} holds {len(rows)} user(s); a paired test over users needs at "
                "least two"
            )
        stem = os.path.splitext(os.path.basename(path.rstrip("/")))[0]
        label = f"{meta.get('model', '?')} ({stem})"  # its model and its file's stem
        loaded.append((label, meta, table_values(header, rows), header[2:]))
    return loaded


def _evaluate(path, echo):
    """The per-user table of a checkpoint (or a folder's newest), evaluated here."""
    from recbole_attn.engine.quick_start import evaluate
    from recbole_attn.commands.evaluate import newest_model_file

    model_file = newest_model_file(path)
    echo(f"evaluating {model_file} ...")
    table = evaluate(model_file, {"state": "ERROR"}, per_user=True)["per_user"]
    return table["meta"], table["header"], table["rows"]


def check_comparable(loaded):
    """A :class:`RecboleAttnError` naming the first difference of an input from the
    first one: dataset, data, split, history masking, or its users."""
    label0, meta0, table0, _ = loaded[0]
    for label, meta, table, _ in loaded[1:]:
        for key in SAME:
            if meta.get(key) != meta0.get(key):
                raise RecboleAttnError(
                    f"{label} and {label0} were not evaluated alike: {key} is "
                    f"{meta.get(key)!r} and {meta0.get(key)!r}; compare models "
                    "evaluated on the same data, split and ranking"
                )
        if set(table) != set(table0):
            only = sorted(set(table) ^ set(table0))[:3]
            raise RecboleAttnError(
                f"{label} and {label0} have other users ({len(table)} and "
                f"{len(table0)}; e.g. {', '.join(only)} in only one); compare models "
                "evaluated on the same users"
            )


def compare(paths, metrics=None, correction="holm", alpha=0.05, echo=print):
    """The comparison of the inputs ``paths`` (module docstring) as a dict: ``models``,
    ``users``, ``correction``, ``rows`` (one per metric and model against the
    baseline)."""
    import numpy as np

    if len(paths) < 2:
        raise RecboleAttnError(
            "compare needs at least two inputs: a baseline and a model"
        )
    if metrics is not None:
        metrics = [m.lower() for m in metrics]
        twice = sorted({m for m in metrics if metrics.count(m) > 1})
        if twice:
            raise RecboleAttnError(
                f"--metrics names {twice[0]} {metrics.count(twice[0])} times; name each "
                "metric once (each is one test of the correction's family)"
            )
    loaded = load_inputs(paths, echo)
    check_comparable(loaded)
    common = [c for c in loaded[0][3] if all(c in item[3] for item in loaded)]
    columns = common if metrics is None else metrics
    missing = [c for c in columns if c not in common]
    if missing or not columns:
        raise RecboleAttnError(
            f"metric(s) {', '.join(missing) or '(none)'} are not in every input; "
            f"common to all: {', '.join(common) or 'none'}"
        )
    users = sorted(loaded[0][2])
    base_label, _, base_table, _ = loaded[0]
    rows = []
    for label, _, table, _ in loaded[1:]:
        for column in columns:
            stats = paired(
                np.array([base_table[u][column] for u in users]),
                np.array([table[u][column] for u in users]),
            )
            rows.append({"metric": column, "model": label, **stats})
    for key in ("p_t", "p_wilcoxon"):
        for row, value in zip(rows, adjusted([r[key] for r in rows], correction)):
            row[f"{key}_{correction}"] = value
    for row in rows:
        row["significant"] = bool(row[f"p_t_{correction}"] < alpha)  # NaN: False
    return {
        "baseline": base_label,
        "models": [item[0] for item in loaded],
        "users": len(users),
        "correction": correction,
        "alpha": alpha,
        "rows": rows,
    }


def table_text(result):
    """The comparison as a console table."""
    c = result["correction"]
    name = {"holm": "Holm", "bh": "BH"}[c]
    header = (
        f"{'metric':<12} {'model':<28} {'mean':>8} {'vs base':>8} {'95% CI':>19} "
        f"{'p t':>9} {'p W':>9} {'p t ' + name:>10} {'p W ' + name:>10}"
    )
    lines = [
        f"baseline: {result['baseline']}; {result['users']} users; paired over users, "
        f"p-values corrected ({name}) for {len(result['rows'])} comparisons; "
        f"* = corrected t-test p < {result['alpha']}",
        header,
    ]
    for row in result["rows"]:
        low, high = (100 * x for x in row["ci95_relative"])
        lines.append(
            f"{row['metric']:<12} {row['model'][:28]:<28} {row['mean']:>8.4f} "
            f"{100 * row['relative']:>+7.1f}% {f'[{low:+.1f}, {high:+.1f}]%':>19} "
            f"{row['p_t']:>9.2g} {row['p_wilcoxon']:>9.2g} "
            f"{row[f'p_t_{c}']:>10.2g} {row[f'p_wilcoxon_{c}']:>10.2g}"
            + (" *" if row["significant"] else "")
        )
    return "\n".join(lines)


def output_kind(path):
    """``.json`` or ``.csv``: how ``path`` is written; a :class:`RecboleAttnError` for
    any other name (before any work)."""
    extension = os.path.splitext(path)[1].lower()
    if extension not in (".json", ".csv"):
        raise RecboleAttnError(
            f"--output={path}: the comparison is written as JSON (.json) or CSV "
            "(.csv); give a file name ending in one of them"
        )
    return extension


def _strict(value):
    """``value`` with every float that is not finite (an undefined p-value) as None:
    JSON has no NaN or Infinity, and strict readers refuse them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def _cell(value):
    """A CSV cell: a float that is not finite is empty, as pandas writes NaN."""
    return "" if isinstance(value, float) and not math.isfinite(value) else value


def write_result(result, path, overwrite=False):
    """The comparison as strict JSON (``.json``; an undefined number is ``null``) or
    CSV (``.csv``, one row per comparison; an undefined number is an empty cell)."""
    import csv
    import io

    from recbole_attn.files import write_files

    if output_kind(path) == ".json":
        text = json.dumps(_strict(result), indent=1, allow_nan=False) + "\n"
    else:
        out = io.StringIO()
        keys = [k for k in result["rows"][0] if k not in ("ci95", "ci95_relative")]
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(keys + ["ci95_low", "ci95_high"])
        for row in result["rows"]:
            cells = [row[k] for k in keys] + list(row["ci95"])
            writer.writerow([_cell(v) for v in cells])
        text = out.getvalue()
    write_files({path: text}, "the comparison", overwrite)


def add_arguments(parser):
    """The inputs, the metrics, the correction and the output."""
    from recbole_attn.options.arguments import checked

    parser.add_argument(
        "inputs",
        nargs="+",
        help="per-user files (evaluate --per_user) or checkpoints; the first is the "
        "baseline",
    )
    parser.add_argument(
        "--metrics",
        help="comma-separated, e.g. ndcg@10,recall@10 "
        "(default: every metric all inputs have)",
    )
    parser.add_argument("--correction", choices=list(CORRECTIONS), default="holm")
    parser.add_argument(
        "--alpha",
        type=checked(
            float, lambda a: 0 < a < 1, "--alpha must be in (0, 1), got {value}"
        ),
        default=0.05,
    )
    parser.add_argument("--output", help="a .json (strict JSON) or .csv file")
    parser.add_argument("--overwrite", action="store_true")


def run(args):
    """Check the output, compare, print the table and write it."""
    from recbole_attn.files import check_output_file

    if args.output:  # before any input is read or evaluated
        output_kind(args.output)
        check_output_file([args.output], "the comparison", args.overwrite)
    metrics = None
    if args.metrics:
        metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    result = compare(
        args.inputs,
        metrics,
        args.correction,
        args.alpha,
        echo=lambda line: print(line, file=sys.stderr),
    )
    print(table_text(result))
    if args.output:
        write_result(result, args.output, args.overwrite)
        print(f"written: {args.output}")
    return 0


if __name__ == "__main__":
    from recbole_attn.options.arguments import command_main

    sys.exit(command_main(sys.modules[__name__], prog=f"python -m {__spec__.name}"))
