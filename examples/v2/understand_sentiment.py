"""A small LSTM sentiment classifier in the manner of the v2 book's understand_sentiment
chapter, on synthetic "reviews": variable-length word-id sequences whose label is carried
by which of two marker words (1: positive, 0: negative) appears among random words.

    python examples/v2/understand_sentiment.py

The network is the chapter's stacked_lstm_net in miniature: embedding, an fc projection
into an lstmemory, max pooling over the steps of both, and a softmax classifier."""
import numpy as np

import hl.v2 as paddle

VOCAB = 100


def synthetic_reviews(n, seed):
    def reader():
        rng = np.random.default_rng(seed)
        for _ in range(n):
            length = int(rng.integers(4, 20))
            words = rng.integers(2, VOCAB, size=length)
            label = int(rng.integers(0, 2))
            words[rng.integers(0, length)] = label  # the marker word
            yield words.tolist(), label
    return reader


def lstm_net(input_dim, class_dim=2, emb_dim=32, hid_dim=32):
    data = paddle.layer.data("word", paddle.data_type.integer_value_sequence(input_dim))
    emb = paddle.layer.embedding(input=data, size=emb_dim)
    fc1 = paddle.layer.fc(input=emb, size=hid_dim * 4, act=paddle.activation.Linear())
    lstm1 = paddle.layer.lstmemory(input=fc1, act=paddle.activation.Relu())
    fc_last = paddle.layer.pooling(input=fc1, pooling_type=paddle.pooling.Max())
    lstm_last = paddle.layer.pooling(input=lstm1, pooling_type=paddle.pooling.Max())
    output = paddle.layer.fc(input=[fc_last, lstm_last], size=class_dim,
                             act=paddle.activation.Softmax())
    lbl = paddle.layer.data("label", paddle.data_type.integer_value(2))
    cost = paddle.layer.classification_cost(input=output, label=lbl)
    return cost, output


def main(num_passes=4):
    paddle.init(use_gpu=False, trainer_count=1, seed=1)
    cost, output = lstm_net(VOCAB)
    parameters = paddle.parameters.create(cost)
    adam = paddle.optimizer.Adam(
        learning_rate=2e-3, regularization=paddle.optimizer.L2Regularization(rate=8e-4),
        model_average=paddle.optimizer.ModelAverage(average_window=0.5))
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters, update_equation=adam)
    errors = []

    def event_handler(event):
        if isinstance(event, paddle.event.EndPass):
            result = trainer.test(reader=paddle.batch(synthetic_reviews(400, 7), 64),
                                  feeding={"word": 0, "label": 1})
            errors.append(result.metrics["classification_error_evaluator"])
            print(f"Test with Pass {event.pass_id}, {result.metrics}")

    trainer.train(
        reader=paddle.batch(paddle.reader.shuffle(synthetic_reviews(2000, 1), buf_size=1000),
                            batch_size=32),
        event_handler=event_handler, num_passes=num_passes,
        feeding={"word": 0, "label": 1})

    reviews = [words for words, _ in synthetic_reviews(5, 123)()]
    probs = paddle.infer(output_layer=output, parameters=parameters,
                         input=[(w,) for w in reviews])
    print("positive probability of 5 new reviews:", np.round(probs[:, 1], 3))
    return {"errors": errors}


if __name__ == "__main__":
    main()
