"""A service context with a device that is never opened: for tests of the service's steps, which only read its hello."""

from firmware_bridge.protocol import Hello
from tinynas.service.config import ServiceConfig
from tinynas.service.context import ServiceContext


def service_context(tmp_path, kind=ServiceContext):
    from firmware_bridge.link import Link
    from firmware_bridge.ring import SampleRing
    from tinynas.service.device import Device

    context = kind(ServiceConfig(data_dir=str(tmp_path / "data"), target="STM32C011F6P6")).open()
    hello = Hello("sim", "1", 8, 200.0, "int8")
    context.device = Device(Link("loop://"), hello, SampleRing(8, 100))  # never opened: steps only read hello
    return context
