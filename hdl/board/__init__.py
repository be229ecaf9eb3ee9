"""FPGA board tops and their host bridge (SPEC section 4.10): a UART
(:mod:`~hdl.board.uart`), the LiteX UARTBone bridge onto a word bus
(:mod:`~hdl.board.uart_bridge`), the proto chip behind it (:mod:`~hdl.board.proto_chip`,
its memories shared with the host by :mod:`~hdl.board.host_share`) or a block-RAM word
memory (:mod:`~hdl.board.word_memory`), the board's logic and its simulation top
(:mod:`~hdl.board.board_core`), and the ULX3S-85F top (:mod:`~hdl.board.ulx3s`, which
needs ``amaranth-boards``)."""
