// pentegg's simulated device: a Verilated link device on a byte pipe.
//
// Bytes read from stdin go into the device's rx stream, one per cycle while it is ready;
// the bytes of its tx stream go to stdout. Nothing else is read or written: the byte
// stream is the protocol's (docs/protocol.md), exactly as on a board's UART.
//
// The device is clocked only while it has something to do: while input bytes wait, while
// it is busy (its `busy` output: a run started by a request), and while a request is
// outstanding, i.e. while more non-empty frames went in than came out
// (a frame ends at a 0x00 delimiter; an empty frame, two delimiters in a row, gets no
// response and is not counted). When the two counts are equal the harness flushes stdout
// and blocks in poll() on stdin, so an idle device costs no CPU and its cycle count
// advances only with the host's requests. `--run-ahead N` keeps clocking N more cycles
// after each response (a run started by a request then advances while the host is
// quiet), checking stdin every few hundred cycles.
//
// EOF on stdin: the harness feeds what it holds, finishes the outstanding response (or
// gives up after a long silence), flushes and exits 0.
//
// Built by pentegg.sim.native_build with Verilator; the top module is a wrapper with
// plain port names (clk, rst, rx_valid, rx_ready, rx_payload, tx_valid, tx_ready,
// tx_payload, busy) around the Amaranth device.

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "Vpentegg_native.h"
#include "verilated.h"

namespace {

constexpr int kResetCycles = 8;
constexpr uint64_t kPollMask = 255;            // check stdin every 256 cycles while busy
constexpr size_t kInBuffer = 1 << 16;
constexpr size_t kOutFlush = 1 << 16;          // flush stdout at this many bytes
constexpr uint64_t kFlushCycles = 1 << 20;     // ... or when output waited this long
constexpr uint64_t kEofSilence = 1ull << 27;   // after EOF: cycles without output to give up

bool write_all(int fd, const uint8_t *p, size_t n) {
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += k;
        n -= static_cast<size_t>(k);
    }
    return true;
}

void usage(const char *argv0) {
    std::fprintf(stderr, "usage: %s [--run-ahead CYCLES]\n", argv0);
}

}  // namespace

int main(int argc, char **argv) {
    uint64_t run_ahead = 0;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--run-ahead") && i + 1 < argc) {
            char *end = nullptr;
            run_ahead = std::strtoull(argv[++i], &end, 0);
            if (!end || *end) {
                usage(argv[0]);
                return 2;
            }
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    std::signal(SIGPIPE, SIG_IGN);  // a closed stdout is a write error, handled below
    int flags = fcntl(0, F_GETFL);
    if (flags < 0 || fcntl(0, F_SETFL, flags | O_NONBLOCK) < 0) {
        std::perror("pentegg device: fcntl(stdin)");
        return 1;
    }

    auto ctx = std::make_unique<VerilatedContext>();
    auto top = std::make_unique<Vpentegg_native>(ctx.get());

    std::vector<uint8_t> in(kInBuffer);
    size_t in_pos = 0, in_len = 0;
    bool eof = false;
    std::vector<uint8_t> out;
    out.reserve(kOutFlush);

    uint64_t frames_in = 0, frames_out = 0;  // non-empty frames ended by a delimiter
    bool in_at_delim = true, out_at_delim = true;
    uint64_t cycle = 0, last_tx = 0, last_flush = 0, ahead = 0;
    int status = 0;

    auto flush = [&]() -> bool {
        last_flush = cycle;
        if (out.empty()) return true;
        bool ok = write_all(1, out.data(), out.size());
        out.clear();
        return ok;
    };

    // reset
    top->clk = 0;
    top->rst = 1;
    top->rx_valid = 0;
    top->rx_payload = 0;
    top->tx_ready = 0;
    top->eval();
    for (int i = 0; i < kResetCycles; ++i) {
        top->clk = 1;
        top->eval();
        top->clk = 0;
        top->eval();
    }
    top->rst = 0;
    top->tx_ready = 1;

    for (;;) {
        if (in_pos == in_len && !eof) {
            bool idle = frames_out >= frames_in && ahead == 0 && !top->busy;
            if (idle) {
                if (!flush()) break;
                struct pollfd pfd = {0, POLLIN, 0};
                if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
                    std::perror("pentegg device: poll(stdin)");
                    status = 1;
                    break;
                }
            }
            if (idle || (cycle & kPollMask) == 0) {
                ssize_t k = read(0, in.data(), in.size());
                if (k > 0) {
                    in_pos = 0;
                    in_len = static_cast<size_t>(k);
                    ahead = 0;
                } else if (k == 0) {
                    eof = true;
                } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    std::perror("pentegg device: read(stdin)");
                    status = 1;
                    break;
                } else if (idle) {
                    continue;
                }
            }
        }
        if (eof && in_pos == in_len &&
            (frames_out >= frames_in || cycle - last_tx > kEofSilence))
            break;

        // one clock cycle: inputs and the falling edge, sample the handshakes, rising edge
        bool have = in_pos < in_len;
        top->rx_valid = have;
        top->rx_payload = have ? in[in_pos] : 0;
        top->clk = 0;
        top->eval();
        if (have && top->rx_ready) {
            uint8_t b = in[in_pos++];
            if (b == 0) {
                if (!in_at_delim) ++frames_in;
                in_at_delim = true;
            } else {
                in_at_delim = false;
            }
        }
        if (top->tx_valid) {
            uint8_t b = top->tx_payload;
            out.push_back(b);
            last_tx = cycle;
            if (b == 0) {
                if (!out_at_delim) {
                    ++frames_out;
                    if (frames_out >= frames_in) {
                        ahead = run_ahead;
                        if (!flush()) break;  // a response is complete: send it now
                    }
                }
                out_at_delim = true;
            } else {
                out_at_delim = false;
            }
        }
        top->clk = 1;
        top->eval();
        ++cycle;
        if (ahead) --ahead;
        if (out.size() >= kOutFlush || (!out.empty() && cycle - last_flush > kFlushCycles)) {
            if (!flush()) break;
        }
    }
    flush();
    top->final();
    return status;
}
