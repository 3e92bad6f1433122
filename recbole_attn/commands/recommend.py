"""
The top-K items of every user (or of the users named) from a trained model, with rank and
score, as the dataset's own tokens in CSV or JSON Lines; ties go to the smaller item id
(``recbole-attn recommend --model_file=saved/<file>.pth --topk=20 --output=recs.csv``).
"""

import csv
import io
import json
import os
import sys

from recbole_attn.commands.evaluate import MODEL_HELP, newest_model_file
from recbole_attn.errors import RecboleAttnError
from recbole_attn.files import read_text, refuse_existing, write_files

HISTORIES = ("all", "test", "train")
FORMATS = ("csv", "jsonl")
#: the largest [users, items] score block of one batch
SCORE_BUDGET_MB = 64


def user_histories(splits, history):
    """``{user id: [item ids, oldest first]}``: the training history, then under
    ``history`` ``test`` or ``all`` the validation item, under ``all`` the test item."""
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


def _user_ids(dataset, users):
    """Internal ids of the user tokens ``users``; unknown ones are an error."""
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
    """The tokens of ``ids`` as a list of str (``id2token`` of one id is a bare str)."""
    import numpy as np
    import torch

    ids = list(ids.tolist() if torch.is_tensor(ids) else ids)
    if not ids:
        return []
    return [str(t) for t in np.atleast_1d(dataset.id2token(field, ids))]


def _padded(sequences, width=0):
    """Right-padded LongTensor ``[B, width or the longest]`` (0 = padding) of id lists."""
    import torch
    from torch.nn.functional import pad
    from torch.nn.utils.rnn import pad_sequence

    out = pad_sequence([torch.as_tensor(s, dtype=torch.long) for s in sequences], True)
    return pad(out, (0, width - out.shape[1])) if width else out


def top_k(scores, k, seen=None):
    """``(items, scores)`` ``[B, k]``: the k best columns of ``scores [B, n]`` but column 0
    (padding) and ``seen [B, n]``, ties to the smaller item id."""
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
    model=None,
):
    """The top-``k`` items of ``users`` (tokens; None: all) for the model in
    ``model_file`` (or a folder's newest, of ``model``): ``model``, ``dataset``, ``model_file``,
    ``fields`` and ``rows`` of ``(user, rank, item, score, categories)`` tokens."""
    from recbole_attn.engine.quick_start import load_data_and_model

    model_file = newest_model_file(str(model_file), model)
    overrides = {"state": "ERROR", "show_progress": False, **(config_dict or {})}
    config, model, _, splits = load_data_and_model(model_file, overrides)
    dataset = splits[0]._dataset
    n_items = dataset.item_num - 1  # ids 1.. (0 is padding)
    if k > n_items:
        raise RecboleAttnError(
            f"topk {k} is more than the {n_items} items of {dataset.dataset_name!r}"
        )
    histories = user_histories(splits, history)
    ids = _chosen_users(dataset, histories, users, history)
    field, categories = _category_tokens(config, dataset)
    # batches of users within SCORE_BUDGET_MB of scores, a progress bar on stderr
    size = batch_size or max(1, SCORE_BUDGET_MB * 2**20 // (4 * dataset.item_num))
    batches = [ids[start : start + size] for start in range(0, len(ids), size)]
    if show_progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="recommend", unit="batch", file=sys.stderr)
    item_tokens = _tokens(dataset, dataset.iid_field, range(dataset.item_num))
    model.eval()
    rows = []
    for chunk in batches:
        items, values = _top_of_batch(model, config, histories, chunk, k, exclude_seen)
        users = _tokens(dataset, dataset.uid_field, chunk)
        for user, user_items, user_values in zip(users, items, values):
            for rank, (item, score) in enumerate(zip(user_items, user_values), 1):
                if score == -float("inf"):  # fewer than k items left to recommend
                    break
                cats = categories[item] if categories is not None else None
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


def _chosen_users(dataset, histories, users, history):
    """The internal ids of ``users`` (every user with a history when None); a user
    with no history before the ``history`` cut is an error."""
    if users is None:
        return sorted(u for u, items in histories.items() if items)
    ids = _user_ids(dataset, list(users))
    empty = [u for u in ids if not histories.get(u)]
    if empty:
        tokens = _tokens(dataset, dataset.uid_field, empty[:5])
        raise RecboleAttnError(
            f"{len(empty)} user(s) have no interaction before their {history} "
            f"cut: {tokens}; use --history=all"
        )
    return ids


def _category_tokens(config, dataset):
    """The category field's name and, per item id, its category tokens (None without
    the field)."""
    from recbole_attn.evaluator.collector import (
        category_field_name,
        item_category_table,
    )

    field = category_field_name(config)
    if dataset.item_feat is None or field not in dataset.field2type:
        return field, None
    table = item_category_table(dataset, field)
    names = _tokens(dataset, field, range(dataset.num(field)))
    return field, [[names[c] for c in row if c > 0] for row in table.tolist()]


