"""Building blocks that more than one block uses: pipeline stagers, stream wrappers, a typed
stream queue, export black boxes, wide logic that simulators compile quickly, and the stream
players and recorders of whole-run harnesses."""
