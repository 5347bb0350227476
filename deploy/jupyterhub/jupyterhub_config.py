"""JupyterHub for a class of the course: an instructor and learners, nbgrader's exchange between them.

Start from this file (`make hub` runs it locally; tests/test_hub.py runs a whole class through it).
Every setting a class changes comes from an environment variable, so the file itself stays as shipped:

  COURSE_HUB_PORT         the port learners open (default 8000)
  COURSE_HUB_API_PORT     the hub's API port, where every server reaches the hub (default 8081): fixed, so
                          the learners' servers still answer after the hub restarts
  COURSE_HUB_IP           the address it listens on (default 127.0.0.1; 0.0.0.0 to serve a network)
  COURSE_HUB_SUBDOMAIN_HOST  the hub's own address, e.g. https://hub.example.org (a real class): each user's
                          server gets an origin of its own, https://<user>.hub.example.org, each service
                          https://<name>--service.hub.example.org (wildcard DNS and certificate). Without it
                          (the try-out) every server shares the hub's origin, and a page a learner serves
                          from their server runs, when the instructor opens it, with the instructor's session
  COURSE_HUB_STATE        the hub's database, cookie secret and (simple spawner) homes (default /srv/jupyterhub)
  COURSE_INSTRUCTOR       the instructor's user name, an admin (default instructor)
  COURSE_LEARNERS         comma-separated learner user names allowed in (default: anyone who can log in)
  COURSE_GRADERS          comma-separated graders (teaching assistants), hub group `graders`: each opens the
                          shared Formgrader (/services/formgrader/: hand grading, nothing more) and the grading
                          service's class page, and answers regrade requests; no admin, no course directory
  COURSE_HUB_AUTHENTICATOR  pam (default: the machine's unix accounts) or dummy (a try-out: any user
                          name, one shared password COURSE_HUB_PASSWORD; never for a real class)
  COURSE_LTI              the class's LTI 1.3 folder (platform.json, the tool's key, accounts.json, roster.json;
                          guides/teaching.md: The course in your LMS): learners launch from the LMS
                          (grader.classroom.lti.hub), its roster joins COURSE_LEARNERS and COURSE_GRADERS, and
                          the grading service posts each chapter's total to the LMS gradebook
  COURSE_HUB_SPAWNER      local (default, a real class: each learner's server runs as their own unix user,
                          from the learners' environment; deploy/jupyterhub/setup-class.sh sets the machine up
                          and the hub refuses to start until it has) or simple (a try-out: every server
                          runs as the hub's user from the course's own environment, a home per learner under
                          COURSE_HUB_STATE/home: no isolation; learners can read the answers and hidden tests)
  COURSE_LEARNER_ENV      the learners' environment (default /srv/course/learners-env): the third-party
                          packages only, no course package, built by setup-class.sh (`local` only)
  COURSE_EXCHANGE_ROOT    nbgrader's exchange (default /srv/nbgrader/exchange; read by nbgrader_config.py)
  COURSE_DIRECTORY        the instructor's nbgrader course directory (default ~instructor/course)
  COURSE_SERVER_ARGS      extra command-line options for every single-user server
  COURSE_GRADING_SERVICE  on (default) or off: the grading service, `grader serve`, which grades each
                          submission of a chapter that term.toml's [on_submit] switches on, as it
                          arrives, and serves /services/grading/ (guides/teaching.md: Grading on submit)
  COURSE_GRADING_USER     the unix user the service runs as (default: the instructor, who owns the
                          course directory; with the simple spawner, the hub's own user); the shared
                          Formgrader too (formgrader/shared_formgrader.py: what it refuses, and why)

A real class: `sudo deploy/jupyterhub/setup-class.sh` with the same variables (a unix user per learner,
the repository, the course directory and the hub's state closed to learners, the learners' environment),
then this file with the `local` spawner and PAM or an OAuth/LTI authenticator (LTI from the LMS).
"""
import os
import runpy
import shlex
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BIN = Path(sys.executable).parent  # the environment JupyterHub runs in also runs the learners' servers
env = os.environ.get


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def require_free(ip: str, port: int, proxy_pid_file: Path) -> None:
    """The proxy serves the hub's port; on a busy port it dies while JupyterHub goes on to log "JupyterHub
    is now running". Stop here instead, unless the port is held by this hub's own proxy from an
    earlier run, which JupyterHub stops first (its pid file)."""
    with socket.socket() as sock:
        try:
            sock.bind((ip, port))
            return
        except OSError as err:
            reason = err.strerror
    if proxy_pid_file.exists():
        try:
            os.kill(int(proxy_pid_file.read_text().strip()), 0)
            return
        except (ValueError, OSError):
            pass
    sys.exit(f"cannot serve the hub on {ip}:{port}: {reason}. Stop what uses that port, or choose another "
             "(COURSE_HUB_PORT; `make hub HUB_PORT=8001`)")


