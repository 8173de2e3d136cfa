/* The host protocol of docs/protocol.md, the device side: COBS frames in and out, the
 * checks in the order of rtl/link/engine.py (OVERSIZE, FRAME, CRC, VERSION, LENGTH,
 * COMMAND, LENGTH, PARAM, duplicate RUN, BUSY), exactly one response per request. */
#include "fw.h"

#define REQ_HEADER 5
#define RSP_HEADER 6
#define MAX_WORDS ((FRAME_BYTES - RSP_HEADER - 2) / 4)

enum { C_INFO = 1, C_WRITE_REGS, C_READ_REGS, C_WRITE_MEM, C_READ_MEM, C_RUN, C_STATUS, C_RESET };
enum { S_OK, S_CRC, S_FRAME, S_LENGTH, S_OVERSIZE, S_VERSION, S_COMMAND, S_PARAM, S_BUSY };

/* the frame buffer: the request, then the response's payload over the request's (the
 * response's payload byte i at buf[REQ_HEADER + i], as in the engine) */
static uint8_t buf[FRAME_BYTES];
static uint32_t n_rx;          /* decoded bytes received (saturates at FRAME_BYTES) */
static int over, started, code_255;
static unsigned left;          /* bytes left in the current COBS block */
static uint16_t crc_rx;
static int dup_valid;
static uint8_t dup_seq;

/* CRC-16/CCITT-FALSE a byte at a time through a table (made by link_init): the core
 * takes a received byte every ~160 cycles at 3 Mbaud, which a bit-serial CRC would not
 * keep up with */
static uint16_t crc_table[256];

static uint16_t crc16(uint16_t crc, uint8_t byte) {
    return (uint16_t)(crc << 8) ^ crc_table[(crc >> 8 ^ byte) & 0xFF];
}

static uint32_t get_word(uint32_t at) {
    return buf[at] | (uint32_t)buf[at + 1] << 8 | (uint32_t)buf[at + 2] << 16 | (uint32_t)buf[at + 3] << 24;
}

static void put_word(uint32_t at, uint32_t w) {
    buf[at] = (uint8_t)w;
    buf[at + 1] = (uint8_t)(w >> 8);
    buf[at + 2] = (uint8_t)(w >> 16);
    buf[at + 3] = (uint8_t)(w >> 24);
}

/* ---- the response: header, payload (buf), CRC; COBS-encoded exactly as
 * pentegg.link.cobs_encode, then the delimiter */
static uint8_t head[RSP_HEADER + 2];
static uint32_t rsp_len; /* bytes before the CRC */

static uint8_t rsp_byte(uint32_t i) {
    if (i < RSP_HEADER) return head[i];
    if (i < rsp_len) return buf[REQ_HEADER + i - RSP_HEADER];
    return head[RSP_HEADER + (i - rsp_len)];
}

static void respond(uint8_t seq, uint8_t cmd, uint8_t status, uint32_t payload) {
    head[0] = PROTOCOL_VERSION;
    head[1] = seq;
    head[2] = cmd;
    head[3] = status;
    head[4] = (uint8_t)payload;
    head[5] = (uint8_t)(payload >> 8);
    rsp_len = RSP_HEADER + payload;
    uint16_t crc = 0xFFFF;
    for (uint32_t i = 0; i < rsp_len; i++) crc = crc16(crc, rsp_byte(i));
    head[RSP_HEADER] = (uint8_t)(crc >> 8);
    head[RSP_HEADER + 1] = (uint8_t)crc;
    uint32_t total = rsp_len + 2, i = 0;
    for (;;) { /* one block: up to 254 non-zero bytes, then a zero or the end */
        uint32_t j = i;
        while (j < total && j - i < 254 && rsp_byte(j)) j++;
        hal_tx((uint8_t)(j - i + 1));
        for (uint32_t k = i; k < j; k++) hal_tx(rsp_byte(k));
        if (j - i == 254) {
            i = j;  /* a full block: no zero stands behind its code */
        } else if (j < total) {
            i = j + 1; /* the zero the code stands for */
        } else {
            break;
        }
    }
    hal_tx(0);
    hal_tx_flush();
}

