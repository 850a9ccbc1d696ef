"""The providers' official clients as witnesses: each drives its provider's fake for every call our
adapter makes (issue 26). The tests live in tests/providers/official/, one module per provider;
a provider joins with one import line here."""

from tests.providers.official.aws import *  # noqa: F403
from tests.providers.official.gcp import *  # noqa: F403
from tests.providers.official.lambda_ import *  # noqa: F403
from tests.providers.official.runpod import *  # noqa: F403
from tests.providers.official.vastai import *  # noqa: F403