c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

state = Path(env("COURSE_HUB_STATE", "/srv/jupyterhub"))
state.mkdir(parents=True, exist_ok=True)
c.JupyterHub.ip = env("COURSE_HUB_IP", "127.0.0.1")
# JupyterHub's own advice for untrusted users: an origin per server, so no learner's page can script
# the hub, the instructor's server or a service with whoever opens it.
subdomain_host = env("COURSE_HUB_SUBDOMAIN_HOST", "")
if subdomain_host:
    c.JupyterHub.subdomain_host = subdomain_host
c.JupyterHub.port = int(env("COURSE_HUB_PORT", "8000"))
require_free(c.JupyterHub.ip, c.JupyterHub.port, state / "jupyterhub-proxy.pid")
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("COURSE_HUB_API_PORT", "8081"))
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{free_port()}"
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")
# configurable-http-proxy from the npm registry, as `make hub` installs it (or one on PATH).
proxy = REPO / ".hub" / "node_modules" / ".bin" / "configurable-http-proxy"
c.ConfigurableHTTPProxy.command = [str(proxy) if proxy.exists() else "configurable-http-proxy"]

instructor = env("COURSE_INSTRUCTOR", "instructor")
learners = {name.strip() for name in env("COURSE_LEARNERS", "").split(",") if name.strip()}
graders = {name.strip() for name in env("COURSE_GRADERS", "").split(",") if name.strip()}
lti = env("COURSE_LTI", "")
if lti:  # the LMS's roster (NRPS, `python -m grader.classroom.lti roster`): its learners and TAs join the class
    from grader.classroom.lti.platform import load_platform
    from grader.classroom.lti.roster import roster_roles

    try:
        platform = load_platform(Path(lti))
    except ValueError as err:
        sys.exit(f"COURSE_LTI: {err}")
    roster = roster_roles(Path(lti))
    learners |= roster["learner"]
    graders |= roster["grader"]
    os.environ["COURSE_LEARNERS"] = ",".join(sorted(learners))  # the gate a launch passes (identity.the_class)
if graders & (learners | {instructor}):
    sys.exit(f"COURSE_GRADERS: {', '.join(sorted(graders & (learners | {instructor})))} cannot be a grader and "
             "also a learner or the instructor (a grader sees the whole class; the instructor has more)")
c.Authenticator.admin_users = {instructor}
if learners:
    c.Authenticator.allowed_users = {instructor, *learners, *graders}
else:
    c.Authenticator.allow_all = True  # everyone the authenticator lets in (PAM: the machine's accounts)

if lti:  # a learner comes from the LMS, already logged in there (grader.classroom.lti.hub)
    c.JupyterHub.authenticator_class = "grader.classroom.lti.hub.CourseLTIAuthenticator"
    c.CourseLTIAuthenticator.lti_folder = lti
    c.CourseLTIAuthenticator.staff = {instructor, *graders}
    c.CourseLTIAuthenticator.issuer = platform.issuer
    c.CourseLTIAuthenticator.client_id = {platform.client_id}
    c.CourseLTIAuthenticator.authorize_url = platform.auth_login_url
    c.CourseLTIAuthenticator.jwks_endpoint = platform.key_set_url
elif env("COURSE_HUB_AUTHENTICATOR", "pam") == "dummy":
    if not env("COURSE_HUB_PASSWORD"):
        sys.exit("COURSE_HUB_AUTHENTICATOR=dummy needs COURSE_HUB_PASSWORD (the one password of the try-out)")
    c.JupyterHub.authenticator_class = "dummy"
    c.DummyAuthenticator.password = env("COURSE_HUB_PASSWORD")
else:
    c.JupyterHub.authenticator_class = "pam"

