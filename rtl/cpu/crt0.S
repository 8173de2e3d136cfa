/* Start-up code of RV32Core firmware (linked first by rtl/cpu/toolchain.py).
 *
 * sp = _stack_top; copy .data from its load image in ROM (_data_load) to RAM
 * (_data_start .. _data_end); zero .bss (_bss_start .. _bss_end); call main; then
 * ebreak, which halts the core with main's return value in a0. The section-boundary
 * symbols come from the generated linker script; all are word aligned. */

    .section .text.start, "ax"
    .globl _start
_start:
    la      sp, _stack_top
    la      a0, _data_start
    la      a1, _data_end
    la      a2, _data_load
1:  bgeu    a0, a1, 2f
    lw      t0, 0(a2)
    sw      t0, 0(a0)
    addi    a0, a0, 4
    addi    a2, a2, 4
    j       1b
2:  la      a0, _bss_start
    la      a1, _bss_end
3:  bgeu    a0, a1, 4f
    sw      zero, 0(a0)
    addi    a0, a0, 4
    j       3b
4:  call    main
5:  ebreak
    j       5b
