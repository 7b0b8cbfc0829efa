"""One exception root for everything swarm raises on purpose.

    SwarmError                      root: catch this to catch every swarm failure
    ├── ConfigError                 the settings or the model catalog are invalid
    ├── InputError                  a job's inputs or instruction cannot be used
    │   └── EmptyInputError         one input file is empty
    ├── UnknownModelError           a model or task kind is not in the catalog
    ├── MissingKeyError             a real gateway is configured but no usable key is set
    ├── BrokerUnavailableError      the broker / job store cannot be reached
    ├── GatewayUnavailableError     the LLM gateway cannot be reached or rejects the key
    ├── JobNotFoundError            no job with that id exists in the job store
    ├── JobTimeoutError             waiting for a job's report took longer than allowed
    ├── JobNotFinishedError         a job must have ended (e.g. to be resumed) but still runs
    ├── StackError                  `swarm stack`: a local service did not start or stop
    ├── ProcessError                a supervised local process exited at start or was not ready
    ├── BudgetExceededError         a job's pre-flight cost estimate exceeds its budget
    ├── BackendHeldError            a call not sent: its backend is held (balance, key, outage)
    └── RetryLater                  control flow: admission says wait longer than a task should

Each class's docstring says when it is raised. Messages are one line, meant for a user.
"""

from __future__ import annotations


class SwarmError(Exception):
    """Root of all swarm errors."""


class ConfigError(SwarmError):
    """Raised when a setting or a catalog field is missing or invalid (the message names it)."""


class InputError(SwarmError):
    """Raised when inputs are empty, unreadable or binary, or the instruction is empty."""


class EmptyInputError(InputError):
    """Raised for an input file with nothing but whitespace (``--skip-empty`` skips it)."""


class UnknownModelError(SwarmError):
    """Raised when a model name or task kind is not in the catalog."""


class MissingKeyError(SwarmError):
    """Raised when SWARM_BASE_URL is set but no key (or only a placeholder) is configured."""


class BrokerUnavailableError(SwarmError):
    """Raised when the broker or job store (Redis) does not answer."""


class GatewayUnavailableError(SwarmError):
    """Raised when the gateway is unreachable or answers the start-up check with an error."""


class JobNotFoundError(SwarmError):
    """Raised when a job id is unknown to the job store (never submitted, or expired)."""


class JobTimeoutError(SwarmError):
    """Raised by SwarmHandle.wait() when the report is not ready within the timeout."""


class StackError(SwarmError):
    """Raised by `swarm stack` when a local service fails to start, or a stack is already up."""


class ProcessError(SwarmError):
    """Raised by swarm.procs when a process it started exits before it is ready, or is not
    ready in time; the message quotes the tail of its log."""


class JobNotFinishedError(SwarmError):
    """Raised by SwarmClient.resume() when the job has no final report yet (still running)."""


class BudgetExceededError(SwarmError):
    """Raised by SwarmClient.submit() when the pre-flight estimate exceeds ``budget_usd``
    (and ``force`` is not set); nothing is stored or enqueued."""


class BackendHeldError(SwarmError):
    """A call not sent because its backend is held (swarm.calls.backend_health): its
    balance ran out or its key was refused (until `swarm resume` or the hold's end), its
    daily limit resets later than the call may wait, or its gateway was unreachable for
    longer than the outage window. The node fails with ``kind`` (an ErrorKind's value) and
    the message quotes the provider."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        """The ErrorKind value the node fails with."""


class LeaseLostError(SwarmError):
    """A run's claim on a call lapsed while it could not renew it (its process was frozen
    or cut off from Redis) and another run may be calling for it: this run ends without
    calling (the task adapter ends its task ``Ignore``d). Not an error a user sees."""


class RetryLater(SwarmError):
    """Raised by admission control (swarm.calls.admission.gate) when a call may not start for
    longer than a task should hold its worker slot; the task adapter turns it into
    ``self.retry(countdown=delay_s)``. Not an error a user sees."""

    def __init__(self, delay_s: float, reason: str, *, attempted: bool = False) -> None:
        super().__init__(f"admission: retry in {delay_s:.2f} s ({reason})")
        self.delay_s = delay_s
        """Seconds to wait before the task runs again."""
        self.reason = reason
        """The limit that refused (rpm, tpm, paused, ...)."""
        self.attempted = attempted
        """True when raised after an attempt the gateway answered 429 (the attempt counts)."""
        self.slot: str | None = None
        """The call that goes back to the queue (set by the call loop on the way out)."""
        self.attempts = 0
        """Attempts that call made so far, earlier runs included (set by the call loop)."""
        self.started_at: float | None = None
        """When that call's first run started (epoch seconds; set by the call loop)."""