simple = env("COURSE_HUB_SPAWNER", "local") == "simple"
# The instructor's server runs from the course's environment (grader, nbgrader's instructor tools); a
# learner's, with `local`, from the learners' environment, whose copy of this folder's Jupyter config
# setup-class.sh keeps (the repository is closed to learners).
learners_env = Path(env("COURSE_LEARNER_ENV", "/srv/course/learners-env"))
learners_bin, learners_config = (BIN, HERE) if simple else (learners_env / "bin", learners_env / "etc" / "course")
if not simple:
    if not (learners_bin / "jupyterhub-singleuser").exists():
        sys.exit(f"no learners' environment at {learners_env} (COURSE_LEARNER_ENV): run "
                 "`sudo deploy/jupyterhub/setup-class.sh` first (guides/teaching.md: A try-out is not a class)")
    if REPO.stat().st_mode & 0o007:
        sys.exit(f"{REPO} is open to every unix user (mode {REPO.stat().st_mode & 0o777:o}): a learner could import "
                 "the answers and read the hidden tests. Run `sudo deploy/jupyterhub/setup-class.sh` first")
    state.chmod(0o700)  # the hub's database and cookie secret


def bin_of(spawner) -> Path:
    return BIN if spawner.user.name == instructor else learners_bin


# The learners' JupyterLab has a Help-menu item leading to the grading page (lab_settings.py). With `local`,
# setup-class.sh wrote it into the learners' environment; with `simple`, learners share the course's own
# environment with the instructor, so their servers read it from the hub's state folder instead.
learner_lab_settings = None
if simple and env("COURSE_GRADING_SERVICE", "on") != "off":
    learner_lab_settings = state / "learner-lab-settings"
    lab_settings = runpy.run_path(str(HERE / "lab_settings.py"))
    lab_settings["write"](learner_lab_settings, lab_settings["grading_url"](subdomain_host))


def choose_environment(spawner) -> None:
    spawner.cmd = [str(bin_of(spawner) / "jupyterhub-singleuser")]
    if learner_lab_settings is not None and spawner.user.name != instructor:
        spawner.cmd.append(f"--LabApp.app_settings_dir={learner_lab_settings}")


c.Spawner.pre_spawn_hook = choose_environment
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
exchange = env("COURSE_EXCHANGE_ROOT", "/srv/nbgrader/exchange")
course_dir = env("COURSE_DIRECTORY")
c.Spawner.environment = {
    "PATH": lambda spawner: f"{bin_of(spawner)}{os.pathsep}{env('PATH', '/usr/bin:/bin')}",
    # nbgrader reads nbgrader_config.py from every folder on the Jupyter config path: this one's. A
    # learner's path starts with learner/, which turns off nbgrader's instructor tools (Formgrader,
    # Create Assignment, the course list) in their server and their JupyterLab.
    "JUPYTER_CONFIG_PATH": lambda spawner: str(HERE) if spawner.user.name == instructor
    else os.pathsep.join([str(learners_config / "learner"), str(learners_config)]),
    "COURSE_EXCHANGE_ROOT": exchange,
    # a terminal's login shell resets PATH; jupyter_server_config.py puts this back
    "COURSE_BIN": lambda spawner: str(bin_of(spawner)),
    "MPLBACKEND": "Agg",
}
if simple:
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(state / "home" / "{username}")
    instructor_home = state / "home" / instructor
else:
    c.JupyterHub.spawner_class = "localprocess"
    c.LocalProcessSpawner.create_system_users = False
    instructor_home = Path(os.path.expanduser(f"~{instructor}"))
# Only the instructor's server knows the course directory (formgrader, `grader collect`) and the class
# (COURSE_LEARNERS: every student id `grader collect` and `grader autograde` accept is one of them,
# grader.classroom.intake.identity).
c.Spawner.environment["COURSE_DIRECTORY"] = lambda spawner: (
    course_dir or str(instructor_home / "course")) if spawner.user.name == instructor else ""
c.Spawner.environment["COURSE_LEARNERS"] = lambda spawner: (
    ",".join(sorted(learners)) if spawner.user.name == instructor else "")
c.Spawner.args = shlex.split(env("COURSE_SERVER_ARGS", ""))  # more options for every learner's server
if os.getuid() == 0:
    c.Spawner.args.append("--allow-root")  # the simple spawner runs every server as the hub's user

