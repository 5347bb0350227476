#!/usr/bin/env bash
# A real class's machine, set up (or put right again) for deploy/jupyterhub/jupyterhub_config.py with
# the `local` spawner. Run as root, with the same COURSE_* variables as the hub; safe to run again (after
# adding learners, after a `git pull`, after constraints.txt changed).
#
#   sudo COURSE_LEARNERS=ada,alan deploy/jupyterhub/setup-class.sh
#
# What it makes true, and then checks as a learner would:
# - a unix user per learner (group COURSE_LEARNER_GROUP, home mode 0700), the instructor and the grading
#   user (group COURSE_STAFF_GROUP; no learner is in it); a unix user per grader of COURSE_GRADERS (group
#   COURSE_GRADER_GROUP, home 0700, never staff: a grader reaches the course through the hub's shared
#   Formgrader and the grading service alone, and is kept out of the repository and the course directory
#   exactly as a learner is);
# - the repository (solutions, grader/rubrics, the hidden specs, the course's environment .venv) group
#   staff, closed to everyone else (o-rwx); the course directory owned by the grading user, group staff,
#   closed to everyone else; the hub's state folder (database, cookie secret) root's alone;
# - nbgrader's exchange: its root sticky (a learner cannot rename or replace the course's folder) and the
#   course's folder there created by the instructor's user before any learner can; its inbound folder
#   sticky too (nbgrader's 2733 plus 1000: a learner cannot rename a classmate's submission away);
# - the learners' environment COURSE_LEARNER_ENV: the third-party packages only (pyproject.toml's, pinned
#   by constraints.txt, no course package: a released chapter folder carries what it needs) and a copy of
#   this folder's Jupyter config for learners' servers, and JupyterLab's Help menu leading to the grading
#   page (lab_settings.py; unless COURSE_GRADING_SERVICE=off), on the service's own origin when
#   COURSE_HUB_SUBDOMAIN_HOST is set. Rebuilt only when constraints.txt or pyproject.toml changed.
#
# Set COURSE_HUB_SUBDOMAIN_HOST (the hub's address, https://hub.example.org, with wildcard DNS and a wildcard
# certificate for *.hub.example.org) for the hub and here: without it every learner's server shares the
# instructor's origin, and a page a learner serves runs with the instructor's session when they open it.
set -euo pipefail

