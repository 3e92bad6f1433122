"""
recbole_attn.commands.recommend
###############################

Recommendations from a trained model: the top-K items of every user (or of the users
named), with rank and score, under the dataset's own user and item tokens, as CSV or JSON
Lines (``recbole-attn recommend``; :func:`recommend` from Python).

    recbole-attn recommend --model_file=saved/<file>.pth --topk=20 --output=recs.csv
        [--users=196,186 | --users_file=users.txt] [--history=all|test|train]
        [--exclude_seen=False] [--format=csv|jsonl] [--overwrite]

What a recommendation is conditioned on (``history``): ``all`` (default), every known
interaction of the user (training, validation and test): the next item after everything
known; ``test``, every interaction but the user's test item (the model's input when its
test item was evaluated); ``train``, the training interactions only (its input when its
validation item was evaluated). Items of that history are excluded unless
``exclude_seen`` is False. Scores are the model's own (``full_sort_predict``; STOSA's is
the negative W2 distance, so its ranking is by ascending distance, as in evaluation);
ties are broken by the smaller item id. Users are scored in batches with a top-K per batch:
no [users x items] matrix is held.
"""

import csv
import json
import os
import sys

from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import read_text, refuse_existing, write_files

HISTORIES = ("all", "test", "train")
FORMATS = ("csv", "jsonl")
#: the largest [users, items] score block of one batch
SCORE_BUDGET_MB = 64


def newest_model_file(path):
    """``path`` itself, or for a folder the newest best-model checkpoint in it (said on
    standard error)."""
    if not os.path.isdir(path):
        return path
    files = [
        os.path.join(path, f)
        for f in os.listdir(path)
        if f.endswith(".pth") and not f.endswith("-last.pth") and not f.startswith(".")
    ]
    files = [f for f in files if os.path.getsize(f) > 0]
    if not files:
        raise RecboleAttnError(f"{path} holds no model checkpoint (.pth)")
    chosen = max(files, key=os.path.getmtime)
    print(
        f"model file: {chosen} (the newest of {len(files)} checkpoints in {path})",
        file=sys.stderr,
    )
    return chosen


def user_histories(splits, history):
    """``{user id: [item ids, oldest first]}`` of every user, under ``history``: the
    training history (:func:`~recbole_attn.data.histories.training_histories`), then the
    validation item (``test``, ``all``), then the test item (``all``)."""
    from recbole_attn.data.histories import training_histories

    train, valid, test = (s._dataset for s in splits)
    recorded = training_histories(train)
    out = {}
    for i, user in enumerate(recorded.users.tolist()):
        start, end = recorded.offsets[i : i + 2].tolist()
        out[user] = recorded.items[start:end].tolist()
    later = {"all": (valid, test), "test": (valid,), "train": ()}[history]
    for part in later:
        feat = part.inter_feat
        for user, item in zip(
            feat[part.uid_field].tolist(), feat[part.iid_field].tolist()
        ):
            out.setdefault(user, []).append(item)
    return out