def _top_of_batch(model, config, histories, chunk, k, exclude_seen):
    """``(items, scores)`` lists ``[B, k]`` of the users ``chunk``: the model's scores
    of their histories, the history's items left out with ``exclude_seen``."""
    import torch

    from recbole.data.interaction import Interaction

    length = model.max_seq_length
    seqs = [histories[u] for u in chunk]
    batch = Interaction(
        {
            model.ITEM_SEQ: _padded([s[-length:] for s in seqs], length),
            model.ITEM_SEQ_LEN: torch.as_tensor([min(len(s), length) for s in seqs]),
            model.USER_ID: torch.as_tensor(chunk),
        }
    ).to(config["device"])
    with torch.no_grad():
        scores = model.full_sort_predict(batch).view(len(chunk), -1).float()
    seen = None
    if exclude_seen:  # every item of the history, not only the model's input
        seen = torch.zeros_like(scores, dtype=torch.bool)
        seen.scatter_(1, _padded(seqs).to(scores.device), True)
    items, values = top_k(scores, k, seen)
    return items.cpu().tolist(), values.cpu().tolist()


def _text(result, fmt):
    """The recommendations as the text of a ``fmt`` file."""
    fields = result["fields"]
    user, item, cat = fields["user"], fields["item"], fields["category"]
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([user, "rank", item, "score"] + ([cat] if cat else []))
        for u, rank, i, score, cats in result["rows"]:
            extra = [" ".join(cats)] if cat else []
            writer.writerow([u, rank, i, f"{score:.6g}"] + extra)
        return out.getvalue()
    records, current = [], None
    for u, rank, i, score, cats in result["rows"]:
        if current is None or current[user] != u:
            current = {user: u, "recommendations": []}
            records.append(current)
        entry = {"rank": rank, item: i, "score": score}
        if cat:
            entry[cat] = cats
        current["recommendations"].append(entry)
    return "".join(json.dumps(record) + "\n" for record in records)


def output_format(output, fmt=None):
    """The format ``output`` is written in: its extension's, or ``fmt`` (``--format``)
    for a name of another extension; an extension of no format written here, or one
    that contradicts ``fmt``, is an error."""
    extension = os.path.splitext(str(output))[1].lower()
    by_name = {f".{f}": f for f in FORMATS}.get(extension)
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


def _named(parts, what, how, leave):
    """The user tokens of ``parts`` (stripped, blanks left out), at least one."""
    named = [u.strip() for u in parts if u.strip()]
    if not named:
        raise RecboleAttnError(
            f"{what} names no user ({how}); leave {leave} to recommend to every user"
        )
    return named


def _user_tokens(text):
    """argparse ``type=`` of ``--users``: comma-separated user tokens, at least one."""
    how = "comma-separated user tokens"
    return _named(text.split(","), f"--users={text!r}", how, "it out")


def add_arguments(parser):
    """The model, the output, the users and what their recommendations follow."""
    from recbole_attn.options.arguments import TrueOrFalse, checked

    parser.add_argument(
        "--model_file",
        required=True,
        help="a checkpoint written by a run (saved/<model>-<time>-<token>.pth), or a "
        "folder: its newest",
    )
    parser.add_argument("--model", help=MODEL_HELP)
    parser.add_argument("--output", required=True, help="the .csv or .jsonl file")
    parser.add_argument(
        "--topk",
        type=checked(
            int, lambda k: k >= 1, "topk must be an integer >= 1, got {value}"
        ),
        default=20,
        help="K (default 20)",
    )
    users = parser.add_mutually_exclusive_group()
    users.add_argument(
        "--users", type=_user_tokens, help="comma-separated user tokens (default: all)"
    )
    users.add_argument("--users_file", help="a file of user tokens, one per line")
    parser.add_argument(
        "--history",
        default="all",
        choices=HISTORIES,
        help="what a recommendation follows: all (default), every known interaction; "
        "test, all but the test item; train, the training interactions",
    )
    parser.add_argument(
        "--exclude_seen",
        action=TrueOrFalse,
        default=True,
        help="exclude the items of the history (default True)",
    )
    parser.add_argument("--format", choices=FORMATS)
    parser.add_argument(
        "--batch_size",
        type=checked(
            int,
            lambda size: size >= 1,
            "batch_size must be an integer >= 1 (users per batch), got {value}; "
            "leave it out for a batch that fits the default memory budget",
        ),
    )
    parser.add_argument("--data_path", help="where the dataset is now, if it moved")
    parser.add_argument("--overwrite", action="store_true")


def run(args):
    """Check the output, recommend, write; returns the exit status."""
    if os.path.isdir(args.output):
        raise RecboleAttnError(
            f"--output {args.output} is a folder; give a file name (.csv or .jsonl)"
        )
    fmt = output_format(args.output, args.format)  # before the model loads
    refuse_existing([args.output], "the recommendations", args.overwrite)
    users = args.users
    if args.users_file:
        lines = read_text(args.users_file, "users file").splitlines()
        what, how = f"users file {args.users_file}", "one user token per line"
        users = _named(lines, what, how, "out --users_file")
    result = recommend(
        args.model_file,
        k=args.topk,
        users=users,
        history=args.history,
        exclude_seen=args.exclude_seen,
        batch_size=args.batch_size,
        config_dict={"data_path": args.data_path} if args.data_path else None,
        show_progress=sys.stderr.isatty(),
        model=args.model,
    )
    write_files(
        {args.output: _text(result, fmt)}, "the recommendations", args.overwrite
    )
    users_done = len({r[0] for r in result["rows"]})
    print(
        f"wrote {args.output}: top-{args.topk} of {users_done} users from "
        f"{result['model_file']} ({result['model']} on {result['dataset']})"
    )
    return 0


if __name__ == "__main__":
    from recbole_attn.options.arguments import command_main

    sys.exit(command_main(sys.modules[__name__], prog=f"python -m {__spec__.name}"))
