"""Programs the GPU tests share."""

# a 3x3 box blur of a u16 image with repeated edges; a `schedule cuda` block is appended
BLUR = """pipeline g
use boundary
input  img: u16[2]
output out: u16[2]
algorithm {
    c = repeat_edge(img)
    bx(x, y) = (c(x - 1, y) + c(x, y) + c(x + 1, y)) / 3
    out(x, y) = (bx(x, y - 1) + bx(x, y) + bx(x, y + 1)) / 3
}
"""


def with_cuda_schedule(head: str, sched: str) -> str:
    return head + "schedule cuda {\n    " + sched + "\n}\n"
