/* The accelerator's registers, memories and runs (docs/rtl.md, "Registers", "Commands",
 * "A step"), and the ES step of docs/spec.md sections 5-10 in integers only.
 *
 * The same behaviour as the RTL Accelerator as the host sees it: the register map of
 * rtl/control/registers.py (writes keep each register's low bits), the memories of
 * Accelerator.host_memories (each keeps its width; signed ones read back sign-extended),
 * the controller's run kinds and error flags (rtl/control/controller.py and the
 * evaluator's, rtl/evaluator/sequencer.py). */
#include "fw.h"

/* ------------------------------------------------------------------ widths */
static unsigned bits_for_sym(uint32_t b) { /* two's complement bits holding -b..b */
    unsigned n = 1;
    while (((uint32_t)1 << (n - 1)) - 1 < b) n++;
    return n;
}
#define SCORE_BOUND (254u * MAX_BATCH)
#define G_MAX (2u * (MAX_POPULATION - 1))
#define VMAX ((1 << (LATENT_BITS - 1)) - 1)

static int32_t sign_extend(uint32_t v, unsigned bits) {
    uint32_t m = (uint32_t)1 << (bits - 1);
    v &= (m << 1) - 1;
    return (int32_t)((v ^ m) - m);
}

#if !PENTARY
static unsigned q_max(void) { /* the largest q with 3 * 2^q <= 2 * Vmax (spec 9.1) */
    unsigned q = 0;
    while ((3u << (q + 1)) <= 2u * VMAX) q++;
    return q;
}
#endif

/* ------------------------------------------------------------------ registers */
#define N_REGS (R_THETA + 1)
static uint32_t regs[N_REGS];
static uint8_t reg_bits[N_REGS];  /* 0: unmapped */
static uint8_t reg_rw[N_REGS];
static int busy_flag;
volatile int g_abort;

static void reg_def(unsigned addr, unsigned bits, int rw, uint32_t reset) {
    reg_bits[addr] = (uint8_t)bits;
    reg_rw[addr] = (uint8_t)rw;
    regs[addr] = reset;
}

void regs_reset(void) {
    reg_def(R_ID, 32, 0, 0x50454747u);
    reg_def(R_STATUS, 4, 0, 0);
    reg_def(R_ERROR, 16, 0, 0);
    reg_def(R_STEP, 16, 1, 0);
    reg_def(R_STEPS, 16, 1, 1);
    reg_def(R_POPULATION, 13, 1, 2);
    reg_def(R_BATCH, 16, 1, 1);
    reg_def(R_N_LAYERS, 4, 1, 1);
    reg_def(R_SIGMA_SHIFT, 4, 1, 1);
    reg_def(R_SHAPING, 1, 1, 0);
    reg_def(R_TAU, 12, 1, 16);
    reg_def(R_LATENT_SHIFT, 4, 1, 3);
    reg_def(R_MARGIN, 8, 1, 32);
    reg_def(R_SEED, 32, 1, 0);
    reg_def(R_INIT, 1, 1, 0);
    reg_def(R_BATCH_STRIDE, 16, 1, 0);
    for (unsigned i = 0; i <= MAX_LAYERS; i++) reg_def(R_WIDTH0 + i, 13, 1, 1);
    for (unsigned l = 0; l < MAX_LAYERS; l++) reg_def(R_ACT_SHIFT0 + l, 4, 1, 0);
    reg_def(R_SHARED, 1, 1, 1);
    for (unsigned a = R_CYCLES; a <= R_THETA; a++) reg_def(a, 32, 0, 0);
    hal_error(0);
}

int reg_valid(uint32_t addr, int write) {
    return addr < N_REGS && reg_bits[addr] && (!write || reg_rw[addr]);
}

uint32_t reg_read(uint32_t addr) {
    if (addr == R_STATUS) return (uint32_t)busy_flag | (regs[R_ERROR] != 0) << 1;
    return regs[addr];
}

void reg_write(uint32_t addr, uint32_t value) {
    unsigned b = reg_bits[addr];
    regs[addr] = b == 32 ? value : value & (((uint32_t)1 << b) - 1);
}

int running(void) { return busy_flag; }

/* ------------------------------------------------------------------ memories */
#if ENGINE
/* the datapath (rtl/compact/engine.py) holds the weights; its bus, word addresses:
 * bits 25:24 of the word address select the weights, the activations, the registers */
#define EW ((volatile uint32_t *)0x30000000u)
#define EX ((volatile uint32_t *)0x34000000u)
#define ER ((volatile uint32_t *)0x38000000u)
#define EZ ((volatile int32_t *)0x3C000000u) /* the votes of VOTE's block of rows */
enum { E_CMD, E_X0, E_G, E_ZROW, E_NL, E_PSHIFT, E_ZROWS, E_ACT = 16, E_WBASE = 24, E_WIDTH = 32 };
enum { OP_NOISE = 1, OP_BASE, OP_LAYER, OP_VOTE };
/* shared samples the engine holds at once (CMD bits 9:8, the slot): slot s's input in
 * bank 3 * (s & 1) of the activations, low bytes for s < 2, high bytes else */
enum { SLOTS = 4, SLOT_SHIFT = 8 };
static inline uint16_t w_get(uint32_t i) { return (uint16_t)EW[i]; }
static inline void w_set(uint32_t i, uint16_t v) { EW[i] = v; }
#else
static uint16_t mem_weights[WEIGHT_WORDS];
static inline uint16_t w_get(uint32_t i) { return mem_weights[i]; }
static inline void w_set(uint32_t i, uint16_t v) { mem_weights[i] = v; }
#endif
#if !PENTARY
static int8_t mem_latent[LATENT_WORDS];
#endif
static uint8_t mem_samples[SAMPLE_BYTES];
static uint16_t mem_labels[LABEL_WORDS];
static uint16_t mem_batch[BATCH_WORDS];
static int32_t mem_scores[MAX_POPULATION];
static int16_t mem_g[G_WORDS];
static uint8_t mem_member_x[MEMBER_BYTES];
static int8_t mem_logits[LOGIT_BYTES];

