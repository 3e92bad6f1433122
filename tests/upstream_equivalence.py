"""Run by tests/test_upstream.py in a child process whose ``recbole`` package is a copy
with the export written into it: every exported class, given our model's weights, gives
our model's ``full_sort_predict`` and ``predict`` (float64) and, under the same seed,
one training epoch under RecBole's ``Trainer`` on RecBole's prefix samples (our model in
``training_mode: last_position``, RecBole's negatives where the loss samples them) gives
the same loss and the same weights.

    python upstream_equivalence.py DATA_PATH CASES_JSON
"""

import importlib
import json
import sys

import torch

from recbole_attn.engine.quick_start import build


def main(data_path, cases):
    report = []
    from recbole.trainer import Trainer
    from recbole.utils import init_seed

    for name, options in cases:
        config, ours, _, (train, _, test) = build(
            name, "tiny", config_dict={"data_path": data_path, **options}
        )
        theirs_config = config
        module = importlib.import_module(
            f"recbole.model.sequential_recommender.{name.lower()}"
        )
        theirs = getattr(module, name)(config, train.dataset)
        theirs.load_state_dict(ours.state_dict())
        ours, theirs = ours.double(), theirs.double()

        batch = next(iter(test))[0]
        ours.eval(), theirs.eval()
        with torch.no_grad():
            scores = [m.full_sort_predict(batch) for m in (ours, theirs)]
            some = (
                [m.predict(batch) for m in (ours, theirs)]
                if "item_id" in batch
                else None
            )
        losses, weights = [], []
        for model in (ours, theirs):
            # the same batches, negatives and dropout for both: every stream reset
            init_seed(config["seed"], config["reproducibility"])
            train.generator.manual_seed(config["seed"])
            trainer = Trainer(theirs_config, model)
            losses.append(trainer._train_epoch(train, 0, show_progress=False))
            weights.append(model.state_dict())
        report.append(
            {
                "model": name,
                "options": options,
                "file": module.__file__,
                "full_sort_max_diff": float((scores[0] - scores[1]).abs().max()),
                "predict_max_diff": (
                    float((some[0] - some[1]).abs().max()) if some else 0.0
                ),
                "predict_checked": some is not None,
                "loss": [float(sum(l) if isinstance(l, tuple) else l) for l in losses],
                "weights_max_diff": max(
                    float((weights[0][k] - weights[1][k]).abs().max())
                    for k in weights[0]
                ),
                "scores_finite": bool(torch.isfinite(scores[0]).all()),
            }
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
