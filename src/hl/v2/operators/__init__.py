"""The operators behind paddle.layer, one family per module: dense (data, fc, embedding,
concat, addto, max_id), image (conv, pool, batch norm), sequence (sequence pooling, LSTM, GRU,
context projection) and cost (the cost layers and their evaluators). Each is a
hl.v2.graph.Operator: its ParamSpecs plus ``compute(run, *inputs)`` in hl's differentiable
functions."""
