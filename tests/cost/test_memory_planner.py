from tinynas.cost.memory_planner import Buffer, align_up, plan, planned_size


def test_align_up():
    assert [align_up(n) for n in (0, 1, 16, 17)] == [0, 16, 16, 32]


def test_buffers_with_disjoint_lifetimes_share_memory():
    buffers = [Buffer(64, 0, 1), Buffer(64, 2, 3)]
    assert plan(buffers) == [0, 0]
    assert planned_size(buffers) == 64


def test_overlapping_buffers_are_stacked_largest_first():
    buffers = [Buffer(32, 0, 2), Buffer(64, 1, 3)]
    assert plan(buffers) == [64, 0]
    assert planned_size(buffers) == 96


def test_later_buffers_reuse_memory_of_dead_ones():
    # A lives throughout; B dies after op 1, so C takes its slot and D stacks above C.
    buffers = [Buffer(96, 0, 4), Buffer(48, 0, 1), Buffer(48, 2, 4), Buffer(32, 3, 4)]
    offsets = plan(buffers)
    assert offsets[0] == 0
    assert offsets[1] == offsets[2] == 96
    assert offsets[3] == 144
    assert planned_size(buffers) == 176


def test_equal_sizes_place_the_later_buffer_first():
    # TFLM fills its sort array from the tail, so ties go to the higher buffer id.
    buffers = [Buffer(16, 0, 1), Buffer(16, 0, 1)]
    assert plan(buffers) == [16, 0]


def test_empty_plan():
    assert planned_size([]) == 0
