"""The root error type. Every error delaybridge raises on purpose derives from it."""


class DelayBridgeError(Exception):
    """Root of delaybridge's errors: catch this to catch ours and nothing else."""


class ConfigError(DelayBridgeError):
    """A setting is missing, malformed or incompatible; the message names the setting."""


class IntegrityError(DelayBridgeError):
    """On-disk data failed a check; the message names the file and the byte offset."""


class KafkaError(DelayBridgeError):
    """A Kafka operation failed; wraps the librdkafka error and keeps its code."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message if code is None else f"{message} [{code}]")
        self.code = code
