"""pentegg: Pentary-EGGROLL accelerator."""

__version__ = "0.1.0"