# Grading on submit: a hub-managed service (restarted by the hub if it dies, ending with the hub, one per
# course directory: a second refuses while the first runs) that watches the exchange's
# inbound folder and grades what term.toml's [on_submit] asks for; its pages sit under /services/grading/,
# behind the hub's login. Every user may open them; each learner sees their own rows only.
course_path = course_dir or str(instructor_home / "course")
services, roles = [], []
if env("COURSE_GRADING_SERVICE", "on") != "off":
    service = {
        "name": "grading",
        "url": f"http://127.0.0.1:{free_port()}",
        "command": [str(BIN / "grader"), "serve", "--course-dir", course_path, "--exchange", exchange,
                    "--instructor", instructor, "--hub-pid", str(os.getpid()),
                    *(arg for grader in sorted(graders) for arg in ("--grader", grader))],
        "oauth_no_confirm": True,
        "timeout": 120,  # seconds to answer: it starts its warm pool (torch) first; JupyterHub's 10 s is short
        # COURSE_LEARNERS: the class every submission's learner and accommodation must be in
        # (grader.classroom.intake.identity)
        "environment": {"PATH": f"{BIN}{os.pathsep}{env('PATH', '/usr/bin:/bin')}", "MPLBACKEND": "Agg",
                        "COURSE_EXCHANGE_ROOT": exchange, "COURSE_LEARNERS": ",".join(sorted(learners)),
                        "COURSE_LTI": lti},  # it posts each total to the LMS gradebook (grader.classroom.lti.outbox)
    }
    if not simple:
        service["cwd"] = course_path  # setup-class.sh made it; the hub's own folder is root's alone
        service["user"] = env("COURSE_GRADING_USER", instructor)
    else:  # a try-out: every server is the hub's unix user, so no folder's owner tells learners apart
        service["command"].append("--no-check-owner")
    services.append(service)
    roles.append({"name": "user", "scopes": ["self", "access:services!service=grading"]})

# The graders' Formgrader: nbgrader's, as a hub service in the course directory, run as the grading user with
# this folder's formgrader/ first on its Jupyter config path (hand grading; no release, collect, autograde, due dates,
# files, kernels or terminals: formgrader/shared_formgrader.py). The instructor keeps their own, in their server.
# A failing config or extension stops it (the hub restarts it) rather than serving stock Formgrader.
if graders:
    shared = HERE / "formgrader"
    formgrader = {
        "name": "formgrader",
        "url": f"http://127.0.0.1:{free_port()}",
        "command": [str(BIN / "jupyterhub-singleuser"), "--ServerApp.reraise_server_extension_failures=True",
                    *(["--allow-root"] if os.getuid() == 0 else [])],
        "cwd": course_path,  # nbgrader reads the course directory's own nbgrader_config.py from there
        "oauth_no_confirm": True,
        "timeout": 120,  # seconds to answer: Jupyter Server and nbgrader start in several on a busy machine
        # formgrader/ first on the config path: its Jupyter Server and nbgrader config, then this folder's
        "environment": {"PATH": f"{BIN}{os.pathsep}{env('PATH', '/usr/bin:/bin')}", "PYTHONPATH": str(shared),
                        "JUPYTER_CONFIG_PATH": os.pathsep.join([str(shared), str(HERE)]),
                        "COURSE_DIRECTORY": course_path, "COURSE_EXCHANGE_ROOT": exchange,
                        "TRAITLETS_APPLICATION_RAISE_CONFIG_FILE_ERROR": "1",
                        "COURSE_HUB_PID": str(os.getpid())},  # it ends with this hub (shared_formgrader.py)
    }
    if simple:
        Path(course_path).mkdir(parents=True, exist_ok=True)
    else:
        formgrader["user"] = env("COURSE_GRADING_USER", instructor)
    services.append(formgrader)
    # JupyterHub only ever adds to a group; the role, named user by user, is exact at each start: a grader
    # taken off COURSE_GRADERS loses it (and the service's --grader) with the next start.
    c.JupyterHub.load_groups = {"graders": {"users": sorted(graders)}}
    roles.append({"name": "grader", "description": "the class's graders: the shared Formgrader and the grading service",
                  "users": sorted(graders),
                  "scopes": [f"access:services!service={s['name']}" for s in services]})
c.JupyterHub.services = services
c.JupyterHub.load_roles = roles