enum {
    M_WEIGHTS, M_LATENT, M_SAMPLES, M_LABELS, M_BATCH, M_SCORES, M_G, M_MEMBER_X, M_LOGITS,
    /* several elements a word, the first in the low bits (docs/protocol.md, "Packed
     * words"): write-only, four bytes a word; read-only, two weight words or four latent
     * values or logits (their two's complement bytes) a word */
    M_SAMPLES_PACKED, M_MEMBER_X_PACKED, M_WEIGHTS_PACKED, M_LATENT_PACKED, M_LOGITS_PACKED,
};

int mem_valid(uint32_t sel, uint32_t addr, uint32_t count, int write) {
    uint32_t depth;
    switch (sel) {
    case M_WEIGHTS: depth = WEIGHT_WORDS; break;
#if !PENTARY
    case M_LATENT: depth = LATENT_WORDS; break;
#endif
    case M_SAMPLES: depth = SAMPLE_BYTES; break;
    case M_LABELS: depth = LABEL_WORDS; break;
    case M_BATCH: depth = BATCH_WORDS; break;
    case M_SCORES: depth = MAX_POPULATION; break;
    case M_G: depth = write ? 0 : G_WORDS; break;
    case M_MEMBER_X: depth = MEMBER_BYTES; break;
    case M_LOGITS: depth = write ? 0 : LOGIT_BYTES; break;
    case M_SAMPLES_PACKED: depth = write ? SAMPLE_BYTES / 4 : 0; break;
    case M_MEMBER_X_PACKED: depth = write ? MEMBER_BYTES / 4 : 0; break;
    case M_WEIGHTS_PACKED: depth = write ? 0 : WEIGHT_WORDS / 2; break;
    case M_LOGITS_PACKED: depth = write ? 0 : LOGIT_BYTES / 4; break;
#if !PENTARY
    case M_LATENT_PACKED: depth = write ? 0 : LATENT_WORDS / 4; break;
#endif
    default: depth = 0;
    }
    return count != 0 && (uint64_t)addr + count <= depth;
}

uint32_t mem_read(uint32_t sel, uint32_t addr) {
    switch (sel) {
    case M_WEIGHTS: return w_get(addr);
#if !PENTARY
    case M_LATENT: return (uint32_t)(int32_t)mem_latent[addr];
#endif
    case M_SAMPLES: return mem_samples[addr];
    case M_LABELS: return mem_labels[addr];
    case M_BATCH: return mem_batch[addr];
    case M_SCORES: return (uint32_t)mem_scores[addr];
    case M_G: return (uint32_t)(int32_t)mem_g[addr];
    case M_MEMBER_X: return mem_member_x[addr];
    case M_LOGITS: return (uint32_t)(int32_t)mem_logits[addr];
    case M_WEIGHTS_PACKED: return w_get(2 * addr) | (uint32_t)w_get(2 * addr + 1) << 16;
    case M_LOGITS_PACKED: {
        uint32_t v = 0;
        for (int j = 0; j < 4; j++) v |= (uint32_t)(uint8_t)mem_logits[4 * addr + j] << 8 * j;
        return v;
    }
#if !PENTARY
    case M_LATENT_PACKED: {
        uint32_t v = 0;
        for (int j = 0; j < 4; j++) v |= (uint32_t)(uint8_t)mem_latent[4 * addr + j] << 8 * j;
        return v;
    }
#endif
    }
    return 0;
}

void mem_write(uint32_t sel, uint32_t addr, uint32_t v) {
    switch (sel) {
    case M_WEIGHTS: w_set(addr, (uint16_t)v); break;
#if !PENTARY
    case M_LATENT: mem_latent[addr] = (int8_t)sign_extend(v, LATENT_BITS); break;
#endif
    case M_SAMPLES: mem_samples[addr] = (uint8_t)v; break;
    case M_LABELS: mem_labels[addr] = (uint16_t)v; break;
    case M_BATCH: mem_batch[addr] = (uint16_t)v; break;
    case M_SCORES: mem_scores[addr] = sign_extend(v, bits_for_sym(SCORE_BOUND)); break;
    case M_MEMBER_X: mem_member_x[addr] = (uint8_t)v; break;
    case M_SAMPLES_PACKED:
        for (int j = 0; j < 4; j++) mem_samples[4 * addr + j] = (uint8_t)(v >> 8 * j);
        break;
    case M_MEMBER_X_PACKED:
        for (int j = 0; j < 4; j++) mem_member_x[4 * addr + j] = (uint8_t)(v >> 8 * j);
        break;
    }
}

/* ------------------------------------------------------------------ INFO */
const uint32_t info_words[] = {
    0x50454747u,            /* magic */
    PROTOCOL_VERSION,       /* protocol */
    SPEC_VERSION_WORD,      /* spec, major << 16 | minor */
    LANES, MAX_LAYERS, MAX_WIDTH, RANK,
    QUANTIZED, UNIFORM, PENTARY, LATENT_BITS,
    MAX_POPULATION, MAX_BATCH, SAMPLE_BYTES, LABEL_WORDS, BATCH_WORDS,
    FRAME_BYTES, CLOCK_HZ, BAUD, MEMBER_BYTES, LOGIT_BYTES,
};
const unsigned info_count = sizeof info_words / sizeof info_words[0];

/* ------------------------------------------------------------------ weights */
/* Weight digit i of the layer whose packed words start at word `base` (spec 1.3). A
 * cursor walks a row: word index and digit position, no division per digit. */
typedef struct { uint32_t word; unsigned pos; } wcursor;

static wcursor wc_at(uint32_t base, uint32_t index) {
    wcursor c = {base + index / 5, index % 5};
    return c;
}