def _batch_size(n_items, requested):
    if requested:
        return int(requested)
    return max(1, SCORE_BUDGET_MB * 2**20 // (4 * max(n_items, 1)))


def _user_ids(dataset, users):
    """Internal ids of the user tokens ``users`` (all users with a history when None);
    unknown tokens are one error naming how many and a few of them."""
    field = dataset.uid_field
    known = dataset.field2token_id[field]
    users = list(dict.fromkeys(map(str, users)))  # a user named twice gets one list
    unknown = [u for u in users if u not in known]
    if unknown:
        shown = ", ".join(map(repr, unknown[:5])) + (" ..." if len(unknown) > 5 else "")
        raise RecboleAttnError(
            f"{len(unknown)} of the {len(users)} users given are not in the dataset "
            f"{dataset.dataset_name!r}: {shown}; users are the dataset's own tokens "
            f"(its {field} column)"
        )
    return [known[u] for u in users]


def _tokens(dataset, field, ids):
    """The tokens of ``ids`` as a list of str (RecBole's ``id2token`` returns a bare
    string for one id)."""
    import numpy as np
    import torch

    ids = list(ids.tolist() if torch.is_tensor(ids) else ids)
    if not ids:
        return []
    return [str(t) for t in np.atleast_1d(dataset.id2token(field, ids))]


def _padded(sequences, width=None):
    """Right-padded LongTensor ``[B, width]`` (0 = padding) of item id lists."""
    import torch

    width = width or max([len(s) for s in sequences] + [1])
    out = torch.zeros(len(sequences), width, dtype=torch.long)
    for i, seq in enumerate(sequences):
        out[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out


def top_k(scores, k, seen=None):
    """``(items, scores)`` ``[B, k]`` of the k best columns of ``scores [B, n]`` (column
    0, padding, never; the ``seen [B, n]`` boolean columns never), ties to the smaller
    item id."""
    import torch

    scores = scores.clone()
    scores[:, 0] = -torch.inf
    if seen is not None:
        scores[seen] = -torch.inf
    values, items = torch.topk(scores, k, dim=1)  # O(n) per row; ties in any order
    # equal scores by item id: sort by id, then (stably) by score
    by_id = items.argsort(1)
    items, values = items.gather(1, by_id), values.gather(1, by_id)
    by_score = torch.sort(values, dim=1, descending=True, stable=True).indices
    items, values = items.gather(1, by_score), values.gather(1, by_score)
    # rows whose k-th score is tied with items left out: a full stable sort there
    last = values[:, -1:]
    cut = (scores == last).sum(1) > (values == last).sum(1)
    if bool(cut.any()):
        rows = cut.nonzero().squeeze(1)
        order = torch.sort(scores[rows], dim=1, descending=True, stable=True).indices
        items[rows] = order[:, :k]
        values[rows] = scores[rows].gather(1, order[:, :k])
    return items, values


def recommend(
    model_file,
    k=20,
    users=None,
    history="all",
    exclude_seen=True,
    batch_size=None,
    config_dict=None,
    show_progress=False,
):
    """The top-``k`` items of ``users`` (the dataset's user tokens; None: every user with
    a history) for the model in ``model_file`` (a checkpoint, or a folder: its newest).

    Returns:
        dict: ``model``, ``dataset``, ``model_file``, ``fields`` (the user, item and
        category field names), ``rows``: one ``(user, rank, item, score, categories)``
        per recommendation, in user order then rank (tokens of the dataset; categories a
        list of tokens, or None without a category field).
    """
    import torch

    from recbole.data.interaction import Interaction

    from recbole_attn.evaluator.collector import (
        category_field_name,
        item_category_table,
    )
    from recbole_attn.engine.quick_start import load_data_and_model

    if history not in HISTORIES:
        raise RecboleAttnError(
            f"history must be one of {list(HISTORIES)}, got {history!r}"
        )
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise RecboleAttnError(f"topk must be an integer >= 1, got {k!r}")
    if batch_size is not None and (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, int)
        or batch_size < 1
    ):
        raise RecboleAttnError(
            f"batch_size must be an integer >= 1 (users per batch), got {batch_size!r}; "
            "leave it out for a batch that fits the default memory budget"
        )
    model_file = newest_model_file(str(model_file))
    overrides = {"state": "ERROR", "show_progress": False, **(config_dict or {})}
    config, model, _, splits = load_data_and_model(model_file, overrides)
    dataset = splits[0]._dataset
    n_items = dataset.item_num - 1  # ids 1.. (0 is padding)
    if k > n_items:
        raise RecboleAttnError(
            f"topk {k} is more than the {n_items} items of {dataset.dataset_name!r}"
        )
    histories = user_histories(splits, history)
    if users is None:
        ids = sorted(u for u, items in histories.items() if items)
    else:
        ids = _user_ids(dataset, list(users))
        empty = [u for u in ids if not histories.get(u)]
        if empty:
            tokens = _tokens(dataset, dataset.uid_field, empty[:5])
            raise RecboleAttnError(
                f"{len(empty)} user(s) have no interaction before their {history} "
                f"cut: {tokens}; use --history=all"
            )
    field = category_field_name(config)
    categories = None
    if dataset.item_feat is not None and field in dataset.field2type:
        categories = item_category_table(dataset, field)
    max_length = model.max_seq_length
    model.eval()
    device = config["device"]
    size = _batch_size(dataset.item_num, batch_size)
    batches = range(0, len(ids), size)
    if show_progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="recommend", unit="batch", file=sys.stderr)
    item_tokens = _tokens(dataset, dataset.iid_field, range(dataset.item_num))
    category_tokens = None
    if categories is not None:  # per item, its category tokens (one lookup)
        names = _tokens(dataset, field, range(dataset.num(field)))
        category_tokens = [
            [names[c] for c in row if c > 0] for row in categories.tolist()
        ]
    rows = []
    for start in batches:
        chunk = ids[start : start + size]
        seqs = [histories[u] for u in chunk]
        batch = Interaction(
            {
                model.ITEM_SEQ: _padded([s[-max_length:] for s in seqs], max_length),
                model.ITEM_SEQ_LEN: torch.as_tensor(
                    [min(len(s), max_length) for s in seqs]
                ),
                model.USER_ID: torch.as_tensor(chunk),
            }
        ).to(device)
        with torch.no_grad():
            scores = model.full_sort_predict(batch).view(len(chunk), -1).float()
        seen = None
        if exclude_seen:  # every item of the history, not only the model's input
            seen = torch.zeros_like(scores, dtype=torch.bool)
            seen.scatter_(1, _padded(seqs).to(scores.device), True)
        items, values = top_k(scores, k, seen)
        items, values = items.cpu().tolist(), values.cpu().tolist()
        for user, user_items, user_values in zip(
            _tokens(dataset, dataset.uid_field, chunk), items, values
        ):
            for rank, (item, score) in enumerate(zip(user_items, user_values), 1):
                if score == -float("inf"):  # fewer than k items left to recommend
                    break
                cats = category_tokens[item] if category_tokens is not None else None
                rows.append((user, rank, item_tokens[item], score, cats))
    return {
        "model": config["model"],
        "dataset": config["dataset"],
        "model_file": model_file,
        "fields": {
            "user": dataset.uid_field,
            "item": dataset.iid_field,
            "category": field if categories is not None else None,
        },
        "rows": rows,
    }


