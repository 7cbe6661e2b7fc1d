"""Where the simulated NCCL communicator init fails, as pynccl's NCCL_CHECK does."""

from firedup_sim import clock, faults

_NCCL_UNHANDLED_SYSTEM_ERROR = 2


class NCCLLibrary:
    def ncclGetErrorString(self, result: int) -> str:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)"

    def NCCL_CHECK(self, result: int) -> None:
        if result != 0:
            error_str = self.ncclGetErrorString(result)
            raise RuntimeError(f"NCCL error: {error_str}")

    def ncclCommInitRank(self, world_size: int, rank: int) -> None:
        if faults.has("nccl_hang"):
            # A rendezvous that never completes: no error, no output, the process stays alive.
            clock.sleep_forever()
        clock.sleep(0.05)
        result = _NCCL_UNHANDLED_SYSTEM_ERROR if faults.has("nccl_error") else 0
        self.NCCL_CHECK(result)