static int wc_next(wcursor *c) {
    int d = digit_of_code(w_get(c->word) >> (3 * c->pos));
    if (++c->pos == 5) {
        c->pos = 0;
        c->word++;
    }
    return d;
}

static void wc_put(wcursor *c, int d) {
    unsigned sh = 3 * c->pos;
    w_set(c->word, (uint16_t)((w_get(c->word) & ~(7u << sh)) | ((unsigned)d & 7) << sh));
    if (++c->pos == 5) {
        c->pos = 0;
        c->word++;
    }
}

/* ------------------------------------------------------------------ run state */
enum { K_TRAIN, K_EVAL, K_UPDATE, K_INIT };
static int pending = -1;

static unsigned n_layers(void) { return regs[R_N_LAYERS]; }
static unsigned width(unsigned i) { return regs[R_WIDTH0 + i]; }
static uint32_t layer_base[MAX_LAYERS + 1];  /* first weight word of each layer */
static uint32_t latent_base[MAX_LAYERS + 1]; /* first latent word of each layer */

static void layout(void) {
    layer_base[0] = latent_base[0] = 0;
    for (unsigned l = 0; l < n_layers(); l++) {
        uint32_t n = width(l + 1) * (width(l) + 1);
        layer_base[l + 1] = layer_base[l] + (n + 4) / 5;
        latent_base[l + 1] = latent_base[l] + n;
    }
}

/* the link is served between pieces of work; a RESET sets g_abort */
static int service(void) {
    link_poll();
    return g_abort;
}

static void set_error(unsigned bit) { regs[R_ERROR] |= (uint32_t)1 << bit; }

/* the registers hold a configuration this build can run (the Accelerator's params_ok) */
static int params_ok(void) {
    unsigned nl = n_layers();
    if (nl < 1 || nl > MAX_LAYERS) return 0;
    for (unsigned i = 0; i <= MAX_LAYERS; i++)
        if ((i == 0 || i <= nl) && (width(i) < 1 || width(i) > MAX_WIDTH)) return 0;
    if (regs[R_POPULATION] > MAX_POPULATION) return 0;
#if !PENTARY
    if (regs[R_LATENT_SHIFT] > q_max()) return 0;
#endif
    return 1;
}

static int members_ok(void) {
    if (regs[R_SHARED]) return 1;
    uint64_t mb = (uint64_t)regs[R_POPULATION] * regs[R_BATCH];
    return mb * width(0) <= MEMBER_BYTES && mb * width(n_layers()) <= LOGIT_BYTES;
}

/* ------------------------------------------------------------------ EVAL (spec 5, 6, 7.1) */
#if !ENGINE
static int8_t noise_a[MAX_LAYERS][MAX_WIDTH * RANK]; /* A_j (out x r) of each layer */
static int8_t noise_b[MAX_LAYERS][MAX_FAN * RANK];   /* B_j (fan x r) */
#endif
static unsigned rank_shift(void) { return RANK == 1 ? 0 : RANK == 4 ? 1 : RANK == 16 ? 2 : 3; }

#if !ENGINE /* the forward pass in software (the datapath's, without it) */
static int32_t base0[MAX_WIDTH];                     /* x . W_0^T of the shared sample */
static int32_t pert0[MAX_WIDTH];                     /* the pair's layer-0 term (shared) */
static int8_t act[2][MAX_FAN];                       /* a member's layer input, output */

static void make_noise(uint32_t key, uint32_t step, uint32_t pair) {
    for (unsigned l = 0; l < n_layers(); l++) {
        stream_digits(stream_state(key, step, pair, l, 0), 0, width(l + 1) * RANK, noise_a[l]);
        stream_digits(stream_state(key, step, pair, l, 1), 0, (width(l) + 1) * RANK, noise_b[l]);
    }
}

/* x . W_l[o]^T with the bias input (x holds width(l) inputs) */
static int32_t row_dot(unsigned l, unsigned o, const int8_t *x) {
    unsigned fan = width(l) + 1;
    wcursor c = wc_at(layer_base[l], o * fan);
    int32_t acc = 0;
    for (unsigned k = 0; k + 1 < fan; k++) acc += dmul(x[k], wc_next(&c));
    return acc + dmul(127, wc_next(&c));
}

/* the perturbation term of layer l for input x, before its sign, for every output:
 * low-rank rshr((x.B).A^T, k) (spec 6.2), quantized x.E^T (6.1) */
static void perturbation(unsigned l, const int8_t *x, int32_t *out) {
    unsigned n_out = width(l + 1), fan = width(l) + 1;
    const int8_t *a = noise_a[l], *b = noise_b[l];
#if QUANTIZED
    unsigned f = rank_shift() + regs[R_SIGMA_SHIFT];
    for (unsigned o = 0; o < n_out; o++) {
        int32_t acc = 0;
        for (unsigned k = 0; k < fan; k++) {
            int32_t d = 0;
            for (unsigned c = 0; c < RANK; c++) d += dmul(a[o * RANK + c], b[k * RANK + c]);
            acc += dmul(k + 1 < fan ? x[k] : 127, pquant(d, f));
        }
        out[o] = acc;
    }
#else
    int32_t xb[RANK];
    for (unsigned c = 0; c < RANK; c++) xb[c] = 0;
    for (unsigned k = 0; k < fan; k++) {
        int32_t xk = k + 1 < fan ? x[k] : 127;
        for (unsigned c = 0; c < RANK; c++) xb[c] += dmul(xk, b[k * RANK + c]);
    }
    unsigned s = rank_shift() + regs[R_SIGMA_SHIFT];
    for (unsigned o = 0; o < n_out; o++) {
        int32_t p = 0;
        for (unsigned c = 0; c < RANK; c++) p += dmul(xb[c], a[o * RANK + c]);
        out[o] = rshr(p, s);
    }
#endif
}

