"""Kubernetes' name and label rules: the one model every stack key, check and doc reads.

Upstream: k8s.io/apimachinery v0.35.7 (Kubernetes 1.35, `versions.KUBERNETES_VERSION`),
pkg/api/validate/content/dns.go (`IsDNS1123Label`, `IsDNS1123Subdomain`), kube.go
(`IsLabelKey`, `IsLabelValue`) and pkg/util/validation/validation.go (`IsDNS1035Label`),
read from the kubernetes/apimachinery mirror on 2026-11-30. Their own test cases are
tests/test_k8s_names.py's fixtures.

The patterns are upstream's formats, unanchored, for a JSON Schema (`stack.base.matching`
anchors them); the functions add the length limits. Go's `$` is the end of the text, so the
compiled forms end in `\\Z` (Python's `$` also matches before a final newline).
"""

from __future__ import annotations

import re

# content/dns.go dns1123LabelFmt, DNS1123LabelMaxLength
DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL_MAX = 63
# content/dns.go dns1123SubdomainFmt, DNS1123SubdomainMaxLength
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + r")*"
DNS1123_SUBDOMAIN_MAX = 253
# validation.go dns1035LabelFmt, DNS1035LabelMaxLength
DNS1035_LABEL = r"[a-z]([-a-z0-9]*[a-z0-9])?"
DNS1035_LABEL_MAX = 63
# content/kube.go labelKeyFmt (a label key's name part, a "qualified name"), labelKeyMaxLength
LABEL_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_NAME_MAX = 63
# content/kube.go labelValueFmt, LabelValueMaxLength: empty, or a label key's name part
LABEL_VALUE = "(" + LABEL_NAME + ")?"
LABEL_VALUE_MAX = 63

DNS1035 = re.compile(DNS1035_LABEL + r"\Z")
_LABEL = re.compile(DNS1123_LABEL + r"\Z")
_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN + r"\Z")
_NAME = re.compile(LABEL_NAME + r"\Z")
_VALUE = re.compile(LABEL_VALUE + r"\Z")


def is_dns1123_label(value: str) -> bool:
    """`IsDNS1123Label`: a namespace, a team, a Service port name's kin."""
    return len(value) <= DNS1123_LABEL_MAX and bool(_LABEL.match(value))


def is_dns1123_subdomain(value: str) -> bool:
    """`IsDNS1123Subdomain`: most object names (a PersistentVolumeClaim's, a Secret's)."""
    return len(value) <= DNS1123_SUBDOMAIN_MAX and bool(_SUBDOMAIN.match(value))


def is_dns1035_label(value: str) -> bool:
    """`IsDNS1035Label`: a Service's name (an operator names one after each job pod)."""
    return len(value) <= DNS1035_LABEL_MAX and bool(DNS1035.match(value))


def is_label_key(value: str) -> bool:
    """`IsLabelKey`: an optional DNS-1123 subdomain prefix and '/', then a name part."""
    prefix, _, name = value.rpartition("/")
    if "/" in prefix or ("/" in value and not is_dns1123_subdomain(prefix)):
        return False
    return len(name) <= LABEL_NAME_MAX and bool(_NAME.match(name))


def is_label_value(value: str) -> bool:
    """`IsLabelValue`: empty, or at most 63 of the name part's characters."""
    return len(value) <= LABEL_VALUE_MAX and bool(_VALUE.match(value))
