"""A model folder is untrusted input: hostile and damaged folders through the real service and its page.

A deployed folder copied in, restored from a backup or written by a bug may hold a card whose C runtime names
`../` or absolute paths, files that are symbolic links out of the folder, sections of the wrong type, numbers
beyond any figure, JSON nested 100,000 deep. The service runs as a real process reading a simulated front-end on
a pseudo-terminal; the page is fetched over HTTP; `tinynas serve` / `service models` are the CLI's. No byte of a
file outside the model folder may leave through the page, every request is answered, and a damaged folder is
listed as damaged and never served.
"""

import io
import json
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile

import numpy as np
import pytest

from firmware_bridge.protocol import Hello
from firmware_bridge.simulator import ArraySource, Simulator
from tests.support.net import free_port
from tinynas.hil.build import FIRMWARE
from tinynas.service.models import write_deployment
from tinynas.service.state import Deployed

SECRET = b"TOP-SECRET-3f9c1a"


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *argv], capture_output=True, text=True, timeout=120)


def _deployed_copy(source, profiles, user, model_id):
    folder = profiles / user / "deployed" / model_id
    shutil.copytree(source, folder)
    write_deployment(folder, Deployed(user=user, model=str(folder / "model.tflite"), card=str(folder / "card.json"),
                                      accuracy=1.0, made=time.time()))
    return folder


def _get(base, path):
    """(status, body) of a GET, whatever the status."""
    try:
        with urllib.request.urlopen(base + path, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture(scope="module")
def service(tmp_path_factory, exported_tiny, vibration_split):
    """A running service serving alice's model, with a secret file beside its data folder."""
    _, _, paths = exported_tiny
    data, _, _, _ = vibration_split
    root = tmp_path_factory.mktemp("hostile")
    (root / "secret.txt").write_bytes(SECRET + b"\n")
    data_dir = root / "data"
    profiles = data_dir / "profiles"
    good = _deployed_copy(paths.card_path.parent, profiles, "alice", "20261206-090000")
    stream = (data.x[:40].reshape(-1, data.channels) * 1000).clip(-32768, 32767).astype(np.int16)
    simulator = Simulator(ArraySource(stream), Hello("sim-motor", "1.0", data.channels, data.sample_rate_hz, "int16"),
                          port_dir=root / "dev").start()
    port = free_port()
    config = root / "tinynas.toml"
    config.write_text(f'port = "{simulator.port}"\ndata_dir = "{data_dir}"\nhttp_port = {port}\n')
    log = open(root / "service.log", "w")
    process = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config", str(config)],
                               stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        served = _cli("serve", "--user", "alice", "--config", str(config))
        assert served.returncode == 0, served.stderr
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                status = json.loads(_get(base, "/status.json")[1])
            except (OSError, ValueError):
                status = {}
            if (status.get("deployed") or {}).get("user") == "alice" and (status.get("model") or {}).get("name"):
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"alice's model not served; log: {(root / 'service.log').read_text()[-2000:]}")
        yield {"base": base, "config": config, "good": good, "profiles": profiles, "root": root,
               "source": paths.card_path.parent}
    finally:
        process.terminate()
        process.wait(30)
        log.close()
        simulator.stop()
    logged = (root / "service.log").read_text()
    assert "Traceback" not in logged and "internal error" not in logged, logged[-3000:]  # every request answered


def _edit_card(folder, change):
    card = json.loads((folder / "card.json").read_text())
    change(card)
    (folder / "card.json").write_text(json.dumps(card))


@pytest.fixture
def served(service):
    """The served folder, put back as it was after each test."""
    folder = service["good"]
    original = {path.name: path.read_bytes() for path in folder.iterdir()}
    yield folder
    for path in folder.iterdir():
        if path.name not in original or path.is_symlink():
            path.unlink()
    for name, content in original.items():
        (folder / name).write_bytes(content)


HOSTILE_NAMES = ["../../../secret.txt", "{root}/secret.txt", "sub/../../../../secret.txt", ".."]


@pytest.mark.parametrize("key", ["source", "header", "prepare_source"])
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_card_naming_files_outside_its_folder_gets_nothing_out(service, served, key, name):
    name = name.format(root=service["root"])
    _edit_card(served, lambda card: card["c_runtime"].update({key: name}))
    for path in ("/download/firmware.zip", "/download/model_compiled.h", "/download/card.json",
                 "/download/model.tflite", "/status.json"):
        code, body = _get(service["base"], path)
        assert SECRET not in body, path
        if path == "/status.json":
            assert code == 200 and "must be a plain file name" in json.loads(body)["model"]["damaged"]
        else:  # the whole folder is refused: its card cannot be trusted
            assert code == 404 and "must be a plain file name" in json.loads(body)["error"], (path, body)


def test_files_that_are_links_out_of_the_folder_are_not_followed(service, served):
    secret = service["root"] / "secret.txt"
    for name in ("model_compiled.h", "model_compiled.c", "model.tflite"):
        (served / name).unlink()
        (served / name).symlink_to(secret)
    for path in ("/download/firmware.zip", "/download/model_compiled.h", "/download/model_compiled.c",
                 "/download/model.tflite"):
        code, body = _get(service["base"], path)
        assert SECRET not in body and code == 404, (path, code, body)
        assert "a symbolic link, which is not followed here" in json.loads(body)["error"]
    (served / "card.json").unlink()
    (served / "card.json").symlink_to(service["source"] / "card.json")  # even a link to a good card
    code, body = _get(service["base"], "/download/card.json")
    assert code == 404 and b"symbolic link" in body