static int8_t activate(int32_t acc, unsigned l) {
    int32_t y = rshr(acc, regs[R_ACT_SHIFT0 + l]);
    return (int8_t)(l + 1 == n_layers() ? sat(y, -127, 127) : sat(y, 0, 127));
}

/* member m's logits for input x0 (layer 0 from base0 and pert0 when shared) into act[] */
static const int8_t *member_forward(int sign, const int8_t *x0, int shared) {
    static int32_t pert[MAX_WIDTH];
    const int8_t *x = x0;
    int8_t *h = act[0];
    for (unsigned l = 0; l < n_layers(); l++) {
        unsigned n_out = width(l + 1);
        if (l == 0 && shared) {
            for (unsigned o = 0; o < n_out; o++)
                h[o] = activate(base0[o] + (sign < 0 ? -pert0[o] : pert0[o]), l);
        } else {
            perturbation(l, x, pert);
            for (unsigned o = 0; o < n_out; o++)
                h[o] = activate(row_dot(l, o, x) + (sign < 0 ? -pert[o] : pert[o]), l);
        }
        x = h;
        h = h == act[0] ? act[1] : act[0];
    }
    return x;
}

#endif

static int32_t score_term(const int8_t *y, unsigned label, unsigned n_out) {
    int32_t margin = (int32_t)regs[R_MARGIN];
    if (n_out == 1) return margin;
    int32_t other = -32768;
    for (unsigned c = 0; c < n_out; c++)
        if (c != label && y[c] > other) other = y[c];
    int32_t t = y[label] - other;
    return t < margin ? t : margin;
}

/* the evaluator's checks (its error flags 0-6) */
static int eval_checks(void) {
    unsigned nl = n_layers(), err = 0;
    if (nl < 1 || nl > MAX_LAYERS) err |= 1 << 0;
    for (unsigned i = 0; i <= MAX_LAYERS; i++)
        if ((i == 0 || i <= nl) && (width(i) < 1 || width(i) > MAX_WIDTH)) err |= 1 << 1;
    uint32_t pop = regs[R_POPULATION];
    if ((pop & 1) || pop < 2 || pop > 4096) err |= 1 << 2;
    if (regs[R_BATCH] < 1 || regs[R_BATCH] > MAX_BATCH) err |= 1 << 3;
    int bad_shift = regs[R_SIGMA_SHIFT] > 8;
    for (unsigned l = 0; l < MAX_LAYERS; l++)
        if (l < nl && regs[R_ACT_SHIFT0 + l] > 15) bad_shift = 1;
    if (bad_shift) err |= 1 << 4;
    if (regs[R_MARGIN] < 1 || regs[R_MARGIN] > 254) err |= 1 << 5;
    if (regs[R_STEP] > MAX_STEP) err |= 1 << 6;
    regs[R_ERROR] |= err;
    return err != 0;
}

#if ENGINE
static void engine_start(uint32_t op, unsigned layer, unsigned shared) {
    ER[E_CMD] = op | layer << 4 | shared << 7;
}

/* the engine answers an access to its memories only once its op has ended: one read
 * waits for it (a poll of CMD took a load and a branch per iteration, and the exit) */
static void engine_wait(void) { (void)EX[0]; }

static void engine_run(uint32_t op, unsigned layer, unsigned shared) {
    engine_start(op, layer, shared);
    engine_wait();
}

/* the start states of every stream of the step (spec 2.3), mixed once per step: the
 * engine expands a stream's digits from its start state */
static uint32_t stream_x0[MAX_PAIRS][MAX_LAYERS][2];

static void engine_keys(void) {
    uint32_t key = run_key(regs[R_SEED]), step = regs[R_STEP];
    for (unsigned j = 0; j < regs[R_POPULATION] / 2; j++)
        for (unsigned l = 0; l < n_layers(); l++)
            for (unsigned ab = 0; ab < 2; ab++) stream_x0[j][l][ab] = stream_state(key, step, j, l, ab);
}

static void engine_noise(unsigned pair) {
    for (unsigned l = 0; l < n_layers(); l++)
        for (unsigned ab = 0; ab < 2; ab++) {
            ER[E_X0] = stream_x0[pair][l][ab];
            engine_run(OP_NOISE | ab << 3, l, 0);
        }
}

/* the pair's members' logits (the last layer's bank of the activations) */
static void engine_logits(unsigned n_out, int8_t *yp, int8_t *ym) {
    volatile uint32_t *bank = &EX[128 * (1 + ((n_layers() - 1) & 1))];
    for (unsigned o = 0; o < n_out; o++) {
        uint32_t v = bank[o];
        yp[o] = (int8_t)v;
        ym[o] = (int8_t)(v >> 8);
    }
}

/* both members' compare state over a sample's logit rows (spec 7.1, as score_term): the
 * largest other logit and the label's, their sign bits flipped (x ^ 0x80 orders int8 as
 * unsigned, so no sign extension; a difference of two is the same) */
struct margins {
    int32_t op, om, lp, lm; /* largest other (flipped: >= 0) of member +, -; the label's */
};

/* rows from..to-1 of the last layer's words y ({y-, y+} per output row: the engine's bank
 * or a copy of it; one read per row for both members) into the compare state */
static inline __attribute__((always_inline)) void compare_rows(
    const volatile uint32_t *y, unsigned from, unsigned to, unsigned label, struct margins *mg
) {
    int32_t op = mg->op, om = mg->om, lp = mg->lp, lm = mg->lm;
    for (unsigned o = from; o < to; o++) {
        uint32_t v = y[o] ^ 0x8080u;
        int32_t yp = (int32_t)(v & 0xFF), ym = (int32_t)(v >> 8 & 0xFF);
        if (o == label) {
            lp = yp;
            lm = ym;
        } else {
            if (yp > op) op = yp;
            if (ym > om) om = ym;
        }
    }
    mg->op = op;
    mg->om = om;
    mg->lp = lp;
    mg->lm = lm;
}