def _text(result, fmt):
    fields = result["fields"]
    user, item, cat = fields["user"], fields["item"], fields["category"]
    if fmt == "csv":
        lines = []

        class Sink:
            def write(self, text):
                lines.append(text)

        writer = csv.writer(Sink(), lineterminator="\n")
        writer.writerow([user, "rank", item, "score"] + ([cat] if cat else []))
        for u, rank, i, score, cats in result["rows"]:
            extra = [" ".join(cats)] if cat else []
            writer.writerow([u, rank, i, f"{score:.6g}"] + extra)
        return "".join(lines)
    out, current = [], None
    for u, rank, i, score, cats in result["rows"]:
        if current is None or current[user] != u:
            current = {user: u, "recommendations": []}
            out.append(current)
        entry = {"rank": rank, item: i, "score": score}
        if cat:
            entry[cat] = cats
        current["recommendations"].append(entry)
    return "".join(json.dumps(record) + "\n" for record in out)


#: the extensions of the formats a recommendation file is written in
EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl"}


def output_format(output, fmt=None):
    """The format ``output`` is written in: its extension's (``.csv``, ``.jsonl``) or
    ``fmt`` (``--format``, for a name of another extension). A :class:`RecboleAttnError`
    for an extension of a format this command does not write (``.json``, ``.parquet``:
    before, CSV or JSON Lines went under that name) or that contradicts ``fmt``."""
    if fmt is not None and fmt not in FORMATS:
        raise RecboleAttnError(f"format must be one of {list(FORMATS)}, got {fmt!r}")
    extension = os.path.splitext(str(output))[1].lower()
    by_name = EXTENSIONS.get(extension)
    if fmt and by_name and fmt != by_name:
        raise RecboleAttnError(
            f"--format={fmt} and --output {output} disagree: a {extension} file holds "
            f"{by_name}; name the file .{fmt}, or leave out --format"
        )
    if fmt is None and by_name is None:
        raise RecboleAttnError(
            f"--output {output}: recommend writes CSV (.csv) or JSON Lines (.jsonl), "
            f"not {extension or 'a file without an extension'}; name the file .csv or "
            ".jsonl (or give --format=csv|jsonl to write that format under this name)"
        )
    return fmt or by_name


