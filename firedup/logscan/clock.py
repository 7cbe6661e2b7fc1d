"""Timestamps: a stamp's text parsed once, and partial stamps made whole by borrowing what they
omit from earlier lines."""

from __future__ import annotations

import calendar
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Optional, Tuple  # noqa: UP035 - RawStamp is built at runtime on 3.8

# (year, month, day, hour, minute, second, microsecond); None where the log omits it.
RawStamp = Tuple[Optional[int], Optional[int], Optional[int], int, int, int, int]  # noqa: UP006, UP045


@lru_cache(maxsize=64)  # neighbouring lines share their second: parse each stamp once
def stamp_of(date: str | None, time: str, frac: str | None) -> RawStamp:
    if date is None:
        return (None, None, None, *hms(time), _micro(frac))
    year, month, day = date.split("-")
    return (int(year), int(month), int(day), *hms(time), _micro(frac))


@lru_cache(maxsize=64)
def month_day_stamp(month_day: str, time: str, frac: str | None) -> RawStamp:
    month, day = month_day.split("-")
    return (None, int(month), int(day), *hms(time), _micro(frac))


def iso_stamp(text: str) -> RawStamp:
    date, _, rest = text.partition("T")
    time, _, frac = rest.partition(".")
    return stamp_of(date, time, frac or None)


def hms(time: str) -> tuple[int, int, int]:
    hour, minute, second = time.split(":")
    return int(hour), int(minute), int(second)


def _micro(frac: str | None) -> int:
    return int(frac[:6].ljust(6, "0")) if frac else 0


class Clock:
    """Turns partial timestamps into datetimes, borrowing what they omit from earlier lines.

    vLLM and journalctl print no year and old SGLang prints only the time of day; the missing
    parts come from the last complete timestamp, else from `year` (the caller may know it:
    the file's mtime, today), else 1900-01-01. A time-only stamp that jumps back by more than
    12 hours has crossed midnight.
    """

    def __init__(self, year: int | None = None) -> None:
        self.last: datetime | None = None
        self._year = year
        self._cache: tuple[RawStamp, datetime] | None = None

    def resolve(self, raw: RawStamp | None) -> datetime | None:
        if raw is None:
            return None
        if self._cache is not None and self._cache[0] == raw:
            return self._cache[1]
        moment = self._build(raw)
        if moment is not None:
            self.last = moment
            self._cache = (raw, moment)
        return moment

    def _build(self, raw: RawStamp) -> datetime | None:
        year, month, day, hour, minute, second, micro = raw
        try:
            if year is not None and month is not None and day is not None:
                self._year = year
                return datetime(year, month, day, hour, minute, second, micro)
            if month is not None and day is not None:
                return datetime(
                    self._guess_year(month, day), month, day, hour, minute, second, micro
                )
            return self._time_only(hour, minute, second, micro)
        except ValueError:  # an impossible date is noise, not a reason to fail the scan
            return None

    def _guess_year(self, month: int, day: int) -> int:
        year = self._year or (self.last.year if self.last else 1900)
        if (month, day) == (2, 29) and not calendar.isleap(year):
            return 2000
        return year

    def _time_only(self, hour: int, minute: int, second: int, micro: int) -> datetime:
        base = self.last or datetime(self._year or 1900, 1, 1)
        moment = base.replace(hour=hour, minute=minute, second=second, microsecond=micro)
        if self.last is not None and moment < self.last - timedelta(hours=12):
            moment += timedelta(days=1)
        return moment
