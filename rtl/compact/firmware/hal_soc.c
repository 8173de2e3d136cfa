/* The compact device's hardware (rtl/compact/soc.py, its MMIO registers). */
#include "fw.h"

#define MMIO ((volatile uint32_t *)0x20000000u)
enum { MMIO_RX, MMIO_TX, MMIO_CTRL };

static uint32_t ctrl; /* bit 0 busy, bit 1 error: the device's outputs */

int hal_rx(void) {
    uint32_t v = MMIO[MMIO_RX];
    return v & 0x100 ? (int)(v & 0xFF) : -1;
}

void hal_rx_wait(void) {} /* the main loop polls the receive FIFO */

void hal_tx(uint8_t byte) { MMIO[MMIO_TX] = byte; } /* the bus waits while the FIFO is full */

void hal_tx_flush(void) {}

void hal_busy(int busy) {
    ctrl = (ctrl & ~1u) | (busy ? 1u : 0u);
    MMIO[MMIO_CTRL] = ctrl;
}

void hal_error(int error) {
    ctrl = (ctrl & ~2u) | (error ? 2u : 0u);
    MMIO[MMIO_CTRL] = ctrl;
}

uint32_t hal_cycles(void) {
    uint32_t c;
    __asm__ volatile("rdcycle %0" : "=r"(c));
    return c;
}