/* ---- a complete request in buf[0..n_rx) */
static void handle(int cobs_err) {
    int busy = running();
    uint8_t ver = n_rx > 0 ? buf[0] : 0, seq = n_rx > 1 ? buf[1] : 0, cmd = n_rx > 2 ? buf[2] : 0;
    uint32_t len = (n_rx > 3 ? buf[3] : 0) | (n_rx > 4 ? (uint32_t)buf[4] << 8 : 0);
    if (over) return respond(seq, cmd, S_OVERSIZE, 0);
    if (cobs_err || n_rx < REQ_HEADER + 2) return respond(seq, cmd, S_FRAME, 0);
    if (crc_rx != 0) return respond(seq, cmd, S_CRC, 0);
    if (ver != PROTOCOL_VERSION) return respond(seq, cmd, S_VERSION, 0);
    if (len != n_rx - REQ_HEADER - 2) return respond(seq, cmd, S_LENGTH, 0);
    uint32_t words = len / 4, odd = len & 3, p = REQ_HEADER;
    /* LENGTH against the command, then PARAM */
    switch (cmd) {
    case C_INFO: case C_STATUS: case C_RESET:
        if (len) return respond(seq, cmd, S_LENGTH, 0);
        break;
    case C_WRITE_REGS:
        if (odd || (len & 4) || !len) return respond(seq, cmd, S_LENGTH, 0);
        for (uint32_t i = 0; i < words; i += 2)
            if (!reg_valid(get_word(p + 4 * i), 1)) return respond(seq, cmd, S_PARAM, 0);
        break;
    case C_READ_REGS:
        if (odd || !len) return respond(seq, cmd, S_LENGTH, 0);
        for (uint32_t i = 0; i < words; i++)
            if (!reg_valid(get_word(p + 4 * i), 0)) return respond(seq, cmd, S_PARAM, 0);
        break;
    case C_WRITE_MEM: {
        if (odd || !len) return respond(seq, cmd, S_LENGTH, 0);
        uint32_t h = get_word(p);
        if (words - 1 > MAX_WORDS || !mem_valid(h >> 24, h & 0xFFFFFF, words - 1, 1))
            return respond(seq, cmd, S_PARAM, 0);
        break;
    }
    case C_READ_MEM: {
        if (len != 8) return respond(seq, cmd, S_LENGTH, 0);
        uint32_t h = get_word(p), count = get_word(p + 4);
        if (count > MAX_WORDS || !mem_valid(h >> 24, h & 0xFFFFFF, count, 0))
            return respond(seq, cmd, S_PARAM, 0);
        break;
    }
    case C_RUN:
        if (len != 4) return respond(seq, cmd, S_LENGTH, 0);
        if (get_word(p) >= 4) return respond(seq, cmd, S_PARAM, 0);
        break;
    default:
        return respond(seq, cmd, S_COMMAND, 0);
    }
    if (cmd == C_RUN && dup_valid && seq == dup_seq) return respond(seq, cmd, S_OK, 0);
    if (busy && (cmd == C_WRITE_REGS || cmd == C_WRITE_MEM || cmd == C_READ_MEM || cmd == C_RUN))
        return respond(seq, cmd, S_BUSY, 0);
    /* execute */
    switch (cmd) {
    case C_INFO:
        for (unsigned i = 0; i < info_count; i++) put_word(p + 4 * i, info_words[i]);
        return respond(seq, cmd, S_OK, 4 * info_count);
    case C_WRITE_REGS:
        dup_valid = 0;
        for (uint32_t i = 0; i < words; i += 2) reg_write(get_word(p + 4 * i), get_word(p + 4 * i + 4));
        return respond(seq, cmd, S_OK, 0);
    case C_READ_REGS:
        for (uint32_t i = 0; i < words; i++) put_word(p + 4 * i, reg_read(get_word(p + 4 * i)));
        return respond(seq, cmd, S_OK, len);
    case C_WRITE_MEM: {
        dup_valid = 0;
        uint32_t h = get_word(p), sel = h >> 24, addr = h & 0xFFFFFF;
        for (uint32_t i = 1; i < words; i++) mem_write(sel, addr + i - 1, get_word(p + 4 * i));
        return respond(seq, cmd, S_OK, 0);
    }
    case C_READ_MEM: {
        uint32_t h = get_word(p), count = get_word(p + 4), sel = h >> 24, addr = h & 0xFFFFFF;
        for (uint32_t i = 0; i < count; i++) put_word(p + 4 * i, mem_read(sel, addr + i));
        return respond(seq, cmd, S_OK, 4 * count);
    }
    case C_RUN:
        dup_valid = 1;
        dup_seq = seq;
        run_request(get_word(p));
        return respond(seq, cmd, S_OK, 0);
    case C_STATUS:
        put_word(p, reg_read(R_STATUS));
        put_word(p + 4, reg_read(R_ERROR));
        put_word(p + 8, reg_read(R_STEP));
        return respond(seq, cmd, S_OK, 12);
    case C_RESET:
        dup_valid = 0;
        regs_reset();
        run_cancel();
        return respond(seq, cmd, S_OK, 0);
    }
}

/* one received byte through the COBS decoder (rtl/link/cobs.py CobsDecoder): returns 1
 * when a non-empty frame ended and was handled. Not inlined into link_poll: a run polls
 * the link between pairs, and this function's register saves would run on every poll,
 * also when no byte is waiting */
__attribute__((noinline)) static int rx_byte(uint8_t byte) {
    if (byte == 0) { /* a delimiter */
        int was = started, err = left != 0;
        left = 0;
        started = 0;
        code_255 = 0;
        if (!was) return 0; /* an empty frame: no response */
        handle(err);
        n_rx = 0;
        over = 0;
        crc_rx = 0xFFFF;
        return 1;
    }
    int emit = 1;
    uint8_t data = byte;
    if (left == 0) { /* a code byte: the zero of the block before it, if any */
        emit = started && !code_255;
        data = 0;
        left = byte - 1u;
        started = 1;
        code_255 = byte == 255;
    } else {
        left--;
    }
    if (emit) {
        crc_rx = crc16(crc_rx, data);
        if (n_rx == FRAME_BYTES)
            over = 1;
        else
            buf[n_rx++] = data;
    }
    return 0;
}

void link_poll(void) {
    int b;
    while ((b = hal_rx()) >= 0) {
        if (rx_byte((uint8_t)b) && g_abort) return; /* a RESET ends the run: unwind first */
    }
}

void link_init(void) {
    for (unsigned i = 0; i < 256; i++) {
        uint16_t c = (uint16_t)(i << 8);
        for (int k = 0; k < 8; k++) c = c & 0x8000 ? (uint16_t)(c << 1 ^ 0x1021) : (uint16_t)(c << 1);
        crc_table[i] = c;
    }
    n_rx = 0;
    crc_rx = 0xFFFF;
}
