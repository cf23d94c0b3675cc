"""pprof profiles (`profile.proto`, gzip-compressed or plain) -> stacks of one sample type, leaf first.

The schema is github.com/google/pprof's proto/profile.proto. Its messages are declared below (the fields read,
by their numbers there; the others are skipped as unknown fields) and decoded by Google's protobuf runtime, so no
generated code or protoc is needed and no protobuf major version is pinned. string_table is read as bytes so a
name that is not UTF-8 is replaced, not refused. Continuous profilers write this format: Pyroscope, Parca and the
OpenTelemetry eBPF profiler it is built on, Go's runtime/pprof and `go tool pprof -proto`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from perfreport.errors import InputError
from perfreport.timeshare.model import quoted
from perfreport.timeshare.stacks import Frame

EXPECTED = "a pprof profile (profile.proto, gzip-compressed as pprof writes it: `.pb.gz`)"
_F = descriptor_pb2.FieldDescriptorProto
_INT64, _UINT64, _BYTES = _F.TYPE_INT64, _F.TYPE_UINT64, _F.TYPE_BYTES
# message -> (field, number, type or message name, repeated); numbers as in pprof's proto/profile.proto
_SCHEMA: dict[str, list[tuple[str, int, int | str, bool]]] = {
    "Profile": [("sample_type", 1, "ValueType", True), ("sample", 2, "Sample", True),
                ("location", 4, "Location", True), ("function", 5, "Function", True),
                ("string_table", 6, _BYTES, True), ("default_sample_type", 14, _INT64, False)],
    "ValueType": [("type", 1, _INT64, False), ("unit", 2, _INT64, False)],
    "Sample": [("location_id", 1, _UINT64, True), ("value", 2, _INT64, True)],
    "Location": [("id", 1, _UINT64, False), ("address", 3, _UINT64, False), ("line", 4, "Line", True)],
    "Line": [("function_id", 1, _UINT64, False)],
    "Function": [("id", 1, _UINT64, False), ("name", 2, _INT64, False), ("system_name", 3, _INT64, False)],
}
_PACKAGE = "perfreport.pprof"


class NotPprof(InputError):
    """Binary data that does not decode as a pprof profile."""


@cache
def _profile_class() -> Any:
    """The Profile message class, built once from _SCHEMA in a private descriptor pool."""
    proto = descriptor_pb2.FileDescriptorProto(name="perfreport_pprof.proto", package=_PACKAGE, syntax="proto3")
    for message, fields in _SCHEMA.items():
        msg = proto.message_type.add(name=message)
        for name, number, kind, repeated in fields:
            field = msg.field.add(name=name, number=number,
                                  label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if isinstance(kind, str):
                field.type, field.type_name = _F.TYPE_MESSAGE, f".{_PACKAGE}.{kind}"
            else:
                field.type = kind
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(proto.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Profile"))


@dataclass
class Profile:
    """A decoded profile: its sample types ('type/unit'), the default one's index, and its stacks."""

    path: Path
    types: list[str]
    default: int
    msg: Any
    strings: list[str]

    def stacks(self, index: int) -> Iterator[tuple[list[Frame], int]]:
        """(frames leaf first, value of sample type `index`) per sample; a value below 0 is refused."""
        frames_of = self._locations()
        for i, sample in enumerate(self.msg.sample):
            if len(sample.value) != len(self.types):
                raise _damaged(self.path, f"sample {i} has {len(sample.value)} values for {len(self.types)} sample "
                                          f"types")
            value = sample.value[index]
            if value < 0:
                raise InputError(f"'{self.path}': sample {i}: {self.types[index]} is {value}; expected values >= 0. "
                                 f"A diff or delta profile has negative values: import the profile of one window.")
            stack: list[Frame] = []
            for lid in sample.location_id:  # location_id[0] is the leaf
                if lid not in frames_of:
                    raise _damaged(self.path, f"sample {i} names location {lid}, which the profile does not hold")
                stack += frames_of[lid]
            yield stack, value

    def _locations(self) -> dict[int, list[Frame]]:
        """Each location's frames, leaf first: its inlined functions (line[0] is the leaf-most), or its address."""
        names = {}
        for fn in self.msg.function:
            name, system = _string(self, fn.name), _string(self, fn.system_name)
            names[fn.id] = tuple(dict.fromkeys(n for n in (name, system) if n)) or (f"function {fn.id}",)
        out = {}
        for loc in self.msg.location:
            for line in loc.line:
                if line.function_id not in names:
                    raise _damaged(self.path, f"location {loc.id} names function {line.function_id}, which the "
                                              f"profile does not hold")
            out[loc.id] = [names[line.function_id] for line in loc.line] or [(f"0x{loc.address:x}",)]
        return out


def _string(profile: Profile, index: int) -> str:
    if not 0 <= index < len(profile.strings):
        raise _damaged(profile.path, f"string index {index} is beyond its table of {len(profile.strings)} strings")
    return profile.strings[index]


def _damaged(path: Path, what: str) -> InputError:
    return InputError(f"'{path}': a damaged pprof profile ({what}); expected {EXPECTED}. Export or copy it again.")


def read_profile(path: Path, data: bytes) -> Profile:
    """Decode a profile.proto message (already decompressed), or raise saying why it is not one."""
    msg = _profile_class()()
    try:
        msg.ParseFromString(data)
    except DecodeError as exc:  # upb: "Error parsing message with type '...': Wire format was corrupt"
        reason = str(exc).rsplit("': ", 1)[-1] if "': " in str(exc) else "its bytes do not parse"
        raise NotPprof(f"'{path}': binary data that is not a pprof profile (protobuf: {reason}); expected {EXPECTED} "
                       f"or a samples CSV/JSON or folded stacks (docs/timeshare.md). The file is damaged or of "
                       f"another kind.") from None
    strings = [s.decode("utf-8", "replace") for s in msg.string_table]
    if not strings or strings[0] != "" or not msg.sample_type:
        got = "no string table" if not strings else (f"string_table[0] is '{quoted(strings[0])}', not ''"
                                                     if strings[0] else "no sample_type")
        raise NotPprof(f"'{path}': binary data that is not a pprof profile ({got}); expected {EXPECTED}. The "
                       f"file is damaged or of another kind.")
    profile = Profile(path, [], 0, msg, strings)
    profile.types = [f"{_string(profile, t.type)}/{_string(profile, t.unit)}" for t in msg.sample_type]
    default = _string(profile, msg.default_sample_type)  # 0 (unset) is "": then the last type, as pprof does
    kinds = [t.split("/", 1)[0] for t in profile.types]
    profile.default = kinds.index(default) if default in kinds else len(kinds) - 1
    if not msg.sample:
        raise InputError(f"'{path}': a pprof profile with no samples (sample types {', '.join(profile.types)}); "
                         f"export a window in which the profiler sampled the GPU.")
    return profile


def pick_type(profile: Profile, wanted: str | None) -> int:
    """The index of sample type `wanted` ('type' or 'type/unit'), else the profile's default one."""
    if wanted is None:
        return profile.default
    hits = [i for i, t in enumerate(profile.types) if wanted in (t, t.split("/", 1)[0])]
    if len(hits) == 1:
        return hits[0]
    present = ", ".join(profile.types)
    why = f"several sample types are named '{quoted(wanted)}'" if hits else f"no sample type '{quoted(wanted)}'"
    raise InputError(f"'{profile.path}': {why}; the profile has {present} (default "
                     f"{profile.types[profile.default]}). Pass --sample-type with one of them, as type or type/unit.")
