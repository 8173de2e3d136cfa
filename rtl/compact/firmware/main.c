/* The compact device's main loop: serve the host link, run what RUN started. */
#include "fw.h"

int main(void) {
    regs_reset();
    link_init();
    hal_busy(0);
    for (;;) {
        link_poll();
        if (running()) {
            run_pending();
        } else {
            hal_rx_wait();
        }
    }
}
