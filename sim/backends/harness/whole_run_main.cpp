// The C++ main of every compiled whole run (sim/backends/compiled.py).
//
// It only toggles the testbench's clock until the testbench calls $finish:
// the testbench (sim/backends/testbench.py) loads memories, starts the run,
// watches the harness and writes the results, all in Verilog, so nothing
// here depends on the design. Plusargs pass straight through to the
// testbench. On exit it prints the clock cycles simulated and the wall time
// they took, which the runner reports as the simulator's own speed.
//
// A traced build (--trace: VCD, --trace-fst: FST) writes the waveform here, not through
// the testbench's $dumpvars, whose scope Verilator ignores: +waves=FILE names the file, and
// +waves_scope=PATH (a dotted path below the harness, "dut" being the block) limits it to
// the signals under tb.dut.PATH.
//
// A coverage build (--coverage-line --coverage-toggle, for regressions) writes its
// coverage.dat to the file +coverage=FILE names.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "Vtb.h"
#include "verilated.h"
#if VM_COVERAGE
#include "verilated_cov.h"
#endif

#if VM_TRACE
#if VM_TRACE_FST
#include "verilated_fst_c.h"
using Trace = VerilatedFstC;
#else
#include "verilated_vcd_c.h"
using Trace = VerilatedVcdC;
#endif
#endif

namespace {
// The value of plusarg +NAME=VALUE, or an empty string.
std::string plusarg(VerilatedContext& context, const char* name) {
    const std::string prefix = std::string("+") + name + "=";
    const std::string match = context.commandArgsPlusMatch(prefix.c_str() + 1);
    return match.rfind(prefix, 0) == 0 ? match.substr(prefix.size()) : std::string();
}
}  // namespace

int main(int argc, char** argv) {
    const auto context = std::make_unique<VerilatedContext>();
    context->commandArgs(argc, argv);
#if VM_TRACE
    context->traceEverOn(true);
#endif
    const auto top = std::make_unique<Vtb>(context.get(), "TOP");
#if VM_TRACE
    std::unique_ptr<Trace> trace;
    const std::string waves = plusarg(*context, "waves");
    if (!waves.empty()) {
        trace = std::make_unique<Trace>();
        const std::string scope = plusarg(*context, "waves_scope");
        // Every level below the scope; none given, everything.
        if (!scope.empty()) trace->dumpvars(1000, "TOP.tb.dut." + scope);
        top->trace(trace.get(), 1000);
        trace->open(waves.c_str());
    }
    const auto dump = [&] { if (trace) trace->dump(context->time()); };
#else
    const auto dump = [] {};
#endif

    const auto started = std::chrono::steady_clock::now();
    uint64_t cycles = 0;
    top->clk = 0;
    top->eval();
    dump();
    // Time advances 5 ns an edge (in the testbench's precision, 1 fs), the 10 ns clock of the
    // Icarus testbench and of Amaranth's simulator, so a waveform shows the same times on
    // every backend.
    uint64_t half = 5;
    for (int exponent = -9; exponent > context->timeprecision(); --exponent) half *= 10;
    while (!context->gotFinish()) {
        context->timeInc(half);
        top->clk = 1;
        top->eval();
        dump();
        context->timeInc(half);
        top->clk = 0;
        top->eval();
        dump();
        ++cycles;
    }
    // Coverage first: a hierarchical block's final() deletes its model, whose counters the
    // coverage points still name (writing after it crashed a 4-chip system's runs).
#if VM_COVERAGE
    const std::string coverage = plusarg(*context, "coverage");
    if (!coverage.empty()) context->coveragep()->write(coverage);
#endif
    top->final();
#if VM_TRACE
    if (trace) trace->close();
#endif
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - started;
    std::printf("whole-run: %llu cycles in %.6f s\n", static_cast<unsigned long long>(cycles),
                seconds.count());
    return 0;
}
