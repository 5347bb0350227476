"""Django settings of the LTI 1.3 test platform: Open edX's lti_consumer app (the code Open edX's LMS runs to
launch LTI 1.3 tools, serve AGS and NRPS) hosted by a small Django site instead of the LMS. Runs in its own
virtualenv (.lti-platform/venv, `make lti-platform-setup`); tests/lti_platform.py starts it."""
import os
from pathlib import Path

STATE = Path(os.environ["LTI_PLATFORM_STATE"])
BASE_URL = os.environ["LTI_PLATFORM_URL"]  # http://127.0.0.1:PORT, the issuer
HARNESS_KEY = os.environ["LTI_PLATFORM_KEY"]  # the harness's control API answers only this key

SECRET_KEY = HARNESS_KEY
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
INSTALLED_APPS = [
    "django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions", "django.contrib.staticfiles",
    "rest_framework", "django_filters", "config_models", "lti_consumer", "host",
]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True, "DIRS": [],
              "OPTIONS": {"context_processors": ["django.template.context_processors.request"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(STATE / "platform.sqlite3"),
                         "OPTIONS": {"timeout": 30}}}
# The launch data lives in the cache between the OIDC login and the launch: one process, its memory.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
STATIC_URL = "/static/"
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"file": {"class": "logging.FileHandler", "filename": str(STATE / "platform.log")}},
           "root": {"handlers": ["file"], "level": "INFO"}}

# What lti_consumer reads from the LMS's settings (its test_settings.py names them).
USAGE_ID_PATTERN = r"(?P<usage_id>(?:i4x://?[^/]+/[^/]+/[^/]+/[^@]+(?:@[^/]+)?)|(?:[^/]+))"
LMS_ROOT_URL = BASE_URL
LMS_BASE = BASE_URL.split("://", 1)[1]
LTI_BASE = BASE_URL
LTI_API_BASE = BASE_URL
PLATFORM_NAME = "LTI test platform (Open edX lti_consumer)"
FEATURES = {}
SERVICE_VARIANT = "lms"
REST_FRAMEWORK = {"PAGE_SIZE": 100}
COURSE_TITLE = "Transformers, built from scratch"
