"""hl.callbacks: Keras's callbacks for fit / evaluate / predict, one per file."""
from .callback import Callback, CallbackList
from .csv_logger import CSVLogger
from .early_stopping import EarlyStopping
from .history import History
from .lambda_callback import LambdaCallback
from .learning_rate_scheduler import LearningRateScheduler
from .model_checkpoint import ModelCheckpoint
from .progbar_logger import ProgbarLogger
from .reduce_lr_on_plateau import ReduceLROnPlateau
from .terminate_on_nan import TerminateOnNaN

__all__ = ["Callback", "CallbackList", "CSVLogger", "EarlyStopping", "History",
           "LambdaCallback", "LearningRateScheduler", "ModelCheckpoint", "ProgbarLogger",
           "ReduceLROnPlateau", "TerminateOnNaN"]
