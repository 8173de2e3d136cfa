/* pentegg compact device firmware: shared declarations.
 *
 * The firmware is the compact device's controller: the host protocol (docs/protocol.md),
 * the accelerator's registers and memories (docs/rtl.md, "Registers", "Commands") and the
 * ES step of docs/spec.md, in integers only. It is compiled twice: for the RV32I core of
 * the compact device (hal_soc.c) and natively for the host (hal_native.c), where it is a
 * fast stand-in device on stdin/stdout for the tests.
 *
 * The build's parameters come from -D definitions (rtl/compact/firmware.py writes them
 * from the same names as the Accelerator's elaboration parameters).
 */
#ifndef PENTEGG_FW_H
#define PENTEGG_FW_H

#include <stdint.h>

/* ---- build parameters (all must be defined by the build) */
#ifndef MAX_LAYERS
#error "MAX_LAYERS is not defined"
#endif
/* MAX_WIDTH RANK QUANTIZED UNIFORM PENTARY LATENT_BITS MAX_POPULATION MAX_BATCH
 * SAMPLE_BYTES LABEL_WORDS BATCH_WORDS MEMBER_BYTES LOGIT_BYTES FRAME_BYTES CLOCK_HZ BAUD
 * LANES SPEC_VERSION_WORD PROTOCOL_VERSION */

#ifndef ENGINE
#define ENGINE 0 /* 1: the device has the datapath of rtl/compact/engine.py */
#endif

#define MAX_FAN (MAX_WIDTH + 1)
#define MAX_PAIRS (MAX_POPULATION / 2)
#define WORDS_PER_LAYER ((MAX_WIDTH * MAX_FAN + 4) / 5)
#define WEIGHT_WORDS (MAX_LAYERS * WORDS_PER_LAYER)
#define LATENT_WORDS (MAX_LAYERS * MAX_WIDTH * MAX_FAN > 2 ? MAX_LAYERS * MAX_WIDTH * MAX_FAN : 2)
#define G_WORDS (MAX_PAIRS > 2 ? MAX_PAIRS : 2)
#define MAX_STEP 65534
#define INIT_STEP 65535

/* ---- the hardware abstraction (hal_soc.c, hal_native.c) */
int hal_rx(void);             /* the next received byte, or -1 when none is waiting */
void hal_rx_wait(void);       /* idle: wait until a byte may have arrived */
void hal_tx(uint8_t byte);    /* send a byte (waits for room) */
void hal_tx_flush(void);      /* a response is complete */
void hal_busy(int busy);      /* the run state, for LEDs and the simulation harness */
void hal_error(int error);    /* the status register's error bit, for an LED */
uint32_t hal_cycles(void);    /* a free-running cycle counter */

/* ---- link.c: the host protocol */
void link_init(void);
void link_poll(void);         /* handle every complete request received so far */

/* ---- accel.c: registers, memories, runs */
enum { R_ID = 0x00, R_STATUS, R_ERROR, R_STEP, R_STEPS, R_POPULATION, R_BATCH, R_N_LAYERS,
       R_SIGMA_SHIFT, R_SHAPING, R_TAU, R_LATENT_SHIFT, R_MARGIN, R_SEED, R_INIT,
       R_BATCH_STRIDE, R_WIDTH0 = 0x10, R_ACT_SHIFT0 = 0x20, R_SHARED = 0x28,
       R_CYCLES = 0x30, R_EVAL_CYCLES, R_SHAPE_CYCLES, R_UPDATE_CYCLES, R_THETA };

int reg_valid(uint32_t addr, int write);   /* a mapped (and, for writes, writable) register */
uint32_t reg_read(uint32_t addr);
void reg_write(uint32_t addr, uint32_t value);
void regs_reset(void);                     /* RESET: every register to its reset value */

int mem_valid(uint32_t sel, uint32_t addr, uint32_t count, int write);
uint32_t mem_read(uint32_t sel, uint32_t addr);
void mem_write(uint32_t sel, uint32_t addr, uint32_t value);

extern const uint32_t info_words[];
extern const unsigned info_count;

void run_request(uint32_t kind);  /* RUN: the run starts once the response is out */
void run_cancel(void);            /* RESET: no run pending, the one running unwinds */
void run_pending(void);           /* main loop: execute a requested run */
extern volatile int g_abort;      /* RESET during a run: unwind at once */
int running(void);

/* ---- spec.c: the arithmetic of docs/spec.md */
uint32_t xs32(uint32_t x);
uint32_t mix32(uint32_t x);
uint32_t run_key(uint32_t seed);
uint32_t stream_state(uint32_t run_key, uint32_t step, uint32_t pair, uint32_t layer, uint32_t ab);
void stream_digits(uint32_t state, uint32_t skip, uint32_t n, int8_t *out);
int32_t rshr(int32_t x, unsigned s);
int pquant(int32_t x, unsigned f);
uint32_t isqrt64(uint64_t n);
int digit_of_code(unsigned code);

/* 0.3 saturation (inline: the update applies it to every weight) */
static inline int32_t sat(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* x times a digit (-2..2): a select and a negation, never a multiplication (the RV32I
 * core has no multiplier; spec 1.2) */
static inline int32_t dmul(int32_t x, int d) {
    int32_t m = d == 2 || d == -2 ? x + x : d ? x : 0;
    return d < 0 ? -m : m;
}

#endif
