"""The one owner of names in generated C: a comment stays one comment and a plain name stays plain, whatever the
text (a board's name, a condition's name)."""

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinynas.c_names import CNameError, c_comment, check_plain_name, is_plain_name

AWKWARD = ["*/", "/*", "**/", "/*/", "a */ #include </etc/passwd> /*", "x\n#define A 1", "é\0\x7f", "*//**/", "*/*/"]


@given(st.text(max_size=60))
def test_a_comment_never_closes_or_nests_whatever_it_holds(text):
    made = c_comment(text)
    assert "*/" not in made and "/*" not in made and all(32 <= ord(char) < 127 for char in made)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="no host C compiler")
def test_the_awkward_comments_compile_under_wall_werror(tmp_path):
    source = "".join(f"/* {c_comment(text)} */\n" for text in AWKWARD) + "int main(void) { return 0; }\n"
    (tmp_path / "a.c").write_text(source)
    built = subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "a.c"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr


@pytest.mark.parametrize("name", ["microbit", "nrf52840-dk", "my_board.v2", "A" * 48])
def test_plain_names(name):
    assert is_plain_name(name) and check_plain_name(name, "board") == name


@pytest.mark.parametrize("name", ["", "-x", ".hidden", "a b", "a/b", 'a"b', "a*/", "A" * 49, None, 3])
def test_names_that_are_not_plain_are_one_line(name):
    with pytest.raises(CNameError, match="is not a plain name") as caught:
        check_plain_name(name, "board")
    assert "\n" not in str(caught.value)
