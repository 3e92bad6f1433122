"""Ray Tune's TPE (``HyperOptSearch``) told the trials a stopped search finished, so that
its continuation suggests from them as the uninterrupted search would have (Ray's own
way, ``Tuner.restore``, unpickles the experiment's files; ``HyperOptSearch`` takes no
evaluated points)."""

import hyperopt
from hyperopt.fmin import generate_trials_to_calculate
from ray.tune.search.hyperopt import HyperOptSearch


class InformedTPE(HyperOptSearch):
    """``HyperOptSearch`` whose history starts with ``evaluated``: ``(params, score)``
    pairs, counted among its random start-up trials and never suggested again."""

    def __init__(self, *args, evaluated=(), **kwargs):
        self._evaluated = [(dict(params), float(score)) for params, score in evaluated]
        super().__init__(*args, **kwargs)

    def _setup_hyperopt(self):
        super()._setup_hyperopt()
        if not self._evaluated:
            return
        points = [dict(params) for params, _ in self._evaluated]
        for config in points:  # hyperopt's choice values are indices
            self._convert_categories_to_indices(config)
        trials = generate_trials_to_calculate(points)
        for doc, (_, score) in zip(trials._dynamic_trials, self._evaluated):
            doc["state"] = hyperopt.JOB_STATE_DONE
            doc["result"] = {"loss": self.metric_op * score, "status": "ok"}
        trials.refresh()
        self._hpopt_trials = trials
        self._points_to_evaluate = 0
