"""Batch defaults per accelerator, in a module without TensorFlow: ``train-model --help`` shows them and
``imgrec.training.trainer`` applies them once it knows the accelerator."""
TPU_PER_REPLICA_BATCH = 128  # the Cloud TPU codelab's recommendation
DEFAULT_PER_REPLICA_BATCH = 32
TPU_STEPS_PER_EXECUTION = 32
