"""core.hydra_compat reads the text of Hydra's composition errors (written against Hydra 1.3.8): these tests hold
Hydra to the shapes it reads, so that a Hydra that words them otherwise fails here, naming what changed."""

from __future__ import annotations

import pytest
from hydra.errors import ConfigCompositionException

from conftest import CONF
from embexp.core import hydra_compat


def refusal(*overrides: str) -> Exception:
    with pytest.raises(Exception) as e:
        hydra_compat.compose(str(CONF), "train", list(overrides))
    return e.value


def test_an_unknown_key_is_could_not_override_with_the_key():
    e = refusal("debug=smoke", "trainer.lrr=1")
    assert isinstance(e, ConfigCompositionException)
    assert str(e).splitlines() == ["Could not override 'trainer.lrr'.", "To append to your config use +trainer.lrr=1"]
    assert hydra_compat.unknown_key(e) == "trainer.lrr"
    assert str(e.__cause__).splitlines()[0] == "Key 'lrr' not in 'TrainerConfig'"
    assert hydra_compat.unknown_key(refusal("debug=smoke", "nokey=1")) == "nokey"


def test_a_value_of_the_wrong_type_is_hydras_line_and_omegaconfs_cause_without_its_location_lines():
    e = refusal("debug=smoke", "trainer.max_steps=many")
    assert str(e) == "Error merging override trainer.max_steps=many"
    assert str(e.__cause__).splitlines() == ["Value 'many' of type 'str' could not be converted to Integer",
                                             "    full_key: trainer.max_steps", "    reference_type=TrainerConfig",
                                             "    object_type=TrainerConfig"]
    assert hydra_compat.error_line(e) == ("Error merging override trainer.max_steps=many: Value 'many' of type 'str' "
                                          "could not be converted to Integer")
    assert hydra_compat.unknown_key(e) is None


def test_a_syntax_error_is_one_line_with_hydras_link_to_the_grammar():
    e = refusal("debug=smoke", "trainer=[1")
    assert hydra_compat.error_line(e) == ("no viable alternative at input '[1': See "
                                          "https://hydra.cc/docs/1.2/advanced/override_grammar/basic for details")


def test_the_version_written_against_is_the_installed_minor():
    import hydra

    assert hydra.__version__.split(".")[:2] == hydra_compat.HYDRA.split(".")[:2], (
        f"core/hydra_compat.py was written against Hydra {hydra_compat.HYDRA}; {hydra.__version__} is installed: "
        "check the shapes above and update HYDRA")
