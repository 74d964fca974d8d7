"""The firmware bundle: what a firmware developer downloads from the page, made only of the model folder's own files,
and C that stays C whatever the class names hold."""

import io
import json
import shutil
import subprocess
import zipfile

import pytest

from tinynas.c_names import c_string, include_guard
from tinynas.deploy.bundle import BundleError, firmware_zip

AWKWARD = ["??/", 'say "hi"', "back\\slash", "tab\there", "é-ü", "*/ /*", "??=define", "%s%n"]


@pytest.fixture
def folder(tmp_path, exported_tiny):
    _, _, paths = exported_tiny
    copy = tmp_path / "model"
    shutil.copytree(paths.card_path.parent, copy)
    return copy


def _edit(folder, change):
    card = json.loads((folder / "card.json").read_text())
    change(card)
    (folder / "card.json").write_text(json.dumps(card))


def test_class_names_of_any_text_stay_one_c_string_and_print_as_given(folder, tmp_path, c_compiler):
    outputs = json.loads((folder / "card.json").read_text())["c_runtime"]["output_bytes"]
    classes = [name for name in AWKWARD if "\t" not in name][:outputs]  # a card's names hold no control character
    assert len(classes) == outputs
    _edit(folder, lambda card: card.update(classes=classes))
    bundle = tmp_path / "bundle"
    zipfile.ZipFile(io.BytesIO(firmware_zip(folder))).extractall(bundle)
    built = subprocess.run([c_compiler, "-std=c99", "-Wall", "-Werror", "-Wtrigraphs", "main.c", "model_compiled.c",
                            "-o", "model"], cwd=bundle, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(bundle / "model")], capture_output=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.decode().strip() in classes


@pytest.mark.parametrize("text", AWKWARD)
def test_c_string_escapes_what_c99_would_read_otherwise(text):
    literal = c_string(text)
    inner = literal[1:-1]
    assert literal.startswith('"') and literal.endswith('"') and '"' not in inner.replace('\\"', "")
    assert "??" not in inner and all(32 <= ord(char) < 127 for char in literal)


def test_the_include_guard_comes_from_the_prefix():
    assert include_guard("emg", "model_compiled.h") == "EMG_MODEL_COMPILED_H_"
    assert include_guard("tinynas", "model_compiled.h") != include_guard("motor", "model_compiled.h")


@pytest.mark.parametrize("key, name", [("source", "../card.json"), ("header", "/etc/hostname"),
                                       ("prepare_source", "../../x.c")])
def test_a_card_naming_a_file_outside_the_folder_makes_no_bundle(folder, key, name):
    _edit(folder, lambda card: card["c_runtime"].update({key: name}))
    with pytest.raises(BundleError, match="must be a plain file name"):
        firmware_zip(folder)


def test_a_file_that_is_a_link_makes_no_bundle(folder, tmp_path):
    secret = tmp_path / "secret.h"
    secret.write_text("SECRET")
    (folder / "model_compiled.h").unlink()
    (folder / "model_compiled.h").symlink_to(secret)
    with pytest.raises(BundleError, match="a symbolic link, which is not followed here"):
        firmware_zip(folder)


def test_a_missing_file_is_named(folder):
    (folder / "model_compiled.c").unlink()
    with pytest.raises(BundleError, match="model_compiled.c: no such file"):
        firmware_zip(folder)


def test_every_entry_of_a_bundle_is_a_plain_name_of_the_folder(folder):
    bundle = zipfile.ZipFile(io.BytesIO(firmware_zip(folder)))
    for info in bundle.infolist():
        assert "/" not in info.filename and ".." not in info.filename
        if info.filename not in ("main.c", "README.txt"):
            assert bundle.read(info) == (folder / info.filename).read_bytes()
