"""Target strings are parsed once (hdsl/target.py); the schedule a target chooses by default."""
import pytest

import hdsl
from hdsl.diagnostics import HdslError
from hdsl.lower.lower import choose_schedule
from hdsl.target import parse_target


@pytest.mark.parametrize("text, arch, device, cpu, features", [
    ("host", "host", None, "host", set()),
    ("x86-64-avx2-fast_math", "host", None, "x86-64-avx2", {"fast_math"}),
    ("interp", "interp", None, "host", set()),
    ("cuda", "cuda", "cuda", "host", {"sm_75"}),
    ("cuda-sm_80", "cuda", "cuda", "host", {"sm_80"}),
    ("cuda-sm_90-fast_math", "cuda", "cuda", "host", {"sm_90", "fast_math"}),
    ("cuda-emulate", "cuda", "host_emulate", "host", {"sm_75"}),
    ("opengl", "opengl", "opengl", "host", set()),
])
def test_target_strings(text, arch, device, cpu, features):
    t = parse_target(text)
    assert (t.name, t.arch, t.device, t.cpu, set(t.features)) == (text, arch, device, cpu, features)
    assert t.is_gpu == (device is not None)


@pytest.mark.parametrize("text", ["cuda-sm_70", "gpu", "interp-fast_math", "opengl-fast_math", "host-avx"])
def test_unknown_targets_list_the_known_ones(text):
    with pytest.raises(HdslError) as e:
        parse_target(text)
    msg = e.value.render()
    assert f"unknown target '{text}'" in msg and "cuda-emulate" in msg


PROG = """pipeline p
input  img: u8[2]
output out: u8[2]
algorithm {
    out(x, y) = img(x, y) + 1
}
schedule cpu {
    out.parallel(y)
}
schedule cuda {
    out.gpu_tile(x, y, xi, yi, 8, 8)
}
schedule opengl {
    out.gpu_tile(x, y, xi, yi, 4, 4)
}
"""


def test_each_target_chooses_its_own_schedule_block():
    p = hdsl.loads(PROG)
    assert choose_schedule(p.ir, None, "host").name == "cpu"
    assert choose_schedule(p.ir, None, "cuda-emulate").name == "cuda"
    assert choose_schedule(p.ir, None, "cuda-sm_80").name == "cuda"
    assert choose_schedule(p.ir, None, "opengl").name == "opengl"
    # a name given wins
    assert choose_schedule(p.ir, "cpu", "cuda-emulate").name == "cpu"


def test_gpu_directives_are_refused_on_a_cpu_target_only():
    from hdsl.schedule.record import refuse_unsupported
    p = hdsl.loads(PROG)
    with pytest.raises(HdslError) as e:
        refuse_unsupported(p.ir.schedules["cuda"], "host")
    assert "'gpu_tile' maps loops onto a GPU, but target 'host' is a CPU" in e.value.render()
    refuse_unsupported(p.ir.schedules["cuda"], "cuda-emulate")
    refuse_unsupported(p.ir.schedules["opengl"], "opengl")
