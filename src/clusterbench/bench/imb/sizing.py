"""IMB's message sizes and repetitions (also the ping-pong kernel's, which imitates IMB).

At most ITER repetitions per size, and under the dynamic policy no more than OVERALL_VOL / size,
so large messages are repeated fewer times. `exchange_seconds` is the first guess of a sweep's
duration, for plans and ETAs of IMB and of the ping-pong kernel alike.
"""

from __future__ import annotations

from clusterbench.bench.native import GUESS_MEMORY_BYTES_S

IMB_OVERALL_VOLUME = 40 * 2**20


def message_sizes(min_log2: int, max_log2: int) -> list[int]:
    """0 and 2^min_log2 .. 2^max_log2 bytes, IMB's -msglog convention."""
    return [0, *(2**k for k in range(min_log2, max_log2 + 1))]


def repetitions(size: int, iterations: int, dynamic: bool = True, volume: int = IMB_OVERALL_VOLUME) -> int:
    """Repetitions of one message size under IMB's policy (or `iterations` with the policy off)."""
    if dynamic and size:
        return min(iterations, max(1, volume // size))
    return iterations


GUESS_LATENCY_S = 5e-6  # one message, generous for shared memory and TCP alike


def exchange_seconds(min_log2: int, max_log2: int, iterations: int, dynamic: bool,
                     volume: int = IMB_OVERALL_VOLUME) -> float:
    """A first guess of a ping-pong sweep's duration: two messages per repetition, plus warm-up."""
    return sum(2 * (repetitions(size, iterations, dynamic, volume) + 1)
               * (GUESS_LATENCY_S + size / GUESS_MEMORY_BYTES_S)
               for size in message_sizes(min_log2, max_log2))
