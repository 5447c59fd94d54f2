"""Where a local run parks the arrivals refused at the door (the local stand-in for queue A's DLQ):
``<workspace>/quarantine/<key>.json`` with the reason, kept until the same key is accepted (fixed and
sent again), read by ``lakeline status`` and ``lakeline dlq list``. The local deployment's runs park in
``<workspace>/deployed/quarantine/`` the files of a table they could not make, which they never upload."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class Quarantine:
    root: Path

    @classmethod
    def of(cls, workspace_root: Path) -> Quarantine:
        return cls(workspace_root / "quarantine")

    @classmethod
    def of_deployment(cls, workspace_root: Path) -> Quarantine:
        """The local deployment's, apart from the embedded runtime's in the same workspace."""
        return cls(workspace_root / "deployed" / "quarantine")

    def record(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def park(self, key: str, reason: str) -> None:
        path = self.record(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "reason": reason, "at": datetime.now(UTC).isoformat()}, indent=1))

    def release(self, key: str) -> None:
        self.record(key).unlink(missing_ok=True)

    def _records(self) -> list[Path]:
        return sorted(self.root.rglob("*.json")) if self.root.is_dir() else []

    def _key(self, record: Path) -> str:
        return record.relative_to(self.root).as_posix().removesuffix(".json")

    def prune(self, raw_dir: Path) -> None:
        """Forget the refused files the user has removed since."""
        for record in self._records():
            if not (raw_dir / self._key(record)).exists():
                record.unlink()

    def parked_record(self, key: str) -> dict[str, str] | None:
        """What was recorded when ``key`` was parked (``reason``, ``at``), or ``None`` if it is not."""
        record = self.record(key)
        return {k: str(v) for k, v in json.loads(record.read_text()).items()} if record.is_file() else None

    def parked(self) -> list[tuple[str, str]]:
        """``(key, reason)`` of every file parked, by key."""
        return [(self._key(record), json.loads(record.read_text()).get("reason", "")) for record in self._records()]