/* both members' score terms from the compare state of all n_out rows, added to their
 * scores sc[0] (member +) and sc[1] (member -); one output row: the margin */
static inline __attribute__((always_inline)) void
add_terms(const struct margins *mg, unsigned n_out, int32_t *sc) {
    int32_t margin = (int32_t)regs[R_MARGIN];
    if (n_out == 1) {
        sc[0] += margin;
        sc[1] += margin;
        return;
    }
    int32_t tp = mg->lp - mg->op, tm = mg->lm - mg->om;
    sc[0] += tp < margin ? tp : margin;
    sc[1] += tm < margin ? tm : margin;
}

/* a sample's score terms at once. Inlined: a call costs xor's step about 2 %. */
static inline __attribute__((always_inline)) void
add_score_terms(const volatile uint32_t *y, unsigned n_out, unsigned label, int32_t *sc) {
    struct margins mg = {0, 0, 0, 0};
    compare_rows(y, 0, n_out, label, &mg);
    add_terms(&mg, n_out, sc);
}

static volatile uint32_t *logit_bank(void) { return &EX[128 * (1 + ((n_layers() - 1) & 1))]; }

/* a sample's logits copied from the engine (hold_scores: the engine is idle), compared
 * while the engine runs the next sample's layers: held_rows up to a row during its first
 * layer, held_scores the rest during its last, and the score terms added (the core's
 * compares take about 105 cycles a row: digits' 10 rows outlast its last layer, about
 * 800 cycles, but not its two layers) */
static struct {
    uint32_t raw[MAX_WIDTH];
    unsigned n_out, label, pending, next; /* next: the first row not compared yet */
    struct margins mg;
    int32_t *sc;
} held;

static void hold_scores(unsigned n_out, unsigned label, int32_t *sc) {
    volatile uint32_t *bank = logit_bank();
    for (unsigned o = 0; o < n_out; o++) held.raw[o] = bank[o];
    held.n_out = n_out;
    held.label = label;
    held.sc = sc;
    held.next = 0;
    held.mg = (struct margins){0, 0, 0, 0};
    held.pending = 1;
}

static void held_rows(unsigned to) {
    compare_rows(held.raw, held.next, to, held.label, &held.mg);
    held.next = to;
}

static void held_scores(void) {
    held.pending = 0;
    held_rows(held.n_out);
    add_terms(&held.mg, held.n_out, held.sc);
}

/* the network's registers of the datapath, and the step's stream start states */
static void engine_setup(void) {
    engine_keys();
    ER[E_NL] = n_layers();
    ER[E_PSHIFT] = rank_shift() + regs[R_SIGMA_SHIFT];
    for (unsigned i = 0; i <= n_layers(); i++) ER[E_WIDTH + i] = width(i);
    for (unsigned l = 0; l < n_layers(); l++) {
        ER[E_ACT + l] = regs[R_ACT_SHIFT0 + l];
        ER[E_WBASE + l] = layer_base[l];
    }
}

/* EVAL on the datapath: per group of up to SLOTS shared samples their base products,
 * then per pair the noise (once for the group) and every layer of both members for each
 * sample; per-member inputs: per pair its noise, then every sample of both members */
static int eval_engine(uint32_t batch_base) {
    unsigned pop = regs[R_POPULATION], batch = regs[R_BATCH], shared = regs[R_SHARED];
    unsigned n_in = width(0), n_out = width(n_layers());
    engine_setup();
    static int8_t yp[MAX_WIDTH], ym[MAX_WIDTH];
    if (shared) {
        for (unsigned m = 0; m < pop; m++) mem_scores[m] = 0;
        /* a sample's score terms wait for the next sample's layers when its last layer
         * is wide (fan >= 48: fan (n_out + 2) cycles, digits' 780, against about 105
         * n_out for the compares); a narrow layer's are added at once (xor's 8 inputs) */
        unsigned defer = width(n_layers() - 1) + 1 >= 48;
        volatile uint32_t *bank = logit_bank();
        for (unsigned b = 0; b < batch; b += SLOTS) {
            unsigned ns = batch - b < SLOTS ? batch - b : SLOTS;
            unsigned label[SLOTS];
            uint32_t at[SLOTS] = {0};
            for (unsigned s = 0; s < ns; s++) {
                uint32_t idx = mem_batch[(batch_base + b + s) % BATCH_WORDS];
                at[s] = idx * n_in;
                label[s] = mem_labels[idx % LABEL_WORDS];
                if (label[s] >= n_out) {
                    set_error(8);
                    return 1;
                }
            }
            /* the inputs of slots 0, 2 into bank 0 (low, high bytes), of 1, 3 into bank 3
             * (a slot past the batch's end reads byte 0 of sample 0: never used) */
            for (unsigned k = 0; k < n_in; k++) {
                uint32_t x[SLOTS];
                for (unsigned s = 0; s < SLOTS; s++) x[s] = mem_samples[(at[s] + k) % SAMPLE_BYTES];
                EX[k] = x[0] | x[2] << 8;
                EX[384 + k] = x[1] | x[3] << 8;
            }
            for (unsigned s = 0; s < ns; s++) engine_run(OP_BASE | s << SLOT_SHIFT, 0, 0);
            for (unsigned j = 0; j < pop / 2; j++) {
                if (service()) return 1;
                engine_noise(j);
                for (unsigned s = 0; s < ns; s++) {
                    unsigned nl = n_layers();
                    for (unsigned l = 0; l < nl; l++) {
                        engine_start(OP_LAYER | (l == 0 ? s << SLOT_SHIFT : 0), l, 1);
                        /* the sample before's compares while the engine runs: two
                         * fifths of its rows during layer 0, the rest during the last
                         * layer (digits: 4 and 6 rows; a half, 5 and 5, took 76.0 M
                         * cycles a step, 3 and 7 77.5 M, 4 and 6 75.2 M) */
                        if (defer && held.pending) {
                            if (l == nl - 1)
                                held_scores();
                            else if (l == 0)
                                held_rows(n_out * 2 / 5);
                        }
                        engine_wait();
                    }
                    if (defer)
                        hold_scores(n_out, label[s], &mem_scores[2 * j]);
                    else
                        add_score_terms(bank, n_out, label[s], &mem_scores[2 * j]);
                }
            }
        }
        if (held.pending) held_scores(); /* the last sample's */
        return 0;
    }
    for (unsigned j = 0; j < pop / 2; j++) {
        if (service()) return 1;
        engine_noise(j);
        for (unsigned b = 0; b < batch; b++) {
            const uint8_t *xp = &mem_member_x[(2 * j * batch + b) * n_in];
            const uint8_t *xm = &mem_member_x[((2 * j + 1) * batch + b) * n_in];
            for (unsigned k = 0; k < n_in; k++) EX[k] = xp[k] | (uint32_t)xm[k] << 8;
            for (unsigned l = 0; l < n_layers(); l++) engine_run(OP_LAYER, l, 0);
            engine_logits(n_out, yp, ym);
            int8_t *dp = &mem_logits[(2 * j * batch + b) * n_out];
            int8_t *dm = &mem_logits[((2 * j + 1) * batch + b) * n_out];
            for (unsigned o = 0; o < n_out; o++) {
                dp[o] = yp[o];
                dm[o] = ym[o];
            }
        }
    }
    return 0;
}
#endif

