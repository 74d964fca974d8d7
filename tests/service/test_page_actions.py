"""The status page acts: its buttons in a real headless Chromium, behind the token, refused from elsewhere; the
served model's files and firmware bundle download, and the bundle's C compiles and runs as it is."""

import io
import json
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support.browser import Browser
from tests.support.net import free_port
from tinynas.errors import UsageError
from tinynas.service.models import served_download
from tinynas.service.state import Deployed
from tinynas.service.status_server import FORM_HEADER, StatusServer
from tinynas.service.status_views import served_model

TOKEN = "s3cret"
CLASSES = ["rest", "fist", "open", "point"]


@pytest.fixture
def page(tmp_path, exported_tiny):
    """A status server (beyond loopback, so with the token) whose actions are recorded, serving a real model."""
    _, _, paths = exported_tiny
    folder = tmp_path / "alice" / "deployed" / "20261204-090000"
    shutil.copytree(paths.card_path.parent, folder)
    deployed = Deployed(user="alice", model=str(folder / "model.tflite"), card=str(folder / "card.json"), accuracy=1.0)
    status = {"time": 1.7e9, "state": "SERVING", "user": "alice", "error": "", "paused": "", "rewear": {},
              "collection": {}, "search": {}, "deployed": deployed.to_dict(), "classes": CLASSES, "predictions": [],
              "plans": ["gestures4", "isl26"], "serving": {"stale": ""}, "model": served_model(deployed),
              "models": [{"user": "alice", "id": "20261204-090000", "served": True, "architecture": "A(3,3)",
                          "held_out": {"hits": 9, "windows": 10, "interval": [0.6, 0.98]}},
                         {"user": "bob", "id": "20261203-090000", "served": False, "architecture": "A(2,2)",
                          "held_out": {}}]}
    asked = []

    def actions(kind, fields):
        if fields.get("user") == "nobody":
            raise UsageError("nobody has no deployed model on this device")
        asked.append((kind, fields))
        return f"{kind} of {fields.get('user')} requested"

    server = StatusServer(lambda: {**status, "time": __import__("time").time()}, host="0.0.0.0", port=free_port(),
                          token=TOKEN, actions=actions, downloads=lambda name: served_download(deployed, name)).start()
    browser = Browser(tmp_path / "chromium")
    try:
        yield f"http://127.0.0.1:{server.address[1]}", browser, status, asked, server
    finally:
        browser.close()
        server.stop()


def _result(browser, before=""):
    return browser.wait_for(f"(() => {{ const t = document.getElementById('action-result').textContent; "
                            f"return t && t !== 'asking...' && t !== {json.dumps(before)} ? t : ''; }})()")


