"""Control of the accelerator: register file, command decoder, step controller."""

from .command import CommandDecoder, Op
from .registers import ID_VALUE, RegisterFile, register_map

__all__ = ["ID_VALUE", "CommandDecoder", "Op", "RegisterFile", "register_map"]
