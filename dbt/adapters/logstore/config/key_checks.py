"""No key of the adapter's families is ignored: a model config key that is no option, and a
Kafka client property the profile's client does not have (in the model's config or the
profile's `kafka_properties`), is an error suggesting the closest keys (`check_known_keys`,
`check_profile_properties`). The client properties that are taken pass through with their
prefix stripped, and topic settings for creation are gathered (`pass_through`)."""
from __future__ import annotations

import difflib
import importlib
import re
import textwrap
from functools import lru_cache
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.logstore.config.options import (
    AMORO_ENABLED, AMORO_TYPE, CLIENT_PREFIXES, CLIENT_PROPERTIES, KAFKA_CLIENTS,
    LIBRDKAFKA_PROPERTIES, NO_SUCH_PROPERTY, OWN_PREFIXES, SPELLINGS, TOPIC_CONFIG_PREFIX,
    LogConfigError, ProfileConfigError,
)

def _family(key: str) -> str:
    """The prefix `key` is under (the longest), or ''."""
    return max((p for p in OWN_PREFIXES + CLIENT_PREFIXES if key.startswith(p)), key=len, default="")


@lru_cache(maxsize=None)
def known_keys() -> Tuple[str, ...]:
    """Every option's every spelling, and Amoro's switch."""
    spelled = set(SPELLINGS) | {s for spellings in SPELLINGS.values() for s in spellings}
    return tuple(sorted(spelled | {AMORO_ENABLED, AMORO_TYPE}))


def wrapped(text: str, width: int = 100) -> str:
    """`text` on lines of its own, indented, of at most `width` characters (a list of keys
    printed whole would be one line of a thousand)."""
    return "\n" + textwrap.fill(text, width=width, initial_indent="  ", subsequent_indent="  ",
                                 break_on_hyphens=False, break_long_words=False)


def _quoted(names: Sequence[str]) -> str:
    return " or ".join(f"'{n}'" for n in names)