def test_each_button_asks_through_the_page_behind_the_token(page):
    base, browser, status, asked, _ = page
    browser.open(f"{base}/?token={TOKEN}")
    # Onboard a new user with a plan from the list.
    browser.wait_for("!document.getElementById('onboard-form').hidden")
    browser.evaluate("document.getElementById('onboard-user').value = 'carol'")
    browser.evaluate("document.getElementById('onboard-plan').value = 'isl26'")
    browser.evaluate("document.getElementById('onboard-form').requestSubmit()")
    assert _result(browser) == "onboard of carol requested"
    # Serve another user's model, from the list.
    browser.evaluate("document.getElementById('model-select').selectedIndex = "
                     "[...document.getElementById('model-select').options].findIndex(o => o.text.includes('bob'))")
    browser.click("#switch")
    said = _result(browser, "onboard of carol requested")
    assert said == "serve of bob requested"
    # Recalibrate without labels.
    browser.evaluate("document.getElementById('unlabelled').checked = true")
    browser.click("#recalibrate")
    said = _result(browser, said)
    # A collection: redo while the rest after a kept window lasts, then a pause: continue; cancel.
    status.update(state="COLLECTING", collection={"total": 20, "accepted": 3, "prompt": "fist", "phase": "kept",
                                                  "redo_until": __import__("time").time() + 600})
    browser.wait_for("!document.getElementById('redo').hidden")
    browser.click("#redo")
    said = _result(browser, said)
    status.update(paused="collection paused at fist", collection={"total": 20, "accepted": 3, "prompt": "fist"})
    browser.wait_for("!document.getElementById('continue').hidden")
    browser.click("#continue")
    said = _result(browser, said)
    browser.click("#cancel")
    said = _result(browser, said)
    # The deploy gate asked for one more step (a normal state, amber, with the model's recall per class): one button.
    status.update(state="IDLE", paused="", collection={}, error="", gate={
        "user": "dan", "decision": "undecided", "text": "75% (9 of 12 held-out windows; 95% interval 47%-91%): too "
        "few to tell whether it reaches 50%", "more_per_class": 5, "minutes": 2.3, "adds_held_out": 4,
        "needed_per_class": 20, "advice": "", "recall": {"rest": 1.0, "fist": 0.67, "open": 0.33, "point": None},
        "command": "tinynas onboard --user dan --more 5"})
    browser.wait_for("!document.getElementById('more-box').hidden")
    assert browser.text("#more") == "Record 5 more per class for dan"
    assert "about 2 min; 4 more held-out windows), then the gate decides again" in browser.text("#gate-text")
    assert "point: no held-out window" in browser.text("#gate-recall")
    assert browser.evaluate("document.getElementById('error').hidden")  # not shown as an error
    browser.click("#more")
    _result(browser, said)
    assert asked == [("onboard", {"user": "carol", "plan": "isl26"}),
                     ("serve", {"user": "bob", "model": "20261203-090000"}),
                     ("recalibrate", {"user": "alice", "unlabelled": True}), ("redo", {"user": "alice"}),
                     ("continue", {"user": "alice"}), ("cancel", {"user": "alice"}),
                     ("more", {"user": "dan", "count": 5})]


def test_a_refusal_is_shown_in_one_line_and_nothing_is_asked(page):
    base, browser, _, asked, _ = page
    browser.open(f"{base}/?token={TOKEN}")
    browser.evaluate("document.getElementById('onboard-user').value = 'nobody'")
    browser.evaluate("document.getElementById('onboard-form').requestSubmit()")
    assert _result(browser) == "Refused: nobody has no deployed model on this device"
    assert asked == []


def _post(url, body=b'{"user": "mallory"}', **headers):
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                                                              **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_an_action_needs_post_the_token_the_page_value_and_the_pages_origin(page):
    base, _, _, asked, server = page
    url = f"{base}/action/onboard"
    form = {FORM_HEADER: server.form_key}
    assert _post(url, **form)[0] == 401  # no token
    code, answer = _post(url, Authorization=f"Bearer {TOKEN}")  # no anti-forgery value: said what is missing
    assert code == 403 and f"needs the {FORM_HEADER} header" in answer["error"]
    code, answer = _post(url, Authorization=f"Bearer {TOKEN}", **{FORM_HEADER: "guessed"})
    assert code == 403 and "reload it" in answer["error"]
    code, answer = _post(url, Authorization=f"Bearer {TOKEN}", Origin="http://evil.example", **form)
    assert code == 403 and "own page" in answer["error"]
    assert _post(url, Authorization=f"Bearer {TOKEN}", **{"Sec-Fetch-Site": "cross-site"}, **form)[0] == 403
    try:
        urllib.request.urlopen(f"{url}?token={TOKEN}", timeout=10)
        raise AssertionError("GET must not act")
    except urllib.error.HTTPError as error:
        assert error.code == 405 and error.headers["Allow"] == "POST"
    assert asked == []
    assert _post(url, body=b"[1]", Authorization=f"Bearer {TOKEN}", **form)[0] == 400
    assert _post(url, body=b"x" * 5000, Authorization=f"Bearer {TOKEN}", **form)[0] == 413
    code, answer = _post(url, Authorization=f"Bearer {TOKEN}", **form)  # all there: asked
    assert code == 200 and asked == [("onboard", {"user": "mallory"})]