static int eval(uint32_t batch_base) {
    if (eval_checks()) return 1;
    layout();
#if ENGINE
    int bad = eval_engine(batch_base);
    held.pending = 0; /* a run stopped early leaves no score terms to the next ops */
    return bad;
#else
    unsigned pop = regs[R_POPULATION], batch = regs[R_BATCH], shared = regs[R_SHARED];
    unsigned n_in = width(0), n_out = width(n_layers()), n_hidden0 = width(1);
    uint32_t key = run_key(regs[R_SEED]), step = regs[R_STEP];
    static int8_t x0[MAX_WIDTH];
    if (shared)
        for (unsigned m = 0; m < pop; m++) mem_scores[m] = 0;
    for (unsigned b = 0; b < batch; b++) {
        unsigned label = 0;
        if (shared) {
            uint32_t idx = mem_batch[(batch_base + b) % BATCH_WORDS];
            uint32_t at = idx * n_in;
            for (unsigned k = 0; k < n_in; k++) x0[k] = (int8_t)mem_samples[(at + k) % SAMPLE_BYTES];
            label = mem_labels[idx % LABEL_WORDS];
            if (label >= n_out) {
                set_error(8);
                return 1;
            }
            for (unsigned o = 0; o < n_hidden0; o++) base0[o] = row_dot(0, o, x0);
        }
        for (unsigned j = 0; j < pop / 2; j++) {
            if (service()) return 1;
            make_noise(key, step, j);
            if (shared) perturbation(0, x0, pert0);
            for (unsigned s = 0; s < 2; s++) {
                unsigned m = 2 * j + s;
                const int8_t *x = x0;
                if (!shared) {
                    const uint8_t *src = &mem_member_x[(m * batch + b) * n_in];
                    for (unsigned k = 0; k < n_in; k++) x0[k] = (int8_t)src[k];
                }
                const int8_t *y = member_forward(s ? -1 : 1, x, shared);
                if (shared) {
                    mem_scores[m] += score_term(y, label, n_out);
                } else {
                    int8_t *dst = &mem_logits[(m * batch + b) * n_out];
                    for (unsigned o = 0; o < n_out; o++) dst[o] = y[o];
                }
            }
        }
    }
    return 0;
#endif
}

/* ------------------------------------------------------------------ SHAPE (spec 7.2, 8.2) */
static uint32_t theta;

/* the centered ranks c_m = 2 less_m + equal_m - N of the members' scores (spec 7.2): a
 * merge sort of the members by score, then one walk over the runs of equal scores (N log N
 * compares where counting takes N^2: 2.6 M cycles at population 256) */
static uint16_t rank_order[MAX_POPULATION], rank_tmp[MAX_POPULATION];
static int32_t rank_c[MAX_POPULATION];

static void centered_ranks(unsigned pop) {
    const int32_t *sc = mem_scores;
    uint16_t *ord = rank_order, *tmp = rank_tmp;
    for (unsigned i = 0; i < pop; i++) ord[i] = (uint16_t)i;
    for (unsigned w = 1; w < pop; w *= 2) {
        for (unsigned lo = 0; lo < pop; lo += 2 * w) {
            unsigned mid = lo + w < pop ? lo + w : pop, hi = lo + 2 * w < pop ? lo + 2 * w : pop;
            unsigned a = lo, b = mid, o = lo;
            while (a < mid && b < hi) tmp[o++] = sc[ord[b]] < sc[ord[a]] ? ord[b++] : ord[a++];
            while (a < mid) tmp[o++] = ord[a++];
            while (b < hi) tmp[o++] = ord[b++];
        }
        uint16_t *t = ord;
        ord = tmp;
        tmp = t;
    }
    for (unsigned p = 0; p < pop;) {
        unsigned e = 1;
        int32_t s = sc[ord[p]];
        while (p + e < pop && sc[ord[p + e]] == s) e++;
        int32_t c = (int32_t)(2 * p + e) - (int32_t)pop; /* p members below the run, e in it */
        for (unsigned q = p; q < p + e; q++) rank_c[ord[q]] = c;
        p += e;
    }
}

