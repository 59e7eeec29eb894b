"""A convolutional digit classifier in the manner of the v2 book's recognize_digits chapter,
on the 8x8 handwritten digits shipped with hl (paddle.dataset.mnist reads real MNIST from
a folder: set HL_MNIST_DIR and use dense_vector(784) with height 28 for the real thing).

    python examples/v2/recognize_digits.py [params.tar]

Trains, reports the test error per pass, saves the parameters in v2's tar format, loads
them back with Parameters.from_tar and classifies the test images with paddle.infer."""
import sys

import numpy as np

import hl.v2 as paddle


def convolutional_neural_network(img):
    conv_pool_1 = paddle.networks.simple_img_conv_pool(
        input=img, filter_size=3, num_filters=20, num_channel=1, conv_padding=1,
        pool_size=2, pool_stride=2, act=paddle.activation.Relu())
    conv_pool_2 = paddle.networks.simple_img_conv_pool(
        input=conv_pool_1, filter_size=3, num_filters=50, num_channel=20, conv_padding=1,
        pool_size=2, pool_stride=2, act=paddle.activation.Relu())
    return paddle.layer.fc(input=conv_pool_2, size=10, act=paddle.activation.Softmax())


def main(num_passes=8, out="recognize_digits_params.tar"):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)

    images = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64),
                               height=8, width=8)
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    predict = convolutional_neural_network(images)
    cost = paddle.layer.classification_cost(input=predict, label=label)

    parameters = paddle.parameters.create(cost)
    optimizer = paddle.optimizer.Momentum(
        learning_rate=0.1 / 64.0, momentum=0.9,
        regularization=paddle.optimizer.L2Regularization(rate=0.0005 * 64))
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=optimizer)
    errors = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndIteration) and event.batch_id % 10 == 0:
            print(f"Pass {event.pass_id}, Batch {event.batch_id}, Cost {event.cost:.4f}, "
                  f"{event.metrics}")
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(reader=paddle.batch(paddle.dataset.digits.test(),
                                                      batch_size=128))
            errors.append(result.metrics["classification_error_evaluator"])
            print(f"Test with Pass {event.pass_id}, Cost {result.cost:.4f}, "
                  f"{result.metrics}")

    trainer.train(
        reader=paddle.batch(paddle.reader.shuffle(paddle.dataset.digits.train(),
                                                  buf_size=2000), batch_size=64),
        event_handler=event_handler, num_passes=num_passes)

    with open(out, "wb") as f:
        trainer.save_parameter_to_tar(f)
    with open(out, "rb") as f:
        loaded = paddle.parameters.Parameters.from_tar(f)

    test = list(paddle.dataset.digits.test()())
    probs = paddle.infer(output_layer=predict, parameters=loaded,
                         input=[(pixels,) for pixels, _ in test])
    accuracy = float(np.mean(probs.argmax(axis=1) == np.array([y for _, y in test])))
    print(f"test accuracy from the saved parameters: {accuracy:.3f}")
    return {"errors": errors, "accuracy": accuracy}


if __name__ == "__main__":
    main(out=sys.argv[1] if len(sys.argv) > 1 else "recognize_digits_params.tar")
