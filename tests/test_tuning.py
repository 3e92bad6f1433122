"""Ray Tune search: per-epoch validation reports, validation-based selection (issue 2 §1.4)."""

import pytest

from recbole_attn.errors import RecboleAttnError
from recbole_attn.tuning import parse_params_file, tune_model


def test_params_file_parsing(tmp_path):
    from ray.tune.search.sample import Categorical, Float

    path = tmp_path / "hyper.test"
    path.write_text(
        "learning_rate loguniform -8,0\n"
        "hidden_size choice [16,32]\n"
        "# a comment\n"
        "hidden_dropout_prob uniform 0.1,0.5\n"
    )
    space = parse_params_file(path)
    assert isinstance(space["hidden_size"], Categorical)
    assert space["hidden_size"].categories == [16, 32]
    lr = space["learning_rate"]
    assert isinstance(lr, Float)
    assert lr.lower == pytest.approx(0.000335462627903) and lr.upper == 1.0
    bad = tmp_path / "bad.test"
    bad.write_text("learning_rate between 1,2\n")
    with pytest.raises(RecboleAttnError, match="line 1"):
        parse_params_file(bad)


@pytest.mark.slow
def test_tune_selects_on_validation_and_tests_once(tiny_config, tmp_path):
    params = tmp_path / "hyper.test"
    params.write_text("hidden_size choice [8,16]\n")
    config = {**tiny_config, "epochs": 2, "valid_metric": "NDCG@10"}
    config.pop("hidden_size")
    result = tune_model(
        "SASRecAP",
        "tiny",
        params,
        config_dict=config,
        num_samples=2,
        storage_path=str(tmp_path / "ray"),
        num_cpus=2,
    )
    trials = result["trials"]
    assert len(trials) == 2
    # every trial reported after every epoch (schedulers can stop it early)
    assert all(t["epochs_reported"] == 2 for t in trials)
    best = max(trials, key=lambda t: t["best_valid_score"])
    assert result["best_params"] == best["params"]
    # the reported validation score is the one of the selected, reloaded model
    assert result["best_valid_result"]["ndcg@10"] == pytest.approx(
        best["best_valid_score"], abs=1e-4
    )
    assert set(result["test_result"]) >= {"recall@5", "ndcg@10"}
