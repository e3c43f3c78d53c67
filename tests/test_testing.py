"""`tirxh.testing`: what a plugin's own tests use."""

import types

import pytest

from tirxh.api import PluginValidationError, hookimpl
from tirxh.testing import check_plugin


def test_check_plugin_accepts_a_good_plugin_and_returns_its_manager():
    good = types.SimpleNamespace(tirxh_configure=hookimpl(lambda config: None))
    pm = check_plugin(good, "good")
    assert pm.hook.tirxh_configure.get_hookimpls()[0].plugin_name == "good"


def test_check_plugin_rejects_a_misspelled_hook():
    bad = types.SimpleNamespace(tirxh_chek_item=hookimpl(lambda item: None))
    with pytest.raises(PluginValidationError, match=r"unknown hook 'tirxh_chek_item'"):
        check_plugin(bad, "bad")
