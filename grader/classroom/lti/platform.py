"""The LMS a class is registered with, and the tool's key: $COURSE_LTI/platform.json.

    {"issuer": "https://canvas.instructure.com", "client_id": "10000000000001",
     "deployment_ids": ["1:abc"], "auth_login_url": "https://.../api/lti/authorize_redirect",
     "auth_token_url": "https://.../login/oauth2/token", "key_set_url": "https://.../api/lti/security/jwks",
     "tool_private_key": "tool.pem"}

A launch from any other issuer, client id or deployment is refused (grader.classroom.lti.launch).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

LTI_ENV = "COURSE_LTI"
REQUIRED = ("issuer", "client_id", "deployment_ids", "auth_login_url", "auth_token_url", "key_set_url",
            "tool_private_key")


@dataclass(frozen=True)
class Platform:
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_login_url: str
    auth_token_url: str
    key_set_url: str
    tool_private_key: Path
    folder: Path

    def registration(self):
        """pylti1p3's Registration: what its service calls sign with and send to."""
        from cryptography.hazmat.primitives import serialization
        from pylti1p3.registration import Registration

        private = self.tool_private_key.read_text()
        public = serialization.load_pem_private_key(private.encode(), password=None).public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
        return (Registration().set_issuer(self.issuer).set_client_id(self.client_id)
                .set_auth_login_url(self.auth_login_url).set_auth_token_url(self.auth_token_url)
                .set_key_set_url(self.key_set_url).set_tool_private_key(private).set_tool_public_key(public))


def lti_folder() -> Path | None:
    """The class's LTI folder ($COURSE_LTI), or None: the class is not in an LMS."""
    value = os.environ.get(LTI_ENV, "").strip()
    return Path(value) if value else None


def load_platform(folder: Path | None = None) -> Platform | None:
    """The registration in `folder`/platform.json (default $COURSE_LTI); None without one; ValueError
    saying what is wrong with a broken one."""
    folder = folder if folder is not None else lti_folder()
    if folder is None:
        return None
    path = folder / "platform.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a readable JSON registration ({err})") from None
    missing = [key for key in REQUIRED if not data.get(key)]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)} (guides/teaching.md: The course in your LMS)")
    urls = [key for key in ("issuer", "auth_login_url", "auth_token_url", "key_set_url")
            if not str(data[key]).startswith(("https://", "http://"))]
    if urls:
        raise ValueError(f"{path}: {', '.join(urls)} must be a URL")
    if not isinstance(data["deployment_ids"], list) or not all(isinstance(d, str) for d in data["deployment_ids"]):
        raise ValueError(f"{path}: deployment_ids must be a list of the LMS's deployment ids")
    key = folder / data["tool_private_key"]
    if not key.is_file():
        raise ValueError(f"{path}: the tool's private key {key} does not exist")
    return Platform(str(data["issuer"]), str(data["client_id"]), tuple(data["deployment_ids"]),
                    data["auth_login_url"], data["auth_token_url"], data["key_set_url"], key, folder)
