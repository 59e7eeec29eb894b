"""paddle.pooling: how img_pool and pooling (over a sequence) reduce."""


class BasePoolingType:
    name = ""

    def __repr__(self):
        return f"paddle.pooling.{type(self).__name__}()"


class Max(BasePoolingType):
    name = "max"


class Avg(BasePoolingType):
    """The mean (over the window, or over a sequence's steps)."""
    name = "average"


class Sum(BasePoolingType):
    """The sum over a sequence's steps (sequence pooling only)."""
    name = "sum"


MaxPooling, AvgPooling, SumPooling = Max, Avg, Sum
CudnnMax, CudnnAvg = Max, Avg

__all__ = ["BasePoolingType", "Max", "Avg", "Sum"]
