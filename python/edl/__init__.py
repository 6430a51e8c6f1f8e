"""edl: stop-free elastic training under an edl worker (live mode).

The PyTorch API is in edl.torch; edl.protocol is the worker protocol.
"""

__version__ = "0.1.0"
