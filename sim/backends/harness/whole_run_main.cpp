// The C++ main of every compiled whole run (sim/backends/compiled.py).
//
// It only toggles the testbench's clock until the testbench calls $finish:
// the testbench (sim/backends/testbench.py) loads memories, starts the run,
// watches the harness and writes the results, all in Verilog, so nothing
// here depends on the design. Plusargs pass straight through to the
// testbench. On exit it prints the clock cycles simulated and the wall time
// they took, which the runner reports as the simulator's own speed.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>

#include "Vtb.h"
#include "verilated.h"

int main(int argc, char** argv) {
    const auto context = std::make_unique<VerilatedContext>();
    context->commandArgs(argc, argv);
#if VM_TRACE
    context->traceEverOn(true);
#endif
    const auto top = std::make_unique<Vtb>(context.get(), "TOP");

    const auto started = std::chrono::steady_clock::now();
    uint64_t cycles = 0;
    top->clk = 0;
    top->eval();
    // Time advances 5 ns (in the testbench's 1 ps precision) an edge, the 10 ns clock of the
    // Icarus testbench, so a trace ($dumpvars) shows every cycle apart, as there.
    while (!context->gotFinish()) {
        top->clk = 1;
        top->eval();
        context->timeInc(5000);
        top->clk = 0;
        top->eval();
        context->timeInc(5000);
        ++cycles;
    }
    top->final();
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - started;
    std::printf("whole-run: %llu cycles in %.6f s\n", static_cast<unsigned long long>(cycles),
                seconds.count());
    return 0;
}