fail() { echo "setup-class.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (sudo): it creates users and changes owners"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
INSTRUCTOR=${COURSE_INSTRUCTOR:-instructor}
GRADING_USER=${COURSE_GRADING_USER:-$INSTRUCTOR}
STAFF=${COURSE_STAFF_GROUP:-course-staff}
LEARNER_GROUP=${COURSE_LEARNER_GROUP:-course-learners}
GRADER_GROUP=${COURSE_GRADER_GROUP:-course-graders}
HOME_BASE=${COURSE_HOME_BASE:-/home}  # where the homes of users created here go
EXCHANGE=${COURSE_EXCHANGE_ROOT:-/srv/nbgrader/exchange}
STATE=${COURSE_HUB_STATE:-/srv/jupyterhub}
LEARNER_ENV=${COURSE_LEARNER_ENV:-/srv/course/learners-env}
COURSE_ID=transformers-from-scratch  # as nbgrader_config.py
IFS=, read -r -a LEARNERS <<< "${COURSE_LEARNERS:-}"
IFS=, read -r -a GRADERS <<< "${COURSE_GRADERS:-}"

ensure_group() { getent group "$1" >/dev/null || groupadd --system "$1"; }
ensure_user() {
    id -u "$1" >/dev/null 2>&1 || useradd --create-home --home-dir "$HOME_BASE/$1" --shell /bin/bash --user-group "$1"
}
home_of() { getent passwd "$1" | cut -d: -f6; }
as_user() { local user=$1; shift; runuser -u "$user" -- "$@"; }

ensure_group "$STAFF"
ensure_group "$LEARNER_GROUP"
ensure_group "$GRADER_GROUP"
for user in "$INSTRUCTOR" "$GRADING_USER"; do
    ensure_user "$user"
    usermod -a -G "$STAFF" "$user"
    chgrp "$STAFF" "$(home_of "$user")" && chmod 0750 "$(home_of "$user")"
done
for learner in "${LEARNERS[@]}"; do
    learner=$(echo "$learner" | tr -d '[:space:]')
    [ -n "$learner" ] || continue
    [ "$learner" != "$INSTRUCTOR" ] && [ "$learner" != "$GRADING_USER" ] || fail "$learner is staff, not a learner"
    ensure_user "$learner"
    usermod -a -G "$LEARNER_GROUP" "$learner"
    if id -nG "$learner" | tr ' ' '\n' | grep -qx "$STAFF"; then gpasswd -d "$learner" "$STAFF" >/dev/null; fi
    chmod 0700 "$(home_of "$learner")"
done
for grader in "${GRADERS[@]}"; do
    grader=$(echo "$grader" | tr -d '[:space:]')
    [ -n "$grader" ] || continue
    [ "$grader" != "$INSTRUCTOR" ] && [ "$grader" != "$GRADING_USER" ] || fail "$grader is staff, not a grader"
    for learner in "${LEARNERS[@]}"; do
        [ "$(echo "$learner" | tr -d '[:space:]')" != "$grader" ] || fail "$grader is a learner and a grader"
    done
    ensure_user "$grader"
    usermod -a -G "$GRADER_GROUP" "$grader"
    if id -nG "$grader" | tr ' ' '\n' | grep -qx "$STAFF"; then gpasswd -d "$grader" "$STAFF" >/dev/null; fi
    chmod 0700 "$(home_of "$grader")"
done

# The nbgrader source folders are generated, not committed: built while the repository is still writable.
"$REPO/.venv/bin/grader" build --quiet >/dev/null || fail "grader build failed (the source folders under $REPO/grader)"
# The repository: the answers, rubrics and hidden tests, and the environment that imports them.
chgrp -R "$STAFF" "$REPO"
chmod -R g+rX,o-rwx "$REPO"
COURSE=${COURSE_DIRECTORY:-$(home_of "$INSTRUCTOR")/course}
mkdir -p "$COURSE"
chown -R "$GRADING_USER:$STAFF" "$COURSE"
chmod -R g+rwX,o-rwx "$COURSE"
find "$COURSE" -type d -exec chmod g+s {} +  # what the instructor writes there stays the staff's
mkdir -p "$STATE"
chmod 0700 "$STATE"

# nbgrader's exchange. nbgrader wants its root writable by all (it chmods it back to 0777 otherwise, but
# keeps a sticky bit); the course's folder is the instructor's, made here with nbgrader's own modes, and
# inbound sticky besides: every learner writes there, and without it any of them renames a classmate's folder away.
mkdir -p "$EXCHANGE/$COURSE_ID"
chmod 1777 "$EXCHANGE"
chown "$INSTRUCTOR:$STAFF" "$EXCHANGE/$COURSE_ID"
chmod 0755 "$EXCHANGE/$COURSE_ID"
for folder in outbound:0755 inbound:3733 feedback:0711; do
    mkdir -p "$EXCHANGE/$COURSE_ID/${folder%%:*}"
    chown "$INSTRUCTOR:$STAFF" "$EXCHANGE/$COURSE_ID/${folder%%:*}"
    chmod "${folder##*:}" "$EXCHANGE/$COURSE_ID/${folder%%:*}"
done

# The learners' environment, from a Python every user can run (the course's own may sit under a home
# only root enters).
PROBE=nobody
for learner in "${LEARNERS[@]}"; do [ -n "$learner" ] && PROBE=$learner && break; done
PYTHON=${COURSE_LEARNER_PYTHON:-$("$REPO/.venv/bin/python" -c 'import sys; print(sys._base_executable)')}
if [ -z "${COURSE_LEARNER_PYTHON:-}" ] && ! as_user nobody "$PYTHON" -c pass 2>/dev/null; then
    PYTHON=$(command -v python3) && [ "${PYTHON#/root/}" = "$PYTHON" ] || PYTHON=/usr/bin/python3
fi
WANT=$(cat "$REPO/constraints.txt" "$REPO/pyproject.toml" "$PYTHON" 2>/dev/null | sha256sum | cut -d' ' -f1)
if [ "$(cat "$LEARNER_ENV/.course-build" 2>/dev/null)" != "$WANT" ]; then
    echo "building the learners' environment in $LEARNER_ENV from $PYTHON (minutes)"
    rm -rf "$LEARNER_ENV"
    "$PYTHON" -m venv "$LEARNER_ENV"
    "$LEARNER_ENV/bin/python" -m pip install -q --upgrade pip
    mapfile -t PACKAGES < <("$LEARNER_ENV/bin/python" - "$REPO/pyproject.toml" <<'EOF'
import sys
import tomllib

project = tomllib.load(open(sys.argv[1], "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["hub"]))
EOF
    )
    "$LEARNER_ENV/bin/python" -m pip install -q -c "$REPO/constraints.txt" "${PACKAGES[@]}"
    echo "$WANT" > "$LEARNER_ENV/.course-build"
fi
rm -rf "$LEARNER_ENV/etc/course"
mkdir -p "$LEARNER_ENV/etc/course"
cp -r "$REPO/deploy/jupyterhub/nbgrader_config.py" "$REPO/deploy/jupyterhub/jupyter_server_config.py" \
    "$REPO/deploy/jupyterhub/learner" "$LEARNER_ENV/etc/course/"
LAB_SETTINGS="$LEARNER_ENV/share/jupyter/lab/settings"  # JupyterLab's app settings directory in that env
if [ "${COURSE_GRADING_SERVICE:-on}" != off ]; then
    "$LEARNER_ENV/bin/python" "$REPO/deploy/jupyterhub/lab_settings.py" "$LAB_SETTINGS" >/dev/null
else
    rm -f "$LAB_SETTINGS/overrides.json"  # no service: no link to it
fi
chown -R root:root "$LEARNER_ENV"
chmod -R a+rX,go-w "$LEARNER_ENV"
for folder in "$(dirname "$LEARNER_ENV")" "$(dirname "$EXCHANGE")"; do chmod a+rx "$folder"; done

[ -n "${COURSE_HUB_SUBDOMAIN_HOST:-}" ] || echo "setup-class.sh: warning: COURSE_HUB_SUBDOMAIN_HOST is not set:" \
    "every learner's server shares the hub's origin, and a page a learner serves runs with the session of" \
    "whoever opens it (guides/teaching.md: One origin per server)" >&2

# Checked as a learner (or nobody), a grader and the grading user: what must work, and what must not.
as_user "$PROBE" "$LEARNER_ENV/bin/python" -c 'import jupyterhub, nbgrader, torch' \
    || fail "$PROBE cannot run the learners' environment $LEARNER_ENV (built from $PYTHON: COURSE_LEARNER_PYTHON)"
GRADER_PROBE=
for grader in "${GRADERS[@]}"; do [ -n "$grader" ] && GRADER_PROBE=$(echo "$grader" | tr -d '[:space:]') && break; done
for user in "$PROBE" ${GRADER_PROBE:+"$GRADER_PROBE"}; do
    for closed in "$REPO/solutions" "$REPO/grader/rubrics" "$REPO/grader/boundary" "$COURSE"; do
        ! as_user "$user" ls "$closed" >/dev/null 2>&1 || fail "$user can read $closed"
    done
    ! as_user "$user" test -w "$COURSE/term.toml" || fail "$user can write $COURSE/term.toml"
done
! as_user "$PROBE" "$LEARNER_ENV/bin/python" -c 'import solutions' 2>/dev/null \
    || fail "the learners' environment imports the answers"
as_user "$GRADING_USER" "$REPO/.venv/bin/grader" --help >/dev/null \
    || fail "$GRADING_USER cannot run $REPO/.venv/bin/grader: a folder above the repository, or the Python its" \
            ".venv was built from, is closed to them"
echo "class set up: staff $INSTRUCTOR${GRADING_USER:+ (grading: $GRADING_USER)}, ${#LEARNERS[@]} learner(s)," \
     "${#GRADERS[@]} grader(s);" \
     "course $COURSE; learners' environment $LEARNER_ENV"
