"""An LMS download (a zip, or a flat folder) read as one folder per learner.

An LMS names each file after the learner who uploaded it:
- Canvas: `<login>[_LATE|_late]_<user id>_<attachment id>_<file name>`, a re-upload of one file name
  getting `-1`, `-2`, ... before the extension;
- Moodle: `<Full Name>_<id>_assignsubmission_file_<file name>` (older) or a folder
  `<Full Name>_<id>_assignsubmission_file/<file name>` (newer);
- anything else: `--pattern REGEX` with the named groups `student` and, optionally, `user` (the LMS's
  id of the learner; default: `student`), `file` (the notebook's own name; default: the whole name)
  and `timestamp` (ISO 8601), as nbgrader's zip_collect.
A learner is keyed by the LMS's own user id, never by the name in the file name (a display name, which
two learners may share and a learner may change): the unpacked folder, so the gradebook's student id,
is the user id, and `lms/learners.csv` lists each id with the name(s) the download gave it. Two
learners sharing a name never shadow each other, and nothing one learner sends stops the batch.
Every file is matched to one learner and one chapter or listed as unmatched, with its name and why.
When a learner sent one chapter twice, the later one counts (by the LMS time where the pattern gives
one, else the resubmission number, else Canvas's attachment id, which grows with every upload), and
the notes say which file won and by what; when nothing tells them apart neither is graded (a note
says so, to check by hand), never a guess.
"""
from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from grader.classroom.intake.csvsafe import write_rows
from grader.classroom.intake.identity import NotALearner, admit_student
from grader.classroom.submissions import MAX_NOTEBOOK_MB, BadSubmission, identify_with_rule, write_timestamp

CANVAS = re.compile(r"^(?P<student>[^_/]+?)(?P<late>_(?:LATE|late))?"
                    r"_(?P<user>\d+)_(?P<attachment>\d+)_(?P<file>[^/]+)$")
MOODLE = re.compile(r"^(?P<student>[^/]+?)_(?P<user>\d+)_assignsubmission_file[_/](?P<file>[^/]+)$")
PATTERNS = {"Canvas": CANVAS, "Moodle": MOODLE}
RESUBMISSION = re.compile(r"^(?P<stem>.+?)-(?P<number>\d+)(?P<ext>\.[^.]+)$")
IGNORED = ("__MACOSX/", ".DS_Store")
LEARNERS = "lms-learners.csv"
# A late policy needs the time of each submission; a Canvas download gives only this mark.
LATE_WITHOUT_TIME = ("Canvas marks it late, but a Canvas download carries no submission time, so no late penalty "
                     "is computed here (graded as on time). To apply the term's policy, give the time: rename the file "
                     "with it and use --pattern with (?P<timestamp>...), or grade it alone with --submitted-at; or "
                     "let Canvas's own late policy deduct after the import")


@dataclass
class Upload:
    name: str  # as in the download (a path inside the zip or folder)
    student: str  # the name the file name gives (shown, never an identity)
    file: str  # the learner's own file name, LMS prefix and resubmission number removed
    resubmission: int = 0
    attachment: int = 0
    submitted_at: datetime | None = None
    late: bool = False  # Canvas's mark: said in the notes (LATE_WITHOUT_TIME); no time, so no penalty here
    user: str = ""  # the LMS's id of the learner: who it is

    def __post_init__(self):
        self.user = self.user or self.student

    def order(self) -> tuple:
        return (self.submitted_at or datetime.min.replace(tzinfo=timezone.utc), self.resubmission, self.attachment)

    def why_later(self, other: Upload) -> str:
        if (self.submitted_at or other.submitted_at) and self.submitted_at != other.submitted_at:
            return f"submitted later ({self.submitted_at:%Y-%m-%d %H:%M:%S %Z})"
        if self.resubmission != other.resubmission:
            return f"resubmission number {self.resubmission}"
        return f"uploaded later (Canvas attachment id {self.attachment} > {other.attachment})"


def compile_pattern(pattern: str) -> re.Pattern:
    try:
        regex = re.compile(pattern)
    except re.error as err:
        raise ValueError(f"--pattern {pattern!r} is not a regular expression: {err}") from None
    if "student" not in regex.groupindex:
        raise ValueError(f"--pattern {pattern!r} needs a named group (?P<student>...) for the learner")
    return regex


def match(name: str, regex: re.Pattern | None = None) -> Upload | None:
    """The learner and file a download's file name carries; None when no LMS pattern fits."""
    candidates = [regex] if regex else list(PATTERNS.values())
    for candidate in candidates:
        found = candidate.fullmatch(name) or candidate.fullmatch(name.rsplit("/", 1)[-1])
        if not found:
            continue
        groups = found.groupdict()
        own = (groups.get("file") or name).rsplit("/", 1)[-1]
        upload = Upload(name, groups["student"].strip(), own, attachment=int(groups.get("attachment") or 0),
                        late=bool(groups.get("late")), user=(groups.get("user") or "").strip())
        if groups.get("timestamp"):
            try:
                stamp = datetime.fromisoformat(groups["timestamp"])
            except ValueError:
                raise ValueError(f"{name}: the pattern's timestamp {groups['timestamp']!r} is not ISO 8601") from None
            upload.submitted_at = stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
        resubmitted = RESUBMISSION.fullmatch(own)
        if resubmitted:
            upload.file = resubmitted["stem"] + resubmitted["ext"]
            upload.resubmission = int(resubmitted["number"])
        return upload if upload.student else None
    return None