class _Client:
    """What the profile's Kafka client takes (kafka/config.py, by name: see CLIENT_PROPERTIES)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.library = "librdkafka" if name == "confluent" else "kafka-python"
        module = importlib.import_module(CLIENT_PROPERTIES)
        self.refusal: Callable[[str, str, Any], Optional[str]] = module.property_refusal
        self._names: Callable[[str], Tuple[str, ...]] = module.property_names

    @property
    def names(self) -> Tuple[str, ...]:
        return self._names(self.name)

    def check(self, name: str, value: Any) -> Optional[str]:
        return self.refusal(self.name, name, value)

    def allowed(self, prefix: str = "") -> str:
        """The client's properties, for an 'Allowed' list (librdkafka's: where they are listed)."""
        if self.name == "confluent":
            return f"{prefix}<property> for a librdkafka property ({LIBRDKAFKA_PROPERTIES})"
        return (f"{prefix}<property> for one of kafka-python's producer settings: "
                + ", ".join(self.names))


def _client(name: Optional[str]) -> Optional[_Client]:
    """The profile's Kafka client, or None when its name is not one (read_client says so when
    the model logs)."""
    client = str(name or "kafka-python").strip().lower()
    return _Client(client) if client in KAFKA_CLIENTS else None


def suggestions(key: str, candidates: Sequence[str], preferred: Sequence[str] = ()) -> List[str]:
    """At most two candidates close to `key` (difflib.get_close_matches): first those of its own
    family, compared without the prefix they share (which would make any two `properties.` keys
    look alike), then any; `preferred` (exact translations, such as `kafka_linger_ms` ->
    `kafka.linger.ms`) before all."""
    family = _family(key)
    rests = {c[len(family):]: c for c in candidates if family and _family(c) == family}
    close = [rests[r] for r in difflib.get_close_matches(key[len(family):], rests, n=2, cutoff=0.75)]
    if not close:
        close = difflib.get_close_matches(key, candidates, n=2, cutoff=0.75)
    return list(dict.fromkeys([*preferred, *close]))[:2]


def _unknown_key(key: str, value: Any, client: Optional[_Client],
                 source: str = "model config") -> Optional[str]:
    """Why `key` (a model config key, set in `source`) is not one the adapter takes, or None
    when it is."""
    if key in known_keys() or key.startswith(TOPIC_CONFIG_PREFIX):
        return None
    family = _family(key)
    if not family:
        return None  # not the adapter's: dbt's own, or another package's
    candidates = list(known_keys())
    preferred: List[str] = []
    why = ""
    if family in CLIENT_PREFIXES or family == "kafka_":
        if client is None:
            if family in CLIENT_PREFIXES:
                return None  # the profile's client is not known: read_client fails the model
        else:
            name = key[len(family):]
            if family in CLIENT_PREFIXES:
                refusal = client.check(name, value)
                if refusal is None:
                    return None
                if refusal != NO_SUCH_PROPERTY:
                    return (f"config '{key}' ({source}) passes '{name}' to {client.library}, "
                            f"which refuses it: {refusal}. Allowed: leave it unset, or a value "
                            f"{client.library} takes.")
                why = f", and {client.library} has no property '{name}'"
            candidates += [p + n for p in CLIENT_PREFIXES for n in client.names]
            dotted = name.replace("_", ".")
            if family == "kafka_" and client.check(dotted, None) is None:
                preferred.append("kafka." + dotted)
            # 'kafka.propertes.acks': the other prefix spelled inside this one; the user's own
            # prefix with the property is the key meant ('kafka.acks'), not the other prefix
            head, _, rest = name.partition(".")
            if (family in CLIENT_PREFIXES and rest and client.check(rest, None) is None
                    and difflib.get_close_matches(head + ".", CLIENT_PREFIXES, n=1, cutoff=0.6)):
                return f"unknown config key '{key}' ({source}{why}). Did you mean '{family}{rest}'?"
        topic_setting = re.fullmatch(r"topic[._-]?config[._-](.+)", key[len(family):])
        if family != "properties." and topic_setting:
            preferred.append(TOPIC_CONFIG_PREFIX + topic_setting.group(1))
    found = suggestions(key, candidates, preferred)
    text = f"unknown config key '{key}' ({source}{why})."
    if found:
        return f"{text} Did you mean {_quoted(found)}?"
    return f"{text} {_allowed_in_family(family, client)}"


def _allowed_in_family(family: str, client: Optional[_Client]) -> str:
    """The keys allowed under `family`, as a wrapped list (printed when no key is close)."""
    own = [k for k in known_keys() if _family(k) == family]
    if family in CLIENT_PREFIXES:
        own += [TOPIC_CONFIG_PREFIX + "<name>"] if family == "kafka." else []
        own.append(client.allowed(family) if client else f"{family}<property> for a Kafka "
                                                          f"client property")
        if len(own) > 1:
            own[-1] = "and " + own[-1]
    return f"Allowed under '{family}':" + wrapped(", ".join(own) + ".")


def check_known_keys(model: str, raw: Mapping[str, Any], client: Optional[str] = None,
                     sources: Optional[Mapping[str, str]] = None) -> None:
    """Every key of the adapter's families (OWN_PREFIXES, and CLIENT_PREFIXES: a property of the
    profile's Kafka client `client`) is an option, Amoro's switch, a topic setting or a
    client property: otherwise one error names every bad key of the model, with the closest
    keys ("did you mean"), or the keys allowed where none is close."""
    taker = None
    if any(_family(key) in CLIENT_PREFIXES + ("kafka_",) for key in raw):
        taker = _client(client)
    # where each key was set (config/sources.py): config(), a schema.yml, else dbt_project.yml
    where = (lambda key: sources.get(key, "dbt_project.yml")) if sources is not None else (
        lambda key: "model config")
    problems = [p for p in (_unknown_key(key, value, taker, where(key))
                            for key, value in raw.items()) if p]
    if len(problems) == 1:
        raise LogConfigError(f"Model '{model}': {problems[0]}")
    if problems:
        raise LogConfigError(f"Model '{model}': {len(problems)} unknown config keys:"
                             + "".join(f"\n  - {p}" for p in problems))


def check_profile_properties(model: str, properties: Mapping[str, Any], client: str) -> None:
    """The profile's `kafka_properties` are properties of its `kafka_client`."""
    taker = _client(client)
    if taker is None or not properties:
        return
    problems = []
    for name, value in properties.items():
        refusal = taker.check(str(name), value)
        if refusal is None:
            continue
        if refusal != NO_SUCH_PROPERTY:
            problems.append(f"Kafka client property '{name}' (profile 'kafka_properties') is "
                            f"refused by {taker.library}: {refusal}. Allowed: a value "
                            f"{taker.library} takes.")
            continue
        found = suggestions(str(name), taker.names)
        text = (f"unknown Kafka client property '{name}' (profile 'kafka_properties'): "
                f"{taker.library} has no such property.")
        problems.append(f"{text} Did you mean {_quoted(found)}?" if found
                        else f"{text} Allowed:" + wrapped(taker.allowed() + "."))
    if len(problems) == 1:
        raise ProfileConfigError(model, problems[0])
    if problems:
        raise ProfileConfigError(model, f"{len(problems)} Kafka client properties of the profile "
                                        f"are not taken:" + "".join(f"\n  - {p}" for p in problems))


def pass_through(model: str, raw: Mapping[str, Any], profile_properties: Mapping[str, str],
                 client: Optional[str] = None) -> Tuple[Dict[str, str], Dict[str, str]]:
    """Client properties (`kafka.*`, `properties.*`, prefix stripped) and topic settings; the
    profile's `kafka_properties` must be properties of its Kafka client `client` (the model's
    were checked by check_known_keys)."""
    if client is not None:
        check_profile_properties(model, profile_properties, client)
    client_properties: Dict[str, str] = dict(profile_properties)
    from_model: Dict[str, str] = {}
    topic_config: Dict[str, str] = {}
    for key, value in raw.items():
        if value is None:
            continue
        if key.startswith(TOPIC_CONFIG_PREFIX):
            topic_config[key[len(TOPIC_CONFIG_PREFIX):]] = str(value)
            continue
        prefix = next((p for p in CLIENT_PREFIXES if key.startswith(p)), None)
        if prefix is None or key in SPELLINGS:
            continue
        name = key[len(prefix):]
        if name in from_model and str(from_model[name]) != str(value):
            raise LogConfigError(
                f"Model '{model}': Kafka property '{name}' is given twice with different values "
                f"('kafka.{name}' and 'properties.{name}'). Give it once.")
        from_model[name] = str(value)
    client_properties.update(from_model)  # the model's own setting wins over the profile default
    return client_properties, topic_config
