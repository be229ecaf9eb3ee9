"""sim.toolchain.runtime_objects: Verilator's run-time library compiled once, the rest untouched."""

import os
import subprocess
import sys

import pytest

from sim.toolchain import runtime_objects
from sim.toolchain import model_opt, tool_env

# A stand-in compiler: it logs each call and writes its object as the source text plus a tag,
# and a -MMD dependency file, so a test sees which compiles ran and what each made.
FAKE_COMPILER = """#!/bin/sh
echo "$@" >> "$LOG"
out=""; prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && out="$arg"
  prev="$arg"
done
src="$arg"
{ cat "$src"; echo "$TAG"; } > "$out"
echo "$out: $src" > "${out%.o}.d"
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    root = tmp_path / "verilator"
    (root / "include").mkdir(parents=True)
    (root / "include" / "verilated.cpp").write_text("runtime v1\n")
    (root / "include" / "verilated_config.h").write_text("#define VERILATOR_VERSION 1\n")
    compiler = tmp_path / "bin" / "fakecxx"
    compiler.parent.mkdir()
    compiler.write_text(FAKE_COMPILER)
    compiler.chmod(0o755)
    monkeypatch.setenv("PATH", f"{compiler.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VERILATOR_ROOT", str(root))
    monkeypatch.setenv(runtime_objects.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("LOG", str(tmp_path / "calls.log"))
    return root


def _compile(folder, *args, tag="first"):
    folder.mkdir(exist_ok=True)
    env = dict(os.environ, TAG=tag)
    return subprocess.run([sys.executable, runtime_objects.__file__, "fakecxx", *args],
                          cwd=folder, env=env, capture_output=True, text=True)


def _calls(tmp_path):
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_a_runtime_object_is_compiled_once_and_copied_after(fake, tmp_path):
    source = str(fake / "include" / "verilated.cpp")
    args = ("-Os", "-MMD", "-DVM_TRACE=0", "-c", "-o", "verilated.o", source)
    assert _compile(tmp_path / "a", *args).returncode == 0
    assert _compile(tmp_path / "b", *args, tag="second").returncode == 0
    assert len(_calls(tmp_path)) == 1
    # The second build got the first build's object and dependency file, unchanged.
    assert (tmp_path / "b" / "verilated.o").read_text() == "runtime v1\nfirst\n"
    assert (tmp_path / "b" / "verilated.d").read_text() == f"verilated.o: {source}\n"

    # Other defines, or another runtime source text, compile again.
    assert _compile(tmp_path / "c", *args[:2], "-DVM_TRACE=1", *args[3:]).returncode == 0
    (fake / "include" / "verilated.cpp").write_text("runtime v2\n")
    assert _compile(tmp_path / "d", *args, tag="fourth").returncode == 0
    assert len(_calls(tmp_path)) == 3
    assert (tmp_path / "d" / "verilated.o").read_text() == "runtime v2\nfourth\n"


def test_model_code_and_precompiled_headers_always_compile(fake, tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "Vtb_classes_0.cpp").write_text("model\n")
    model = ("-O1", "-include", "Vtb__pch.h.fast", "-c", "-o", "Vtb_classes_0.o",
             "Vtb_classes_0.cpp")
    for tag in ("first", "second"):
        assert _compile(tmp_path / "m", *model, tag=tag).returncode == 0
    assert (tmp_path / "m" / "Vtb_classes_0.o").read_text() == "model\nsecond\n"
    # A runtime source compiled with a model's precompiled header is the model's too.
    runtime_with_pch = ("-include", "Vtb__pch.h.fast", "-c", "-o", "verilated.o",
                        str(fake / "include" / "verilated.cpp"))
    for tag in ("third", "fourth"):
        assert _compile(tmp_path / "m", *runtime_with_pch, tag=tag).returncode == 0
    assert len(_calls(tmp_path)) == 4
    assert not (tmp_path / "cache").exists()


def test_a_failed_compile_stores_nothing_and_fails(fake, tmp_path):
    args = ("-c", "-o", "verilated.o", str(fake / "include" / "missing.cpp"))
    (fake / "include" / "missing.cpp").write_text("")
    (tmp_path / "bin" / "fakecxx").write_text("#!/bin/sh\nexit 3\n")
    assert _compile(tmp_path / "a", *args).returncode == 3
    assert not (tmp_path / "cache").exists()


def test_tool_env_routes_compiles_through_the_cache_and_keeps_a_users_own(monkeypatch):
    monkeypatch.delenv("OBJCACHE", raising=False)
    env = tool_env()
    assert env["OBJCACHE"].endswith("runtime_objects.py") and sys.executable in env["OBJCACHE"]
    assert env[runtime_objects.CACHE_VARIABLE].endswith("verilator-runtime")
    monkeypatch.setenv("OBJCACHE", "ccache")
    assert tool_env()["OBJCACHE"] == "ccache"


def test_model_opt_takes_a_gcc_level_or_names_the_choices(monkeypatch):
    monkeypatch.setenv("TPU_RTL_OPT", "-O2")
    assert model_opt() == "-O2"
    assert model_opt("-Og") == "-O2"        # the variable wins over a caller's default
    monkeypatch.delenv("TPU_RTL_OPT")
    assert model_opt() == "-O3"
    assert model_opt("-Og") == "-Og"
    monkeypatch.setenv("TPU_RTL_OPT", "O2")
    with pytest.raises(ValueError, match=r"TPU_RTL_OPT must be one of -O0, .*-Os, not 'O2'"):
        model_opt()

