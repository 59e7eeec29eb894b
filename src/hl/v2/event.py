"""paddle.event: what trainer.SGD.train tells the event handler, in v2's order:

    BeginPass(p)
        BeginIteration(p, b)  EndForwardBackward(p, b)  EndIteration(p, b, cost, metrics)
        ...
    EndPass(p, metrics)

``EndIteration.cost`` is the batch's cost per sample; ``metrics`` maps evaluator names
('classification_error_evaluator') to their values over the batch (EndPass: over the
pass). ``TestResult`` is what trainer.test returns."""


class WithMetric:
    def __init__(self, metrics):
        self._metrics = dict(metrics or {})

    @property
    def metrics(self):
        return dict(self._metrics)


class BeginPass:
    def __init__(self, pass_id):
        self.pass_id = pass_id


class EndPass(WithMetric):
    def __init__(self, pass_id, metrics=None, gm=None):
        super().__init__(metrics)
        self.pass_id = pass_id
        self.gm = gm


class BeginIteration:
    def __init__(self, pass_id, batch_id):
        self.pass_id = pass_id
        self.batch_id = batch_id


class EndForwardBackward:
    """After the batch's forward and backward, before the parameters change."""

    def __init__(self, pass_id, batch_id, gm=None):
        self.pass_id = pass_id
        self.batch_id = batch_id
        self.gm = gm


class EndIteration(WithMetric):
    def __init__(self, pass_id, batch_id, cost, metrics=None, gm=None):
        super().__init__(metrics)
        self.pass_id = pass_id
        self.batch_id = batch_id
        self.cost = cost
        self.gm = gm


class TestResult(WithMetric):
    __test__ = False  # not a pytest test class

    def __init__(self, cost, metrics=None):
        super().__init__(metrics)
        self.cost = cost


__all__ = ["BeginPass", "EndPass", "BeginIteration", "EndForwardBackward", "EndIteration",
           "TestResult", "WithMetric"]