static int shape(void) {
    unsigned pop = regs[R_POPULATION];
    if ((pop & 1) || pop < 2 || pop > MAX_POPULATION) {
        set_error(9);
        return 1;
    }
    if (!regs[R_SHAPING]) centered_ranks(pop);
    if (service()) return 1;
    uint64_t sum = 0;
    for (unsigned j = 0; j < pop / 2; j++) {
        int32_t s0 = mem_scores[2 * j], s1 = mem_scores[2 * j + 1], g;
        if (regs[R_SHAPING]) {
            g = (s0 > s1) - (s0 < s1);
        } else { /* g_j = c_2j - c_2j+1 */
            g = rank_c[2 * j] - rank_c[2 * j + 1];
        }
        mem_g[j] = (int16_t)g;
        sum += (uint64_t)((int64_t)g * g);
    }
    theta = (uint32_t)(((uint64_t)regs[R_TAU] * isqrt64(sum)) >> 4);
    regs[R_THETA] = theta;
    return 0;
}

/* ------------------------------------------------------------------ VOTE + APPLY (spec 8) */
#if !PENTARY
/* PQUANT(v, latent_shift) & 7 (the digit's code, spec 1.2) of every latent value v =
 * -VMAX..VMAX at [v + VMAX], made once per update from pquant itself */
static uint8_t code_of_latent[2 * VMAX + 1];

static void latent_codes(void) {
    for (int v = -VMAX; v <= VMAX; v++)
        code_of_latent[v + VMAX] = (uint8_t)(pquant(v, regs[R_LATENT_SHIFT]) & 7);
}
#else
/* sat(d + move, -2, 2) & 7 for the code c of d (spec 1.2) at [move + 1][c], made once
 * per update from digit_of_code and sat (the invalid codes 3-5 read as 0) */
static uint8_t code_moved[3][8];

static void pentary_codes(void) {
    for (int m = -1; m <= 1; m++)
        for (unsigned c = 0; c < 8; c++)
            code_moved[m + 1][c] = (uint8_t)(sat(digit_of_code(c) + m, -2, 2) & 7);
}
#endif

/* the moves (spec 8.2-8.4) of weights i0 .. i0 + n - 1 of layer l (a block of whole rows,
 * contiguous in the row-major layout), their votes at z[i - i0] (z NULL: every vote 0).
 * A packed word (spec 1.3) at a time: read once, its five codes shifted out as the new
 * ones shift in (shifts by constants: the core shifts 4 bits a cycle), written once. */
static void apply_range(unsigned l, uint32_t i0, uint32_t n, const volatile int32_t *z) {
    int32_t t = (int32_t)theta;
    uint32_t end = i0 + n, i = i0 - i0 % 5, word = layer_base[l] + i0 / 5;
#if !PENTARY
    int8_t *lv = &mem_latent[latent_base[l]];
#endif
    while (i < end) {
        uint32_t w0 = w_get(word), w = w0, out = 0;
        for (unsigned p = 0; p < 5; p++, i++) {
            uint32_t code = w & 7;
            w >>= 3;
            if (i >= i0 && i < end) {
                int32_t v = z ? z[i - i0] : 0;
                int move = (v > t) - (v < -t);
#if PENTARY
                code = code_moved[move + 1][code];
#else
                int32_t x = sat(lv[i] + move, -VMAX, VMAX);
                lv[i] = (int8_t)x;
                code = code_of_latent[x + VMAX];
#endif
            }
            out = out >> 3 | code << 12;
        }
        w_set(word++, (uint16_t)(out | (w0 & 0x8000u)));
    }
}

static int vote_checks(unsigned l) {
    unsigned pop = regs[R_POPULATION], n_out = width(l + 1), fan = width(l) + 1;
    if ((pop & 1) || pop < 2 || pop > MAX_POPULATION || n_out < 1 || n_out > MAX_WIDTH ||
        fan < 1 || fan > MAX_FAN) {
        set_error(10);
        return 1;
    }
    return 0;
}

#if ENGINE
/* VOTE on the datapath: per block of rows whose votes fill its Z memory, per pair with
 * g != 0, the pair's noise of the layer (NOISE A, B) and its votes (VOTE; the first
 * writes them, the others add); then the block's moves from the Z memory */

static int vote_apply(unsigned l) {
    if (vote_checks(l)) return 1;
    unsigned pop = regs[R_POPULATION], n_out = width(l + 1), fan = width(l) + 1;
    unsigned block = ENGINE_Z_WORDS / fan;
    if (block > n_out) block = n_out;
    for (unsigned o0 = 0; o0 < n_out; o0 += block) {
        unsigned rows = n_out - o0 < block ? n_out - o0 : block, first = 1;
        ER[E_ZROW] = o0;
        ER[E_ZROWS] = rows;
        for (unsigned j = 0; j < pop / 2; j++) {
            int32_t g = mem_g[j];
            if (!g) continue;
            if ((j & 15) == 0 && service()) return 1;
            for (unsigned ab = 0; ab < 2; ab++) {
                ER[E_X0] = stream_x0[j][l][ab];
                engine_run(OP_NOISE | ab << 3, l, 0);
            }
            ER[E_G] = (uint32_t)g;
            engine_run(OP_VOTE, l, first);
            first = 0;
        }
        apply_range(l, o0 * fan, rows * fan, first ? 0 : EZ);
    }
    return 0;
}
#else
/* VOTE in software: per block of rows whose votes fill zbuf, per pair with g != 0, the
 * pair's noise rows of the block (regenerated from its keys) and its votes */
#define Z_ROWS (1024 / MAX_FAN > 0 ? (1024 / MAX_FAN < MAX_WIDTH ? 1024 / MAX_FAN : MAX_WIDTH) : 1)
static int32_t zbuf[Z_ROWS * MAX_FAN];

