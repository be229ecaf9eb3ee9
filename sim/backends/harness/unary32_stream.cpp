// Streams every fp32 input x in [lo, hi) through a Verilated unary unit (one
// 32-bit operand, one 32-bit result, the StreamPipeline ports of hdl/arith)
// at one operation per cycle, and writes the results to stdout in binary:
// native uint32, in input order, in blocks of 65536 (the last block of a
// range short). sim/exhaustive_unary.py reads them and checks them against
// the golden model; nothing is checked here.
//
// The unit is built with `verilator --prefix Vunary`, so one source serves
// every unit whatever its top module is called.
//
// Usage: Vunary LO HI      (0 <= LO < HI <= 2^32; decimal or 0x hex)
// Exit status: 0 on success, 2 on bad arguments, 1 on a write error or a DUT
// that stops producing results.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "Vunary.h"
#include "verilated.h"

namespace {

constexpr uint64_t kSpan = uint64_t(1) << 32;  // every fp32 bit pattern
constexpr uint32_t kBlock = 65536;              // results per write

// One rising edge; inputs must be set and settled (eval) and outputs sampled
// before. The falling edge is left to the caller's next eval(), which settles
// it together with the next inputs: one eval fewer per cycle.
void tick(Vunary& top) {
    top.clk = 1;
    top.eval();
    top.clk = 0;
}

// strtoull would quietly wrap "-1" to 2^64 - 1: refuse a sign outright.
bool parse(const char* text, uint64_t& value) {
    char* end = nullptr;
    if (*text == '-' || *text == '+') return false;
    errno = 0;
    value = std::strtoull(text, &end, 0);
    return errno == 0 && end != text && *end == '\0';
}

bool write_block(const uint32_t* data, uint32_t count) {
    if (std::fwrite(data, sizeof(uint32_t), count, stdout) == count) return true;
    std::fprintf(stderr, "write failed: %s\n", std::strerror(errno));
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    uint64_t lo = 0, hi = 0;
    if (argc != 3 || !parse(argv[1], lo) || !parse(argv[2], hi) || hi > kSpan || lo >= hi) {
        std::fprintf(stderr, "usage: %s LO HI  (0 <= LO < HI <= 2^32)\n", argv[0]);
        return 2;
    }

    auto context = std::make_unique<VerilatedContext>();
    auto top = std::make_unique<Vunary>(context.get());

    // Reset for two cycles; the result side is always ready, so the pipeline
    // never stalls and an operand is accepted every cycle.
    top->clk = 0;
    top->rst = 1;
    top->operands___05Fvalid = 0;
    top->result___05Fready = 1;
    for (int i = 0; i < 2; ++i) {
        top->eval();
        tick(*top);
    }
    top->rst = 0;

    const uint64_t total = hi - lo;
    uint64_t sent = 0, received = 0;
    std::vector<uint32_t> block(kBlock);
    uint32_t filled = 0;
    // Enough idle cycles to flush any pipeline these units can be built with.
    uint32_t idle = 0;
    constexpr uint32_t kMaxIdle = 1000;

    while (received < total) {
        const bool feeding = sent < total;
        if (feeding) top->operands___05Fpayload = uint32_t(lo + sent);
        top->operands___05Fvalid = feeding;
        top->eval();

        // Sample both handshakes before the edge at which they complete.
        if (feeding && top->operands___05Fready) ++sent;
        if (top->result___05Fvalid) {
            block[filled++] = top->result___05Fpayload;
            ++received;
            idle = 0;
            if (filled == kBlock) {
                if (!write_block(block.data(), filled)) return 1;
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
    if (filled && !write_block(block.data(), filled)) return 1;
    if (std::fflush(stdout) != 0) {
        std::fprintf(stderr, "write failed: %s\n", std::strerror(errno));
        return 1;
    }
    return 0;
}
