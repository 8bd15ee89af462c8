"""Switch parsing: EXPO_PROF_ASYNC_EXPONENTIAL, its alias, and bad values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from overlay.contract import (
    DEFAULT_SWITCHBACK_BLOCK,
    ENV_INSTRUMENT,
    ENV_SWITCH,
    ENV_SWITCH_ALIAS,
    ENV_SWITCHBACK_BLOCK,
    FALSE_WORDS,
    MODE_SWITCHBACK,
    TRUE_WORDS,
)
from overlay.switch import SwitchError, instrument_enabled, overlay_enabled, overlay_mode, switchback_block

ROOT = Path(__file__).resolve().parents[2]


def _variants(word: str) -> list[str]:
    return [word, word.upper(), word.capitalize(), f"  {word}\t", f"\n{word.title()} "]


@pytest.mark.parametrize("raw", [v for w in TRUE_WORDS for v in _variants(w)])
@pytest.mark.parametrize("name", [ENV_SWITCH, ENV_SWITCH_ALIAS])
def test_every_true_word_turns_it_on(name, raw):
    # GIVEN one of the true words, in any case and with surrounding whitespace
    # WHEN the switch is read from either variable
    # THEN the overlay is on
    assert overlay_enabled({name: raw}) is True


@pytest.mark.parametrize("raw", [v for w in FALSE_WORDS for v in _variants(w)])
@pytest.mark.parametrize("name", [ENV_SWITCH, ENV_SWITCH_ALIAS])
def test_every_false_word_turns_it_off(name, raw):
    # GIVEN a false word (or empty / blank) WHEN read THEN the overlay is off
    assert overlay_enabled({name: raw}) is False


def test_default_is_off():
    # GIVEN neither variable set WHEN read THEN off
    assert overlay_enabled({}) is False


@pytest.mark.parametrize("raw", ["2", "-1", "enable", "ture", "1.0", "y", "0x1", "on off"])
@pytest.mark.parametrize("name", [ENV_SWITCH, ENV_SWITCH_ALIAS])
def test_bad_value_names_variable_value_and_allowed_words(name, raw):
    # GIVEN a value that is not an allowed word
    # WHEN the switch is read
    with pytest.raises(SwitchError) as info:
        overlay_enabled({name: raw})
    # THEN one line names the variable, the value and the allowed words
    message = str(info.value)
    assert "\n" not in message
    assert f"{name}={raw!r}" in message
    for word in (*TRUE_WORDS, *(w for w in FALSE_WORDS if w)):
        assert word in message


@pytest.mark.parametrize(("main", "alias", "expected"), [("1", "yes", True), ("off", "0", False), ("ON", " true ", True)])
def test_alias_agreeing_with_main_variable(main, alias, expected):
    # GIVEN both variables set to words that mean the same WHEN read THEN that value
    assert overlay_enabled({ENV_SWITCH: main, ENV_SWITCH_ALIAS: alias}) is expected


def test_alias_alone_turns_it_on():
    # GIVEN only vllm-ascend's name set WHEN read THEN it is honoured
    assert overlay_enabled({ENV_SWITCH_ALIAS: "1"}) is True


@pytest.mark.parametrize(("main", "alias"), [("1", "0"), ("off", "on")])
def test_conflicting_main_and_alias_names_both(main, alias):
    # GIVEN the two variables disagree WHEN read
    with pytest.raises(SwitchError) as info:
        overlay_enabled({ENV_SWITCH: main, ENV_SWITCH_ALIAS: alias})
    # THEN the error names both variables with their values
    message = str(info.value)
    assert f"{ENV_SWITCH}={main!r}" in message and f"{ENV_SWITCH_ALIAS}={alias!r}" in message


def test_bad_alias_value_is_reported_even_when_main_is_valid():
    # GIVEN a valid main variable and a garbage alias WHEN read THEN the alias is named
    with pytest.raises(SwitchError, match=ENV_SWITCH_ALIAS):
        overlay_enabled({ENV_SWITCH: "1", ENV_SWITCH_ALIAS: "maybe"})


@pytest.mark.parametrize(("raw", "expected"), [(None, True), ("", True), ("0", False), ("no", False), ("1", True)])
def test_instrument_switch(raw, expected):
    # GIVEN EXPO_PROF_INSTRUMENT unset / empty / a word WHEN read THEN default on, else as said
    env = {} if raw is None else {ENV_INSTRUMENT: raw}
    assert instrument_enabled(env) is expected


def test_instrument_bad_value_is_a_clear_error():
    with pytest.raises(SwitchError, match=rf"{ENV_INSTRUMENT}='sometimes'"):
        instrument_enabled({ENV_INSTRUMENT: "sometimes"})


def test_plugin_with_bad_value_exits_with_one_line_not_a_traceback():
    # GIVEN a process that loads the plugin the way vLLM does, with a bad switch
    code = "from overlay.plugin import register; register(); print('served')"
    env = {"PATH": "/usr/bin:/bin", ENV_SWITCH: "2"}
    # WHEN it starts
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    # THEN it stops before serving, with status 1 and exactly one stderr line naming the problem
    assert proc.returncode == 1
    assert "served" not in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("expo-prof: ") and f"{ENV_SWITCH}='2'" in lines[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("raw", "expected"), [
    (None, "auto"), ("", "auto"), (" AUTO ", "auto"), ("inherit", "inherit"), ("none", "inherit"),
    ("1", {1}), ("2-3,6", {2, 3, 6}), (" 0 , 4-5 ", {0, 4, 5}),
])
def test_lane_cpus_values(raw, expected):
    # GIVEN EXPO_PROF_LANE_CPUS unset / a word / a CPU list WHEN read THEN the placement
    from overlay.contract import ENV_LANE_CPUS
    from overlay.switch import lane_cpus

    assert lane_cpus({} if raw is None else {ENV_LANE_CPUS: raw}) == expected


@pytest.mark.parametrize("raw", ["x", "1-", "3-1", "1,,2", "-2", "1.5"])
def test_lane_cpus_bad_value_is_a_clear_error(raw):
    from overlay.contract import ENV_LANE_CPUS
    from overlay.switch import lane_cpus

    with pytest.raises(SwitchError) as info:
        lane_cpus({ENV_LANE_CPUS: raw})
    assert f"{ENV_LANE_CPUS}={raw!r}" in str(info.value) and "auto" in str(info.value)


# ------------------------------------------------------------------------------------------------ switchback


@pytest.mark.parametrize("raw", ["switchback", "SwitchBack", "  switchback\n"])
def test_switchback_is_a_mode_of_the_main_switch(raw):
    # GIVEN the main switch set to "switchback" (any case, blanks around) WHEN read
    # THEN the overlay runs (enabled) in switchback mode
    assert overlay_mode({ENV_SWITCH: raw}) == MODE_SWITCHBACK
    assert overlay_enabled({ENV_SWITCH: raw}) is True


@pytest.mark.parametrize(("env", "mode"), [
    ({ENV_SWITCH: "1"}, "on"), ({ENV_SWITCH: "0"}, None), ({}, None), ({ENV_SWITCH_ALIAS: "yes"}, "on"),
    ({ENV_SWITCH: "switchback", ENV_SWITCH_ALIAS: "1"}, MODE_SWITCHBACK),
])
def test_modes_of_the_switch_and_its_alias(env, mode):
    # GIVEN the two variables as record and users set them WHEN read THEN the mode: on, switchback or off (None)
    assert overlay_mode(env) == mode


def test_switchback_and_an_off_alias_disagree():
    # GIVEN the main switch asking for switchback but the alias saying off
    # WHEN read THEN one line names both (they cannot both be right)
    with pytest.raises(SwitchError) as info:
        overlay_mode({ENV_SWITCH: "switchback", ENV_SWITCH_ALIAS: "0"})
    assert "disagree" in str(info.value) and ENV_SWITCH_ALIAS in str(info.value) and "\n" not in str(info.value)


def test_the_alias_takes_no_switchback():
    # GIVEN vllm-ascend's alias set to "switchback" (it only knows on/off) WHEN read THEN refused, naming it
    with pytest.raises(SwitchError) as info:
        overlay_mode({ENV_SWITCH_ALIAS: "switchback"})
    assert f"{ENV_SWITCH_ALIAS}='switchback'" in str(info.value)


def test_a_bad_main_value_names_switchback_among_the_allowed_words():
    with pytest.raises(SwitchError) as info:
        overlay_mode({ENV_SWITCH: "switch"})
    message = str(info.value)
    assert "\n" not in message and f"{ENV_SWITCH}='switch'" in message and MODE_SWITCHBACK in message


@pytest.mark.parametrize(("raw", "steps"), [(None, DEFAULT_SWITCHBACK_BLOCK), ("", DEFAULT_SWITCHBACK_BLOCK),
                                             ("2", 2), (" 16 ", 16)])
def test_block_length(raw, steps):
    # GIVEN EXPO_PROF_SWITCHBACK_BLOCK unset, blank or a whole number WHEN read THEN that many steps per block
    env = {} if raw is None else {ENV_SWITCHBACK_BLOCK: raw}
    assert switchback_block(env) == steps


@pytest.mark.parametrize("raw", ["1", "0", "-4", "8.0", "eight", "1e3"])
def test_a_bad_block_length_is_one_line(raw):
    # GIVEN a block length below 2 (washout drops a block's first step) or not a whole number
    # WHEN read THEN one line names the variable, the value and the rule
    with pytest.raises(SwitchError) as info:
        switchback_block({ENV_SWITCHBACK_BLOCK: raw})
    message = str(info.value)
    assert "\n" not in message and f"{ENV_SWITCHBACK_BLOCK}={raw!r}" in message and "at least 2" in message