static int vote_apply(unsigned l) {
    if (vote_checks(l)) return 1;
    unsigned pop = regs[R_POPULATION], n_out = width(l + 1), fan = width(l) + 1;
    uint32_t key = run_key(regs[R_SEED]), step = regs[R_STEP];
#if QUANTIZED
    unsigned f = rank_shift() + regs[R_SIGMA_SHIFT];
#endif
    int8_t *a = noise_a[0], *b = noise_b[0];
    for (unsigned o0 = 0; o0 < n_out; o0 += Z_ROWS) {
        unsigned rows = n_out - o0 < Z_ROWS ? n_out - o0 : Z_ROWS;
        for (unsigned i = 0; i < rows * fan; i++) zbuf[i] = 0;
        for (unsigned j = 0; j < pop / 2; j++) {
            int32_t g = mem_g[j];
            if (!g) continue;
            if ((j & 15) == 0 && service()) return 1;
            stream_digits(stream_state(key, step, j, l, 0), o0 * RANK, rows * RANK, a);
            stream_digits(stream_state(key, step, j, l, 1), 0, fan * RANK, b);
            for (unsigned r = 0; r < rows; r++) {
                int32_t *zr = &zbuf[r * fan];
#if !QUANTIZED
                int32_t ga[RANK];
                for (unsigned c = 0; c < RANK; c++) ga[c] = dmul(g, a[r * RANK + c]);
#endif
                for (unsigned k = 0; k < fan; k++) {
#if QUANTIZED
                    int32_t d = 0;
                    for (unsigned c = 0; c < RANK; c++) d += dmul(a[r * RANK + c], b[k * RANK + c]);
                    zr[k] += dmul(g, pquant(d, f));
#else
                    int32_t z = 0;
                    for (unsigned c = 0; c < RANK; c++) z += dmul(ga[c], b[k * RANK + c]);
                    zr[k] += z;
#endif
                }
            }
        }
        apply_range(l, o0 * fan, rows * fan, zbuf);
    }
    return 0;
}
#endif

static int update(void) {
    uint32_t t = hal_cycles();
    if (shape()) return 1;
    uint32_t t1 = hal_cycles();
    regs[R_SHAPE_CYCLES] += t1 - t;
    layout();
#if ENGINE
    engine_setup();
#endif
#if PENTARY
    pentary_codes();
#else
    latent_codes();
#endif
    for (unsigned l = 0; l < n_layers(); l++)
        if (vote_apply(l)) return 1;
    regs[R_UPDATE_CYCLES] += hal_cycles() - t1;
    return 0;
}

/* ------------------------------------------------------------------ INIT (spec 10.1) */
static int init(void) {
    if (!params_ok()) { /* the widths and latent_shift define what is written */
        set_error(13);
        return 1;
    }
    layout();
    uint32_t key = run_key(regs[R_SEED]);
    static int8_t digits[MAX_FAN];
    for (unsigned l = 0; l < n_layers(); l++) {
        unsigned n_out = width(l + 1), fan = width(l) + 1;
        uint32_t s0 = stream_state(key, INIT_STEP, 0, l, 0);
        wcursor wr = wc_at(layer_base[l], 0);
        for (unsigned o = 0; o < n_out; o++) {
            if (regs[R_INIT]) stream_digits(s0, o * fan, fan, digits);
            for (unsigned k = 0; k < fan; k++) {
                int w = regs[R_INIT] ? digits[k] : 0;
#if !PENTARY
                int32_t v = sat(dmul(1 << regs[R_LATENT_SHIFT], w), -VMAX, VMAX);
                mem_latent[latent_base[l] + o * fan + k] = (int8_t)v;
                w = pquant(v, regs[R_LATENT_SHIFT]);
#endif
                wc_put(&wr, w);
            }
            if (service()) return 1;
        }
        while (wr.pos) wc_put(&wr, 0); /* the last word's padding is the code of 0 */
    }
    return 0;
}

/* ------------------------------------------------------------------ runs */
void run_request(uint32_t kind) {
    pending = (int)kind;
    busy_flag = 1;
    hal_busy(1);
}

static void run(int kind) {
    regs[R_ERROR] = 0;
    hal_error(0);
    for (unsigned a = R_CYCLES; a <= R_UPDATE_CYCLES; a++) regs[a] = 0;
    uint32_t t0 = hal_cycles();
    if (kind != K_INIT && !params_ok()) {
        set_error(13);
    } else if ((kind == K_TRAIN || kind == K_EVAL) && !members_ok()) {
        set_error(15);
    } else if (kind == K_TRAIN) {
        uint32_t steps = regs[R_STEPS], step = regs[R_STEP];
        uint32_t stride = regs[R_BATCH_STRIDE] ? regs[R_BATCH_STRIDE] : regs[R_BATCH];
        if (steps == 0 || step + steps - 1 > MAX_STEP) {
            set_error(11);
        } else {
            for (uint32_t i = 0; i < steps; i++) {
                uint32_t t = hal_cycles();
                int bad = eval(i * stride);
                regs[R_EVAL_CYCLES] += hal_cycles() - t;
                if (bad || update()) break;
                regs[R_STEP] = (regs[R_STEP] + 1) & 0xFFFF;
            }
        }
    } else if (kind == K_EVAL) {
        uint32_t t = hal_cycles();
        eval(0);
        regs[R_EVAL_CYCLES] += hal_cycles() - t;
    } else if (kind == K_UPDATE) {
        if (regs[R_STEP] > MAX_STEP) {
            set_error(11);
        } else if (!update()) {
            regs[R_STEP] = (regs[R_STEP] + 1) & 0xFFFF;
        }
    } else if (kind == K_INIT) {
        init();
    } else {
        set_error(12);
    }
    if (!g_abort) regs[R_CYCLES] = hal_cycles() - t0;
}

void run_cancel(void) {
    if (pending >= 0) { /* requested, not started */
        pending = -1;
        busy_flag = 0;
        hal_busy(0);
    } else if (busy_flag) {
        g_abort = 1;
    }
}

void run_pending(void) {
    if (pending < 0) return;
    int kind = pending;
    pending = -1;
    g_abort = 0;
    run(kind);
    if (g_abort) regs_reset(); /* a RESET ended the run: every register at its reset value */
    g_abort = 0;
    busy_flag = 0;
    hal_error(regs[R_ERROR] != 0);
    hal_busy(0);
}