def test_the_bundle_of_a_good_folder_holds_its_own_files_only(service, served):
    code, body = _get(service["base"], "/download/firmware.zip")
    assert code == 200
    bundle = zipfile.ZipFile(io.BytesIO(body))
    names = bundle.namelist()
    own = ["card.json", "model_compiled.c", "model_compiled.h"]
    written = ["README.txt", "main.c", "hil_config.h", "memory.ld"]  # made for the bundle from the checked card
    # The test firmware's sources, from the package.
    shipped = ["hil_main.c", "memory_init.h", "sections.ld", "stack_paint.h", "startup.c"]
    assert sorted(names) == sorted(own + written + shipped)
    for name in own:
        assert bundle.read(name) == (served / name).read_bytes()
    for name in shipped:
        assert bundle.read(name) == (FIRMWARE / name).read_bytes()


DAMAGE = {
    "cost_estimate is a string": lambda card: card.update(cost_estimate="lots"),
    "cost_estimate is a list": lambda card: card.update(cost_estimate=[1, 2]),
    "peak RAM is text": lambda card: card.update(cost_estimate={"peak_ram_bytes": "4096"}),
    "a 401-digit flash size": lambda card: card.update(flash_bytes=10**400),
    "c_runtime names a missing file": lambda card: card["c_runtime"].update(source="gone_compiled.c"),
    "int8_test counts more hits than windows": lambda card: card.update(int8_test={"hits": 9, "windows": 4}),
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_served_card_is_said_and_the_page_stays_up(service, served, damage):
    _edit_card(served, DAMAGE[damage])
    code, body = _get(service["base"], "/status.json")
    assert code == 200
    model = json.loads(body)["model"]
    if damage == "c_runtime names a missing file":  # the card is sound: only the bundle lacks its file
        assert model.get("name")
        code, body = _get(service["base"], "/download/firmware.zip")
        assert code == 404 and "gone_compiled.c: no such file" in json.loads(body)["error"]
    else:
        assert "card.json" in model["damaged"]
        for path in ("/download/firmware.zip", "/download/model.tflite"):
            code, body = _get(service["base"], path)
            assert code == 404 and json.loads(body)["error"]
    assert _get(service["base"], "/")[0] == 200


def test_json_nested_far_too_deep_is_a_damaged_card(service, served):
    (served / "card.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    code, body = _get(service["base"], "/status.json")
    assert code == 200 and "nested far too deep" in json.loads(body)["model"]["damaged"]


@pytest.mark.parametrize("made", ["NaN", "1e300", "Infinity", "\"yesterday\""])
def test_a_damaged_folder_is_listed_as_damaged_and_never_served(service, made):
    folder = _deployed_copy(service["source"], service["profiles"], "bob", f"bad-{made.strip(chr(34))}")
    try:
        record = (folder / "deployment.json").read_text()
        (folder / "deployment.json").write_text(record.replace('"made": ', f'"made": {made}, "was": '))
        listed = _cli("service", "models", "--config", str(service["config"]))
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        line = next(line for line in listed.stdout.splitlines() if folder.name in line)
        assert line.startswith("! bob") and "damaged, never served" in line and "deployment.json" in line
        deadline = time.monotonic() + 60  # the page's list of models is reused for a few seconds
        while time.monotonic() < deadline:
            code, body = _get(service["base"], "/status.json")
            assert code == 200
            rows = [row for row in json.loads(body)["models"] if row["id"] == folder.name]
            if rows:
                break
            time.sleep(0.5)
        assert rows and "deployment.json" in rows[0]["damaged"]
        refused = _cli("serve", "--user", "bob", "--config", str(service["config"]))
        assert refused.returncode == 2 and refused.stderr.startswith("tinynas: error: bob has no deployed model")
        assert "damaged" in refused.stderr and refused.stderr.count("\n") == 1
    finally:
        shutil.rmtree(folder)


def test_a_profile_folder_name_with_escape_sequences_is_printed_escaped(service):
    folder = _deployed_copy(service["source"], service["profiles"], "eve\x1b[2J\x1b]0;pwned\x07", "20261206-100000")
    try:
        listed = _cli("service", "models", "--config", str(service["config"]))
        assert listed.returncode == 0 and "\x1b" not in listed.stdout and "\x07" not in listed.stdout
        assert "eve\\x1b[2J" in listed.stdout
    finally:
        shutil.rmtree(folder.parent.parent)


def _post(base, kind, body: bytes):
    page = _get(base, "/")[1].decode()
    form = page.split('name="tinynas-form" content="', 1)[1].split('"', 1)[0]
    request = urllib.request.Request(f"{base}/action/{kind}", data=body, method="POST",
                                     headers={"Content-Type": "application/json", "X-Tinynas-Form": form})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.parametrize("count", ["9" * 4001, '"' + "9" * 4001 + '"', "1e400", "-" + "9" * 4001])
def test_a_number_of_thousands_of_digits_through_the_page_is_one_line(service, count):
    body = ('{"user": "alice", "count": ' + count + "}").encode()
    code, answer = _post(service["base"], "more", body)
    assert code == 400, answer
    assert answer["error"].startswith("--more must be") and "\n" not in answer["error"]
    assert len(answer["error"]) < 200  # said by its size, not printed
    assert _get(service["base"], "/status.json")[0] == 200
