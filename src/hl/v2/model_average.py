"""v2's ModelAverage window: which recent parameter values the averaged model is made of.
The sums themselves live with the optimiser (hl/v2/_rule_base.py)."""

_MAX_SUM_TERMS = 16384  # v2 moved sum1 into sum2 this often, to keep float32 sums precise


class AverageWindow:
    """v2's model-average window (legacy paddle/parameter/AverageOptimizer), counted in
    batches. The averaged parameter is (sum1 + sum2 + sum3) / (num_accumulates +
    old_num_accumulates), where sum1 + sum2 add the values after each batch of the current
    window and sum3 holds the previous window's. The window restarts (the current sums
    become the old ones) at the end of a batch when num_accumulates >= min_window and
    num_accumulates >= min(max_window, int(num_updates * average_window)). min_window starts
    at min(10000, max_average_window); at the end of each pass it becomes min(min_window,
    num_updates), and without max_average_window, max_window becomes the number of batches
    of that pass."""

    _COUNTERS = ("num_updates", "prev_num_updates", "num_accumulates", "old_num_accumulates",
                 "min_window", "max_window")

    def __init__(self, average_window, max_average_window=None):
        self.average_window = float(average_window)
        self.fixed_max = max_average_window is not None
        self.max_window = int(max_average_window) if self.fixed_max else 2 ** 63 - 1
        self.min_window = min(10000, self.max_window)
        self.num_updates = self.prev_num_updates = 0
        self.num_accumulates = self.old_num_accumulates = 0

    def start_batch(self):
        self.num_updates += 1
        self.num_accumulates += 1

    def too_long(self):
        return (self.num_accumulates >= self.min_window and
                self.num_accumulates >= min(self.max_window,
                                            int(self.num_updates * self.average_window)))

    def move_sum1(self):
        return self.num_updates % _MAX_SUM_TERMS == 0

    def finish_batch(self):
        if self.too_long():
            self.old_num_accumulates = self.num_accumulates
            self.num_accumulates = 0

    def finish_pass(self):
        if not self.fixed_max and self.num_updates > self.prev_num_updates:
            self.max_window = self.num_updates - self.prev_num_updates
            self.prev_num_updates = self.num_updates
        self.min_window = min(self.min_window, self.num_updates)

    @property
    def count(self):
        return self.num_accumulates + self.old_num_accumulates

    def get_states(self):
        return {k: getattr(self, k) for k in self._COUNTERS}

    def set_states(self, states):
        for k in self._COUNTERS:
            setattr(self, k, int(states[k]))