def test_another_sites_page_cannot_act_through_the_browser(page, tmp_path):
    base, browser, _, asked, _ = page
    # A page of another origin that submits a form to the service, as a malicious site would (a simple POST needs
    # no preflight); the browser carries no anti-forgery value and names its own origin.
    attack = (f'<html><body data-state="x"><form id="f" method="POST" action="{base}/action/onboard?token={TOKEN}" '
              f'enctype="text/plain"><input name=\'{{"user": "mallory", "x": "\' value=\'"}}\'></form>'
              f'<script>document.getElementById("f").submit()</script></body></html>').encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(attack)))
            self.end_headers()
            self.wfile.write(attack)

        def log_message(self, *args):
            pass

    other = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        browser.call("Page.navigate", url=f"http://localhost:{other.server_address[1]}/")
        body = browser.wait_for("location.pathname.startsWith('/action/') && document.body "
                                "&& document.body.innerText")
    finally:
        other.shutdown()
    assert "own page" in body or "out of date" in body
    assert asked == []


def test_the_served_models_files_and_firmware_bundle_download_and_the_bundle_compiles(page, tmp_path, c_compiler):
    base, browser, _, _, _ = page
    browser.open(f"{base}/?token={TOKEN}")
    links = browser.wait_for("[...document.querySelectorAll('#downloads a')].map(a => a.getAttribute('href'))")
    assert f"download/firmware.zip?token={TOKEN}" in links and f"download/model.tflite?token={TOKEN}" in links
    # The links are the model folder's own files: this model predates model_prepare.c, so no dead link to it.
    assert not any("model_prepare.c" in link for link in links)
    with urllib.request.urlopen(f"{base}/download/firmware.zip?token={TOKEN}", timeout=30) as answer:
        assert answer.headers["Content-Disposition"].startswith('attachment; filename="alice-20261204-090000')
        bundle = zipfile.ZipFile(io.BytesIO(answer.read()))
    # The model's C, a program that runs it once, and its test firmware for a board (tinynas.hil; docs/hil.md).
    assert sorted(bundle.namelist()) == ["README.txt", "card.json", "hil_config.h", "hil_main.c", "main.c",
                                         "memory.ld", "memory_init.h", "model_compiled.c", "model_compiled.h",
                                         "sections.ld", "stack_paint.h", "startup.c"]
    assert all((info.external_attr >> 16) & 0o777 == 0o644 for info in bundle.infolist())  # readable, as copied
    folder = tmp_path / "bundle"
    bundle.extractall(folder)
    readme = (folder / "README.txt").read_text()
    card = json.loads((folder / "card.json").read_text())
    assert f"{card['c_runtime']['arena_bytes']} bytes in .bss" in readme
    subprocess.run([c_compiler, "-std=c99", "-Wall", "-Werror", "main.c", "model_compiled.c", "-o", "model"],
                   cwd=folder, check=True, capture_output=True, text=True, timeout=120)
    said = subprocess.run([str(folder / "model")], check=True, capture_output=True, text=True, timeout=30).stdout
    assert said.strip() in [str(name) for name in card.get("classes") or []] or said.strip().startswith("class ")
    with urllib.request.urlopen(f"{base}/download/model.tflite?token={TOKEN}", timeout=30) as answer:
        assert answer.read() == (tmp_path / "alice" / "deployed" / "20261204-090000" / "model.tflite").read_bytes()
    for url, code in ((f"{base}/download/firmware.zip", 401), (f"{base}/download/../state.json?token={TOKEN}", 404),
                      (f"{base}/download/secret.txt?token={TOKEN}", 404)):
        try:
            urllib.request.urlopen(url, timeout=10)
            raise AssertionError(f"{url} answered")
        except urllib.error.HTTPError as error:
            assert error.code == code, url


def test_the_live_test_counts_the_served_models_answers(page):
    base, browser, status, _, _ = page
    browser.open(f"{base}/?token={TOKEN}")
    browser.click("#test-start")
    # The served model answers what is prompted (a perfect user and model): each sign shown is a hit.
    for _ in range(2):
        sign = browser.wait_for("(document.getElementById('test-prompt').textContent.match(/Perform: (\\w+)/) "
                                "|| [])[1]")
        status["predictions"] = [{"end_sample": 1, "label": sign, "smoothed": sign, "confidence": 0.9,
                                  "probabilities": [0.25] * 4}]
        browser.wait_for(f"document.getElementById('test-score').textContent.includes('of {_ + 1} signs right')",
                         timeout=30)
    score = browser.text("#test-score")
    assert score.startswith("Live test: ") and "95 % interval" in score
