"""Linear regression in the manner of the v2 book's fit_a_line chapter, on the diabetes
data shipped with hl (10 features, disease progression a year later).

    python examples/v2/fit_a_line.py

Runs unchanged on PaddlePaddle v2 but for the import and the data set (v2's uci_housing
needs a download; paddle.dataset.uci_housing.train(path) reads the file if you have it)."""
import sys

import numpy as np

import hl.v2 as paddle


def main(num_passes=40, out=None):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)

    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(10))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    y_predict = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    cost = paddle.layer.square_error_cost(input=y_predict, label=y)

    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Momentum(momentum=0, learning_rate=1e-3)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=optimizer)
    feeding = {"x": 0, "y": 1}
    history = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(
                reader=paddle.batch(paddle.dataset.diabetes.test(standardize_target=True),
                                    batch_size=32),
                feeding=feeding)
            history.append(result.cost)
            if event.pass_id % 10 == 0 or event.pass_id == num_passes - 1:
                print(f"Pass {event.pass_id}, test cost {result.cost:.4f}")

    trainer.train(
        reader=paddle.batch(
            paddle.reader.shuffle(paddle.dataset.diabetes.train(standardize_target=True),
                                  buf_size=500),
            batch_size=16),
        feeding=feeding, event_handler=event_handler, num_passes=num_passes)

    if out is not None:
        with open(out, "wb") as f:
            trainer.save_parameter_to_tar(f)

    test = list(paddle.dataset.diabetes.test(standardize_target=True)())
    predicted = paddle.infer(output_layer=y_predict, parameters=parameters,
                             input=[(features,) for features, _ in test])
    target = np.array([t for _, t in test]).reshape(-1)
    r2 = 1.0 - np.sum((predicted.reshape(-1) - target) ** 2) / np.sum(
        (target - target.mean()) ** 2)
    print(f"test R^2 {r2:.3f}")
    return {"history": history, "r2": r2, "parameters": parameters}


if __name__ == "__main__":
    main(out=sys.argv[1] if len(sys.argv) > 1 else None)