def write_recommendations(result, output, fmt=None, overwrite=False):
    """Write ``result`` (:func:`recommend`) to ``output`` as CSV or JSON Lines (``fmt``,
    default by the file's extension), atomically; an existing file only with
    ``overwrite``."""
    fmt = output_format(output, fmt)
    write_files({output: _text(result, fmt)}, "the recommendations", overwrite)
    return output


def _read_users_file(path):
    users = [
        line.strip()
        for line in read_text(path, "users file").splitlines()
        if line.strip()
    ]
    if not users:
        raise RecboleAttnError(
            f"users file {path} names no user (one user token per line); leave out "
            "--users_file to recommend to every user"
        )
    return users


def main(argv=None, prog=None):
    """``recbole-attn recommend``; returns the exit status."""
    from recbole_attn.options.arguments import command_parser, guarded
    from recbole_attn.options.values import convert_value

    parser = command_parser(prog, __doc__)
    parser.add_argument(
        "--model_file",
        required=True,
        help="a checkpoint written by a run (saved/<model>-<time>-<token>.pth), or a "
        "folder: its newest",
    )
    parser.add_argument("--output", required=True, help="the .csv or .jsonl file")
    parser.add_argument("--topk", type=int, default=20, help="K (default 20)")
    users = parser.add_mutually_exclusive_group()
    users.add_argument("--users", help="comma-separated user tokens (default: all)")
    users.add_argument("--users_file", help="a file of user tokens, one per line")
    parser.add_argument("--history", default="all", choices=HISTORIES)
    parser.add_argument(
        "--exclude_seen",
        type=convert_value,
        default=True,
        help="exclude the items of the history (default True)",
    )
    parser.add_argument("--format", choices=FORMATS, default=None)
    parser.add_argument("--batch_size", type=int, default=None)
    parser.add_argument(
        "--data_path", default=None, help="where the dataset is now, if it moved"
    )
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)

    def run():
        if not isinstance(args.exclude_seen, bool):
            raise RecboleAttnError(
                f"--exclude_seen must be True or False, got {args.exclude_seen!r}"
            )
        if os.path.isdir(args.output):
            raise RecboleAttnError(
                f"--output {args.output} is a folder; give a file name (.csv or .jsonl)"
            )
        output_format(args.output, args.format)  # before the model loads
        refuse_existing([args.output], "the recommendations", args.overwrite)
        named = None
        if args.users is not None:
            named = [u.strip() for u in args.users.split(",") if u.strip()]
            if not named:
                raise RecboleAttnError(
                    f"--users={args.users!r} names no user (comma-separated user "
                    "tokens); leave it out to recommend to every user"
                )
        elif args.users_file:
            named = _read_users_file(args.users_file)
        result = recommend(
            args.model_file,
            k=args.topk,
            users=named,
            history=args.history,
            exclude_seen=args.exclude_seen,
            batch_size=args.batch_size,
            config_dict={"data_path": args.data_path} if args.data_path else None,
            show_progress=sys.stderr.isatty(),
        )
        write_recommendations(result, args.output, args.format, args.overwrite)
        users_done = len({r[0] for r in result["rows"]})
        print(
            f"wrote {args.output}: top-{args.topk} of {users_done} users from "
            f"{result['model_file']} ({result['model']} on {result['dataset']})"
        )
        return 0

    return guarded(run)


if __name__ == "__main__":
    sys.exit(main(prog="python -m recbole_attn.commands.recommend"))
