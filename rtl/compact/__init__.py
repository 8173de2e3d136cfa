"""The compact device: a small RV32I controller running the firmware of
``firmware/`` (the host protocol, the registers and memories, the ES step) for FPGAs too
small for the full Accelerator (the iCE40UP5K). docs/rtl.md, "The compact device"."""
