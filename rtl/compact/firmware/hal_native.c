/* The host build's hardware: stdin is the received byte stream, stdout the sent one
 * (the native simulated device's pipes, docs/protocol.md "The simulated device"). The
 * cycle counter counts calls, so the counters are deterministic. EOF on stdin ends the
 * process. */
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "fw.h"

static uint8_t in[4096], out[4096];
static size_t in_n, in_at, out_n;
static uint32_t ticks;

static void fill(int block) {
    struct pollfd p = {0, POLLIN, 0};
    if (!block && poll(&p, 1, 0) <= 0) return;
    ssize_t n = read(0, in, sizeof in);
    if (n <= 0) {
        hal_tx_flush();
        exit(0);
    }
    in_n = (size_t)n;
    in_at = 0;
}

int hal_rx(void) {
    if (in_at == in_n) fill(0);
    return in_at < in_n ? in[in_at++] : -1;
}

void hal_rx_wait(void) {
    hal_tx_flush();
    if (in_at == in_n) fill(1);
}

void hal_tx(uint8_t byte) {
    if (out_n == sizeof out) hal_tx_flush();
    out[out_n++] = byte;
}

void hal_tx_flush(void) {
    size_t at = 0;
    while (at < out_n) {
        ssize_t n = write(1, out + at, out_n - at);
        if (n <= 0) exit(1);
        at += (size_t)n;
    }
    out_n = 0;
}

void hal_busy(int busy) { (void)busy; }

void hal_error(int error) { (void)error; }

uint32_t hal_cycles(void) { return ticks++; }
