"""FPGA board tops and their host bridge (SPEC section 4.10): a UART
(:mod:`~hdl.board.uart`), the LiteX UARTBone bridge onto a word bus
(:mod:`~hdl.board.uart_bridge`), a block-RAM word memory behind it
(:mod:`~hdl.board.word_memory`) and the ULX3S-85F top (:mod:`~hdl.board.ulx3s`, which
needs ``amaranth-boards``)."""