def is_download(folder: Path) -> bool:
    """A flat folder of files (or Moodle's per-submission folders), not one folder per learner."""
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return (any(p.is_file() and (p.suffix == ".ipynb" or match(p.name)) for p in entries)
            or any(MOODLE.fullmatch(p.name + "_x") for p in entries if p.is_dir()))


def _files(source: Path, into: Path) -> dict[str, Path]:
    """Every file of the download by its name there, copied out of a zip into `into`."""
    if source.is_dir():
        return {p.relative_to(source).as_posix(): p for p in sorted(source.rglob("*"))
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(source).parts)}
    files = {}
    with zipfile.ZipFile(source) as archive:
        for index, info in enumerate(archive.infolist()):
            if info.is_dir() or any(marker in info.filename for marker in IGNORED):
                continue
            target = into / str(index)  # never a path taken from the archive
            with target.open("wb") as out:
                if info.file_size > MAX_NOTEBOOK_MB * 2 ** 20:
                    out.truncate(info.file_size)  # never inflated: see _copy
                else:
                    shutil.copyfileobj(archive.open(info), out)
            files[info.filename] = target
    return files


def _copy(source: Path, target: Path) -> None:
    """A file over the notebook size limit travels as an empty sparse file of its size: staging refuses
    it by its size alone, with the reason (grader.classroom.submissions), and a zip bomb is never written out."""
    size = source.stat().st_size
    if size > MAX_NOTEBOOK_MB * 2 ** 20:
        with target.open("wb") as out:
            out.truncate(size)
    else:
        shutil.copyfile(source, target)


def unpack(source: Path, lms_dir: Path, pattern: str | None = None) -> list[str]:
    """Unpack a download into `lms_dir/<student>/<assignment>/<notebook>` (one folder per learner, as
    grader.classroom.intake.collect reads it); the notes: what was unpacked, unmatched or superseded."""
    regex = compile_pattern(pattern) if pattern else None
    if source.resolve() == lms_dir.resolve() or lms_dir.resolve() in source.resolve().parents:
        raise ValueError(f"{source} is inside {lms_dir}, which grader rewrites: put the download elsewhere")
    shutil.rmtree(lms_dir, ignore_errors=True)
    lms_dir.mkdir(parents=True)
    notes, chosen, names, tied = [], {}, {}, set()
    with tempfile.TemporaryDirectory(prefix="grader-lms-") as tmp:
        files = _files(source, Path(tmp))
        if not files:
            raise ValueError(f"{source}: the LMS download holds no files")
        for number, (name, path) in enumerate(files.items()):
            try:
                upload = match(name, regex)
            except ValueError as err:  # one file's name, never the whole download
                notes.append(f"unmatched: {err}")
                continue
            if upload is None:
                which = "--pattern" if regex else "neither the Canvas nor the Moodle pattern"
                notes.append(f"unmatched: {name}: the name carries no learner ({which} does not match)")
                continue
            try:  # the user id becomes a folder name and the gradebook's student id
                admit_student(upload.user)
            except NotALearner as err:
                notes.append(f"refused: {name!r}: learner {upload.user!r}: {err} (graded for nobody)")
                continue
            named = Path(tmp) / "named" / str(number) / upload.file  # the chapter is told by the learner's own name
            named.parent.mkdir(parents=True)
            _copy(path, named)
            try:
                chapter, rule = identify_with_rule(named)
            except BadSubmission as err:
                notes.append(f"unmatched: {name}: learner {upload.student!r}, but {err}")
                continue
            if rule:
                notes.append(f"recognised: {name}: {rule}")
            names.setdefault(upload.user, set()).add(upload.student)
            key = (upload.user, chapter)
            if key in chosen:
                earlier, _ = chosen[key]
                if earlier.order() == upload.order():
                    tied.add(key)
                    notes.append(f"not graded: {earlier.name} and {name} are both {_who(upload)}'s "
                                 f"{chapter.assignment} and nothing says which is later; check by hand")
                    continue
                later, superseded = (upload, earlier) if upload.order() > earlier.order() else (earlier, upload)
                notes.append(f"resubmitted: {_who(upload)} {chapter.assignment}: {later.name} counts, "
                             f"{later.why_later(superseded)}; {superseded.name} is not graded")
                if later is earlier:
                    continue
                tied.discard(key)
            chosen[key] = (upload, named)
        for key in tied:
            del chosen[key]
        for (user, chapter), (upload, named) in chosen.items():
            folder = lms_dir / user / chapter.assignment
            folder.mkdir(parents=True, exist_ok=True)
            _copy(named, folder / chapter.notebook_name)
            if upload.submitted_at:
                write_timestamp(folder / "timestamp.txt", upload.submitted_at)
            if upload.late and not upload.submitted_at:
                notes.append(f"late: {upload.name}: {LATE_WITHOUT_TIME}")
    write_rows(lms_dir.parent / LEARNERS, ["student_id", "names in the download"],
               [{"student_id": user, "names in the download": "; ".join(sorted(given))}
                for user, given in sorted(names.items())])
    shared = {n for n in set().union(*names.values()) if sum(n in given for given in names.values()) > 1} \
        if names else set()
    for name in sorted(shared):
        notes.append(f"shared name: {name!r} is the name of learners "
                     f"{', '.join(u for u, given in sorted(names.items()) if name in given)}: each graded as their own")
    notes.insert(0, f"LMS download {source}: {len(chosen)} submission(s) from {len({s for s, _ in chosen})} "
                    f"learner(s) unpacked into {lms_dir} (each learner's folder is their LMS user id: "
                    f"{lms_dir.parent / LEARNERS} gives their names)")
    return notes


def _who(upload: Upload) -> str:
    return upload.user if upload.user == upload.student else f"{upload.student} (user {upload.user})"
