// Streams every bf16 operand pair (a, b) with a in [a_lo, a_hi) and b in
// 0..65535 through the Verilated bf16_mul at one operation per cycle, and
// writes the fp32 results to stdout in binary: one block of 65536 native
// uint32 per a, in operand order. sim/exhaustive.py reads the blocks and
// checks them against the golden model; nothing is checked here.
//
// Usage: Vbf16_mul A_LO A_HI      (0 <= A_LO < A_HI <= 65536)
// Exit status: 0 on success, 2 on bad arguments, 1 on a write error or a DUT
// that stops producing results.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "Vbf16_mul.h"
#include "verilated.h"

namespace {

constexpr uint32_t kBlock = 65536;  // results per a: every b

// One rising edge; inputs must be set and settled (eval) and outputs sampled
// before. The falling edge is left to the caller's next eval(), which settles
// it together with the next inputs: one eval fewer per cycle.
void tick(Vbf16_mul& top) {
    top.clk = 1;
    top.eval();
    top.clk = 0;
}

bool parse(const char* text, long& value) {
    char* end = nullptr;
    errno = 0;
    value = std::strtol(text, &end, 0);
    return errno == 0 && end != text && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
    long a_lo = 0, a_hi = 0;
    if (argc != 3 || !parse(argv[1], a_lo) || !parse(argv[2], a_hi) || a_lo < 0 ||
        a_hi > 65536 || a_lo >= a_hi) {
        std::fprintf(stderr, "usage: %s A_LO A_HI  (0 <= A_LO < A_HI <= 65536)\n", argv[0]);
        return 2;
    }

    auto context = std::make_unique<VerilatedContext>();
    auto top = std::make_unique<Vbf16_mul>(context.get());

    // Reset for two cycles; the result side is always ready, so the pipeline
    // never stalls and operands are accepted every cycle.
    top->clk = 0;
    top->rst = 1;
    top->operands___05Fvalid = 0;
    top->result___05Fready = 1;
    for (int i = 0; i < 2; ++i) {
        top->eval();
        tick(*top);
    }
    top->rst = 0;

    const uint64_t total = uint64_t(a_hi - a_lo) * kBlock;
    uint64_t sent = 0, received = 0;
    std::vector<uint32_t> block(kBlock);
    uint32_t filled = 0;
    // Enough idle cycles to flush any pipeline this block can be built with.
    uint32_t idle = 0;
    constexpr uint32_t kMaxIdle = 1000;

    while (received < total) {
        // The operand index doubles as the pair: b is its low 16 bits.
        const bool feeding = sent < total;
        if (feeding) {
            const uint32_t a = uint32_t(a_lo + (sent >> 16));
            const uint32_t b = uint32_t(sent & 0xFFFF);
            top->operands___05Fpayload = a | (b << 16);
        }
        top->operands___05Fvalid = feeding;
        top->eval();

        // Sample both handshakes before the edge at which they complete.
        if (feeding && top->operands___05Fready) ++sent;
        if (top->result___05Fvalid) {
            block[filled++] = top->result___05Fpayload;
            ++received;
            idle = 0;
            if (filled == kBlock) {
                if (std::fwrite(block.data(), sizeof(uint32_t), kBlock, stdout) != kBlock) {
                    std::fprintf(stderr, "write failed: %s\n", std::strerror(errno));
                    return 1;
                }
                filled = 0;
            }
        } else if (++idle > kMaxIdle) {
            std::fprintf(stderr, "no result for %u cycles after %llu of %llu results\n",
                         kMaxIdle, (unsigned long long)received, (unsigned long long)total);
            return 1;
        }
        tick(*top);
    }
    top->final();
    if (std::fflush(stdout) != 0) {
        std::fprintf(stderr, "write failed: %s\n", std::strerror(errno));
        return 1;
    }
    return 0;
}
