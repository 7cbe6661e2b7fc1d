"""Namespace declarations for input configuration (simulated): the classes whose annotated
fields become the server's flags."""

from sglang.srt.arg_groups.fields.device import Device
from sglang.srt.arg_groups.fields.exec_ import ExecGraph, ExecKernel
from sglang.srt.arg_groups.fields.memory import Memory
from sglang.srt.arg_groups.fields.mm import Mm
from sglang.srt.arg_groups.fields.model import Model
from sglang.srt.arg_groups.fields.observability import Observability
from sglang.srt.arg_groups.fields.parallel import Parallel
from sglang.srt.arg_groups.fields.schedule import Schedule
from sglang.srt.arg_groups.fields.serving import Serving
from sglang.srt.arg_groups.fields.spec import Spec

INPUT_FIELD_SOURCES = [
    Model,
    Serving,
    Parallel,
    Schedule,
    Memory,
    Device,
    ExecKernel,
    ExecGraph,
    Mm,
    Observability,
    Spec,
]
